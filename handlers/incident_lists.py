"""Where an answer about incidents may go, and how a list of them is cut into Slack messages.

Incidents are the alerts channel's (SLACK_ALERTS_CHANNEL): `/gemma incidents`, `/gemma handoff` and
`/gemma postmortem` asked there are posted there; asked anywhere else in Slack (another channel, a DM) they
answer the asker alone, ephemerally, naming people as plain `@ID` so nobody there is pinged (README
"Incidents"; handlers/commands/incidents.py `audience` decides). The console and MCP answer only their caller,
so they answer as before.

Lists page: PAGE_ROWS incidents a page, the counts from every incident kept, and the footer says what the page
left out and the command that shows it. Rows are packed into sections under Block Kit's 3,000 characters
(counted after escaping), never clipped.
"""

from __future__ import annotations

from dataclasses import dataclass

from handlers.render_slack import escape
from handlers.reply import Reply

PAGE_ROWS = 20
SECTION_MAX = 2800  # under the renderer's 2,900 (and Block Kit's 3,000) after escaping


@dataclass(frozen=True)
class Audience:
    """Who reads an answer that names the alerts channel's incidents."""

    public: bool  # posted where it was asked (the alerts channel; the console; MCP)

    def name(self, r: Reply, user_id: str) -> str:
        """A person: a mention in public, else plain `@ID` (an answer in another channel pings nobody)."""
        return r.mention(user_id) if self.public else f"@{user_id}"

    def address(self, r: Reply) -> Reply:
        """`r` for this audience: elsewhere it is ephemeral and carries no file (an upload would be the channel's)."""
        if not self.public:
            r.ephemeral, r.mentions = True, []
            if r.files:
                r.files = []
                r.add(text="The Markdown file is attached when this is asked in the alerts channel.")
        return r


def add_rows(r: Reply, heading: str, rows: list[str]) -> None:
    """`rows` under `heading`, in as many sections as Block Kit's size limit needs ("none" when empty)."""
    chunk: list[str] = []
    size = 0
    for row in rows:
        n = len(escape(row)) + 1
        if chunk and size + n > SECTION_MAX:
            r.add(heading=heading, text="\n".join(chunk))
            heading, chunk, size = "", [], 0
        chunk.append(row)
        size += n
    r.add(heading=heading or None, text="\n".join(chunk) or "none")


def pages(total: int) -> int:
    return max(1, -(-total // PAGE_ROWS))
