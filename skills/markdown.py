"""Outside text written into Markdown as data: it reads as typed and never becomes structure.

Alert fields, resolve notes, audit details, revision names, user ids and the model's prose go into the
postmortem file (skills/incidents/postmortem.py). Without escaping, a policy name `x\\n## Cause\\nforged` plants a
section, a note with `| a | b |` rows forges timeline rows, and a backtick in a revision name ends the code span
around it. Each helper is for one position (CommonMark 0.31 and GitHub Flavored Markdown's tables,
https://spec.commonmark.org/0.31.2/ and https://github.github.com/gfm/#tables-extension-):

- `inline`: inside a line of our own (a heading, a list item, a table cell, a paragraph). Line breaks become
  spaces, so nothing can start a block; a leading block marker (`#`, `>`, `-`, `+`, `*`, `=`, `~`, `_`, `1.`) is
  escaped (and `[`: a link reference definition), so the text cannot open a heading, quote, list or thematic
  break where it begins a line or a list item's content; `\\`, backticks, `|` (a table cell's end: GFM lets a
  backslash escape it, inside code spans too), `<` (raw HTML, autolinks) and `](` / `][` (a link's target) are
  escaped. Emphasis characters mid-line are left: they can style the text, not add a section or a row, and
  escaping them would litter every snake_case name.
- `code`: a code span around outside text, however many backticks it holds (a fence one longer than its longest
  run, padded when it starts or ends with one).
- `block`: several lines (the model's prose): each line as `inline`, the blank lines between paragraphs kept.

Slack mrkdwn is another format with its own escaping (handlers/render_slack.py `escape`), done by the renderer.
"""

from __future__ import annotations

import re

# Every line break CommonMark or a browser honours (\r\n, \r, \n, form feed, vertical tab, NEL, LS, PS).
_BREAKS = re.compile(r"\r\n|[\r\n\f\v\x85\u2028\u2029]")
_INLINE = re.compile(r"[\\`|<]|\](?=[(\[])")
# What opens a block where a line (or a list item's content) starts: ATX headings, quotes, bullets, setext
# underlines and thematic breaks, fenced code (backticks are escaped anyway), a link reference definition, and
# ordered list markers.
_LEADING = re.compile(r"^([#>\-+*=~_\[])|^(\d{1,9})([.)])")


def one_line(text: str) -> str:
    """`text` on one line: every line break a space, stripped (four leading spaces would make a code block)."""
    return _BREAKS.sub(" ", text).strip()


def inline(text: str) -> str:
    """`text` as data inside one line of Markdown: one line, no markup that could add a block, a row or a link."""
    out = _INLINE.sub(lambda m: "\\" + m.group(0), one_line(text))
    return _LEADING.sub(lambda m: "\\" + m.group(1) if m.group(1) else m.group(2) + "\\" + m.group(3), out, count=1)


def code(text: str) -> str:
    """`text` as a code span: one line, fenced by more backticks than it holds in a row."""
    one = one_line(text)
    longest = max((len(run) for run in re.findall(r"`+", one)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if one.startswith("`") or one.endswith("`") else ""
    return f"{fence}{pad}{one}{pad}{fence}" if one else ""


def plain_code(text: str) -> str:
    """`text` as a code span for Slack mrkdwn and plain text, which have no longer fences or escapes: one line,
    its backticks shown as `'` so none can close the span (Slack formats nothing inside a code span)."""
    return "`" + one_line(text).replace("`", "'") + "`"


def block(text: str) -> str:
    """Lines of outside text (a paragraph or several): each line as `inline`, blank lines kept between them."""
    lines = [inline(line) for line in _BREAKS.sub("\n", text).split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")
