"""Bounded memory for a log of any size: redact every entry as it streams by, keep only what a diagnosis and a
digest can use, and count the rest.

A 10-million-line export is mostly the same few hundred patterns repeated (metrics every 10 s, access lines,
the same warning in a loop). The diagnosis needs each pattern's first occurrences (where it started, a
traceback's frames) and last ones (the state it ended in), and how often it happened -- not every repeat. So:
- redaction is decided in stream order by one EntryRedactor for the whole stream (a private key printed one
  line per entry stays masked whatever read-chunk boundary falls inside it): an entry whose redaction depends
  on that carried state is redacted as it passes; any other is plain `redact()` of its own text, done when it
  is kept (most entries are only counted, and redaction is the costliest step per line);
- an entry's pattern is its first 160 characters with every token holding a digit replaced (cheap, and stable
  across timestamps, ids, counters);
- per pattern the first `head` and the last `tail` entries are kept, the rest counted;
- patterns beyond `max_patterns` (a log of unique lines) share one bounded ring of the latest entries.
Memory is then bounded by max_patterns x (head + tail) + ring entries, whatever the input size. The numbers are
our choice: 4,000 patterns and 3 + 3 per pattern keep a few tens of MB (measured: bench/diagnose_memory.py).
"""

from __future__ import annotations

import itertools
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from skills.logs.redact import redact
from skills.logs.redact_entries import EntryRedactor
from skills.ports import LogEntry

_DIGIT = re.compile(r"\d")


def pattern_of(text: str) -> str:
    return " ".join("*" if _DIGIT.search(t) else t for t in text[:160].split())


@dataclass
class _Pattern:
    # ((order, already redacted), entry)
    head: list[tuple[tuple[int, bool], LogEntry]] = field(default_factory=list)
    tail: deque[tuple[tuple[int, bool], LogEntry]] = field(default_factory=deque)
    count: int = 0


class LogSieve:
    def __init__(self, *, head: int = 3, tail: int = 3, max_patterns: int = 4000, ring: int = 2000) -> None:
        self.head, self.tail, self.max_patterns = head, tail, max_patterns
        self._patterns: dict[str, _Pattern] = {}
        self._ring: deque[tuple[tuple[int, bool], LogEntry]] = deque(maxlen=ring)
        self._redactor = EntryRedactor()
        self._n = itertools.count()
        self.seen = 0  # entries read
        self.lines = 0  # lines in them

    def add(self, entry: LogEntry) -> None:
        done = self._redactor.carries_state(entry)
        if done:  # in stream order, before anything is kept or dropped
            entry = self._redactor.entry(entry)
        i = (next(self._n), done)
        self.seen += 1
        self.lines += entry.text.count("\n") + 1
        key = pattern_of(entry.text)
        p = self._patterns.get(key)
        if p is None:
            if len(self._patterns) >= self.max_patterns:
                self._ring.append((i, entry))
                return
            p = self._patterns[key] = _Pattern(tail=deque(maxlen=self.tail))
        p.count += 1
        if len(p.head) < self.head:
            p.head.append((i, entry))
        else:
            p.tail.append((i, entry))

    def extend(self, entries: Iterable[LogEntry]) -> LogSieve:
        for e in entries:
            self.add(e)
        return self

    def kept(self) -> list[LogEntry]:
        """The kept entries, in their original order, redacted."""
        out = [pair for p in self._patterns.values() for pair in itertools.chain(p.head, p.tail)]
        out.extend(self._ring)
        out.sort(key=lambda pair: pair[0])
        return [e if done else _redacted(e) for (_, done), e in out]

    def note(self) -> str:
        """What was left out, for the report ('' when everything was kept)."""
        kept = sum(len(p.head) + len(p.tail) for p in self._patterns.values()) + len(self._ring)
        if kept >= self.seen:
            return ""
        return (
            f"{self.seen} entries ({self.lines} lines) read; {kept} kept for the analysis: repeats beyond the first "
            f"{self.head} and last {self.tail} of each pattern were counted, not kept"
        )


def _redacted(e: LogEntry) -> LogEntry:
    text = redact(e.text)
    return e if text == e.text else e.model_copy(update={"text": text})
