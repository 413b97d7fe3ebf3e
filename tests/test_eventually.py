"""The polling helper fails the test itself when its condition never holds (a caller that forgets to assert
cannot pass on a timeout), and says what it last saw."""

from __future__ import annotations

import pytest

from tests.eventually import eventually


async def test_a_condition_that_never_holds_raises_with_the_last_result() -> None:
    seen: list[int] = []

    def grows() -> list[int]:
        seen.append(len(seen))
        return [] if len(seen) < 10_000 else seen

    with pytest.raises(AssertionError, match=r"never held within 0\.05 s; last saw \[\]"):
        await eventually(grows, timeout=0.05)
    assert len(seen) >= 2  # it polled, it did not give up at once


async def test_the_first_truthy_result_is_returned_awaited_or_not() -> None:
    n = 0

    async def third_time() -> int:
        nonlocal n
        n += 1
        return n if n >= 3 else 0

    assert await eventually(third_time) == 3
    assert await eventually(lambda: "ok") == "ok"
