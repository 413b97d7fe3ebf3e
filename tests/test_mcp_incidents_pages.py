"""The MCP resource of open incidents does not stop silently (issue 45, item 6): through the MCP SDK client against
`gemma-sre mcp --http` on the shared Redis, more open incidents than a page holds are read page by page (each
page says the total and how many it shows, and names the next page's URI); following `next` yields every open
incident once, newest first, even when incidents open and resolve between two reads."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import redis.asyncio as redis
from mcp.shared.exceptions import MCPError

from skills.incidents.model import Alert
from skills.incidents.store import IncidentStore
from tests.test_mcp_server import (  # noqa: F401  (http_server: the fixture)
    _resource_text,
    http_server,
    http_session,
    http_up,
)

URI = "gemma-sre://incidents/open"
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def _alert(n: int, state: str = "firing", test: bool = False) -> Alert:
    return Alert(  # type: ignore[arg-type]
        source="alertmanager",
        fingerprint=f"fp{n:03d}",
        state=state,
        name=f"Cond{n}",
        test=test,
        revision=f"rev-{n}",
        started_at=NOW + timedelta(seconds=n),
    )


async def test_open_incidents_page_and_say_how_many(
    http_server: tuple[str, dict[str, str]],  # noqa: F811
    redis_client: redis.Redis,
    key_prefix: str,
) -> None:
    url, tokens = http_server
    store = IncidentStore(redis_client, key_prefix)
    entry = iter(range(1, 1000))

    async def record(n: int, state: str = "firing", test: bool = False) -> str:
        at = NOW + timedelta(seconds=n // 2)  # two at each second: the order of a tie is the id's
        inc, _ = await store.record(
            f"{next(entry)}-0", _alert(n, state, test), at, channel="C1", known=frozenset(), window_s=0
        )
        return inc.id

    ids = {n: await record(n) for n in range(60)}
    for n in (3, 30, 59):
        await record(n, "resolved")  # resolved: not listed, not counted
    await record(70, test=True)  # the console's test notification: not an incident anyone works
    open_ids = [ids[n] for n in sorted(ids, key=lambda n: (n // 2, ids[n]), reverse=True) if n not in (3, 30, 59)]

    await http_up(url)
    async with http_session(url, tokens["U2"]) as session:
        templates = (await session.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == [URI + "{?cursor}"]
        first = json.loads(_resource_text(await session.read_resource(URI)))
        assert (first["total"], first["shown"], first["more"]) == (57, 50, 7)
        assert [i["id"] for i in first["incidents"]] == open_ids[:50]
        # What tells incidents of one alert apart: the revision it is about, when it started, its leading finding.
        newest = first["incidents"][0]
        assert (newest["revision"], newest["started_at"], newest["finding"]) == (
            "rev-58",
            (NOW + timedelta(seconds=58)).isoformat(),
            "",
        )
        assert first["next"].startswith(URI + "?cursor=")

        # Between two reads one incident of the first page resolves and a new one opens: the next page goes on
        # where the first ended (an offset would skip one), and the total is the store's as it is now.
        await record(50, "resolved")
        await record(80)
        second = json.loads(_resource_text(await session.read_resource(first["next"])))
        assert [i["id"] for i in second["incidents"]] == open_ids[50:]
        assert (second["total"], second["shown"], second["newer"], second["more"]) == (57, 7, 50, 0)
        assert second["next"] is None

        with pytest.raises(MCPError) as bad:
            await session.read_resource(URI + "?cursor=" + "x" * 100_000)
        assert "cursor" in bad.value.error.message and len(bad.value.error.message) < 200
