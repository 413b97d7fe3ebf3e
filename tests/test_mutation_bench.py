"""bench/mutation.py tells the truth: the mutator makes the bugs it names (a dropped call, an unwrapped nested call,
a dropped table entry) and leaves prose alone; a target that ran nothing has no score; the overall line is over
what ran, with the share that ran beside it; the sample is fixed by its seed."""

from __future__ import annotations

from bench.mutants import mutants_of
from bench.mutation import TARGETS, Job, Target, report, sample

SOURCE = '''"""Module docstring: never mutated."""
import re

PATTERNS = rx("CUDA out of memory", "OOM when allocating tensor")
LIMITS = {"l4": 24, "a100": 80}


def rx(*alternatives: str) -> re.Pattern[str]:
    return re.compile("|".join(alternatives))


class Queue:
    async def process(self, entry_id: str, text: str) -> str:
        """A docstring."""
        log.warning("a log line %s with wording nobody mutates", entry_id)
        if entry_id in ("0-0", "1-0"):
            return ""
        await self._ack(entry_id)
        keep = unquote(unquote(text))  # pragma: no mutate
        return unquote(unquote(text))
'''


def _by_op(op: str) -> list[str]:
    return [f"{m.before.strip()} -> {m.after}" for m in mutants_of("m.py", SOURCE) if m.op == op]


def test_a_call_made_for_its_effect_can_be_dropped() -> None:
    assert _by_op("drop-call") == ["await self._ack(entry_id) -> pass"]


def test_a_nested_call_can_be_skipped_but_not_on_a_line_marked_no_mutate() -> None:
    [m] = [m for m in mutants_of("m.py", SOURCE) if m.op == "unwrap" and "unquote" in m.before]
    assert m.apply(SOURCE).count("return unquote((text))") == 1
    assert "keep = unquote(unquote(text))" in m.apply(SOURCE)


def test_one_entry_of_a_table_can_be_dropped() -> None:
    dropped = [m.apply(SOURCE) for m in mutants_of("m.py", SOURCE) if m.op == "drop-entry"]
    assert 'PATTERNS = rx("OOM when allocating tensor")' in "".join(dropped)
    assert 'PATTERNS = rx("CUDA out of memory")' in "".join(dropped)
    assert 'LIMITS = {"a100": 80}' in "".join(dropped)
    assert 'if entry_id in ("1-0"):' in "".join(dropped) or 'if entry_id in ("1-0",):' in "".join(dropped)


def test_docstrings_log_lines_and_annotations_are_left_alone() -> None:
    for m in mutants_of("m.py", SOURCE):
        assert "docstring" not in m.before and "wording nobody mutates" not in m.before
        assert "re.Pattern" not in m.before
        compile(m.apply(SOURCE), "m.py", "exec")  # every mutant is still a module


def test_every_key_is_unique_and_names_where_and_what() -> None:
    keys = [m.key for m in mutants_of("m.py", SOURCE)]
    assert len(keys) == len(set(keys))
    assert "m.py:Queue.process:drop-call: await self._ack(entry_id) -> pass" in keys


def _job(target: Target, status: str) -> Job:
    [m] = [m for m in mutants_of("m.py", SOURCE) if m.op == "drop-call"]
    return Job(target, m, [], True, 60.0, status=status)


def test_a_target_that_ran_nothing_has_no_score_and_the_total_counts_only_what_ran() -> None:
    a, b = Target("a", ("m.py",), (), ""), Target("b", ("m.py",), (), "")
    jobs = [_job(a, "killed"), _job(a, "survived"), _job(b, "unrun"), _job(b, "unrun")]
    table, overall = report([a, b], {"a": 10, "b": 10}, jobs, 1.0)
    row_b = next(ln for ln in table.splitlines() if ln.startswith("b "))
    assert "%" not in row_b and "—" in row_b
    assert overall == 50.0
    assert "ran 50.0% of the sample; 1/2 50.0% killed" in table


def test_nothing_run_at_all_is_no_score() -> None:
    a = Target("a", ("m.py",), (), "")
    table, overall = report([a], {"a": 3}, [_job(a, "unrun")], 1.0)
    assert overall is None and "no score" in table


def test_the_sample_is_fixed_by_seed_and_target() -> None:
    ms = mutants_of("m.py", SOURCE)
    t = TARGETS[0]
    assert sample(t, ms, 5, 44) == sample(t, ms, 5, 44)
    assert len(sample(t, ms, 5, 44)) == 5
    assert sample(t, ms, 5, 44) != sample(t, ms, 5, 45)
    assert sample(t, ms, 0, 44) == ms
