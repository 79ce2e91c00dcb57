"""Farm controls as values: ``RateLimit``, ``RetryPolicy``, the new definition fields."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from tests.core._farm_helpers import schedule_starts, windows_ok
from toolray import (
    Placement,
    RateLimit,
    RetryPolicy,
    ToolDefinition,
    ToolOutput,
    define_tool,
    text_block,
    tool,
)
from toolray.errors import HarnessError, RateLimitedError, ResultTooLargeError
from toolray.farm import TokenSchedule

OUTPUT = ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)])


def plain(**controls: Any) -> ToolDefinition:
    """A ``define_tool`` tool with ``controls`` (the farm-control keywords under test)."""
    return define_tool(
        name="t",
        description=None,
        parameters={},
        output=OUTPUT,
        execute=lambda a, c: "x",
        **controls,
    )


def test_rate_limit_defaults_and_positional_rate() -> None:
    limit = RateLimit(25)
    assert (limit.per_second, limit.burst, limit.max_wait_ms) == (25, 1, None)
    assert RateLimit(0.5, 3, 100.0).max_wait_ms == 100.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"per_second": 0},
        {"per_second": -1},
        {"per_second": math.inf},
        {"per_second": True},
        {"per_second": 1, "burst": 0},
        {"per_second": 1, "burst": 1.5},
        {"per_second": 1, "max_wait_ms": -1},
        {"per_second": 1, "max_wait_ms": math.nan},
    ],
)
def test_rate_limit_rejects_bad_values(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="RateLimit"):
        RateLimit(**kwargs)  # type: ignore[arg-type]


def test_retry_policy_defaults_and_backoff() -> None:
    policy = RetryPolicy()
    assert (policy.attempts, policy.backoff_ms, policy.multiplier) == (3, 100, 2.0)
    assert policy.on == ("WORKER_LOST", "TOOL_TIMEOUT")
    assert [policy.delay_ms(n) for n in (1, 2, 3)] == [100.0, 200.0, 400.0]
    assert RetryPolicy(on=["X"]).on == ("X",)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [{"attempts": 0}, {"backoff_ms": -1}, {"multiplier": 0.5}, {"on": (1,)}, {"on": ("",)}],
)
def test_retry_policy_rejects_bad_values(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="RetryPolicy"):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_a_retry_policy_needs_an_idempotent_tool_everywhere() -> None:
    with pytest.raises(ValueError, match="idempotent=True"):
        plain(retry=RetryPolicy())
    with pytest.raises(ValueError, match="idempotent=True"):

        @tool(retry=RetryPolicy())
        def fetch(url: str) -> str:
            """Fetch."""
            return url

    with pytest.raises(ValueError, match="idempotent=True"):
        ToolDefinition(
            name="t",
            description=None,
            parameters={},
            output=OUTPUT,
            execute=lambda a, c: "x",
            retry=RetryPolicy(),
        )
    ok = plain(idempotent=True, retry=RetryPolicy(attempts=2))
    assert ok.idempotent
    assert ok.retry == RetryPolicy(attempts=2)


def test_definition_fields_default_to_no_controls() -> None:
    @tool
    def bare(a: int) -> int:
        """Bare."""
        return a

    assert bare.rate_limit is None
    assert bare.retry is None
    assert bare.idempotent is False
    assert bare.max_result_bytes is None
    assert bare.max_content_chars is None


@pytest.mark.parametrize("field", ["max_result_bytes", "max_content_chars"])
@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "10"])
def test_bounds_must_be_positive_integers(field: str, bad: object) -> None:
    with pytest.raises(ValueError, match=field):
        plain(**{field: bad})  # type: ignore[arg-type]


def test_rate_limit_must_be_a_rate_limit() -> None:
    with pytest.raises(TypeError, match="rate_limit"):
        plain(rate_limit=25)  # type: ignore[arg-type]


def test_placement_elastic_fields() -> None:
    p = Placement(min_size=1, max_size=4, idle_s=0.5)
    assert (p.min_size, p.max_size, p.idle_s) == (1, 4, 0.5)
    with pytest.raises(ValueError, match="min_size"):
        Placement(min_size=3, max_size=2)
    with pytest.raises(ValueError, match="max_size"):
        Placement(max_size=0)
    with pytest.raises(ValueError, match="idle_s"):
        Placement(idle_s=0)


def test_errors_are_harness_errors_with_their_codes() -> None:
    assert isinstance(RateLimitedError("x"), HarnessError)
    assert RateLimitedError("x").code == "RATE_LIMITED"
    assert ResultTooLargeError("x").code == "RESULT_TOO_LARGE"


# ---------------------------------------------------------------------- the schedule
def test_a_schedule_starts_full_then_follows_the_rate() -> None:
    slots = schedule_starts(RateLimit(10, burst=3), [(0.0, 5)])
    assert slots[:3] == [0.0, 0.0, 0.0]
    assert slots[3:] == pytest.approx([0.1, 0.2])


def test_an_empty_schedule_has_no_burst() -> None:
    schedule = TokenSchedule(RateLimit(10, burst=3), 5.0, full=False)
    assert schedule.reserve(5.0, 3, math.inf).slots == pytest.approx((5.0, 5.1, 5.2))


def test_slots_past_latest_are_not_handed_out() -> None:
    schedule = TokenSchedule(RateLimit(1), 0.0)
    answer = schedule.reserve(0.0, 3, 1.5)
    assert answer.slots == (0.0, 1.0)
    assert answer.next_slot == 2.0
    assert schedule.reserve(0.0, 1, 1.5).slots == ()  # refused: nothing was taken
    assert schedule.next_slot(0.0) == 2.0


def test_only_the_latest_slot_is_refunded() -> None:
    schedule = TokenSchedule(RateLimit(1), 0.0)
    first, second = schedule.reserve(0.0, 2, math.inf).slots
    assert not schedule.refund(first)
    assert schedule.refund(second)
    assert schedule.next_slot(0.0) == 1.0


@pytest.mark.parametrize("seed", range(20))
def test_any_request_pattern_stays_within_rate_times_window_plus_burst(seed: int) -> None:
    rng = random.Random(seed)
    limit = RateLimit(rng.choice([1, 5, 25, 100]), burst=rng.randint(1, 6))
    now, asks = 0.0, []
    for _ in range(60):
        now += rng.expovariate(limit.per_second / 2)
        asks.append((now, rng.randint(1, 4)))
    assert windows_ok(schedule_starts(limit, asks), limit)
