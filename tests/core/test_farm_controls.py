"""Farm controls in-process: rate limits, result bounds and retries through real batches.

Time is a ``FakeClock`` with autojump: a rate-limited batch of 60 calls at 25/s takes no
real time, and the bodies record their start times on that clock.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.core._farm_helpers import (
    RETRY_FAST,
    calls,
    code_of,
    run_batch,
    search_tool,
    until,
    windows_ok,
)
from toolray import (
    AbortController,
    MemoryEventLog,
    RateLimit,
    RetryPolicy,
    ToolCall,
    ToolRegistry,
    ToolRunContext,
    tool,
)
from toolray.errors import ToolTimeoutError, ToolWorkerLostError
from toolray.farm import DEFAULT_MAX_RESULT_BYTES, truncation_marker
from toolray.testing import FakeClock

pytestmark = pytest.mark.timeout(60)


def registry(**kwargs: Any) -> tuple[ToolRegistry, FakeClock]:
    clock = FakeClock(autojump=True)
    return ToolRegistry(clock=clock, **kwargs), clock


# ---------------------------------------------------------------------- rate limits
async def test_started_calls_stay_within_rate_times_window_plus_burst() -> None:
    reg, clock = registry()
    starts: list[float] = []
    limit = RateLimit(25, burst=5)
    reg.register(search_tool(starts, clock.now, rate_limit=limit))
    result = await run_batch(reg, calls("search", 60))
    assert not any(r.result.is_error for r in result.results)
    assert len(starts) == 60
    assert windows_ok(starts, limit)
    assert sorted(starts)[:5] == [0.0] * 5  # the bucket starts full
    assert max(starts) == pytest.approx(55 / 25)  # and then refills at the rate


async def test_one_bucket_per_registry_across_batches_and_scopes() -> None:
    reg, clock = registry()
    starts: list[float] = []
    limit = RateLimit(10)
    reg.register(search_tool(starts, clock.now, rate_limit=limit))
    reg.scope("a")
    reg.scope("b")
    await asyncio.gather(*(run_batch(reg, calls("search", 10)) for _ in range(3)))
    assert len(starts) == 30
    assert windows_ok(starts, limit)
    assert max(starts) == pytest.approx(2.9)


async def test_past_max_wait_a_call_fails_rate_limited_and_its_body_never_starts() -> None:
    reg, clock = registry()
    starts: list[float] = []
    reg.register(search_tool(starts, clock.now, rate_limit=RateLimit(1, max_wait_ms=1500)))
    result = await run_batch(reg, calls("search", 4))
    codes = [code_of(r.result) for r in result.results]
    assert codes == [None, None, "RATE_LIMITED", "RATE_LIMITED"]
    assert starts == [0.0, 1.0]
    text = result.results[2].result.content[0]["text"]
    assert text.startswith('Error: tool "search" is rate-limited (1/s, burst 1)')


async def test_a_waiting_call_is_abortable_before_dispatch() -> None:
    reg = ToolRegistry()  # real time: the second call would wait 100 s for its token
    starts: list[float] = []
    reg.register(search_tool(starts, lambda: 0.0, rate_limit=RateLimit(0.01)))
    log = MemoryEventLog()
    ctrl = AbortController()
    task = asyncio.ensure_future(run_batch(reg, calls("search", 2), ctrl.signal, log))

    def both() -> bool:
        kinds = [e["type"] for e in log.events]
        return kinds.count("tool/call") == 2 and kinds.count("tool/result") == 1

    await until(both, "one call ran and committed, the other waits for its token")
    ctrl.abort("user")
    result = await asyncio.wait_for(task, 10)
    assert [code_of(r.result) for r in result.results] == [None, "ABORTED_BEFORE_DISPATCH"]
    assert len(starts) == 1


async def test_waits_are_on_the_log_and_in_the_trace() -> None:
    reg, clock = registry()
    starts: list[float] = []
    reg.register(search_tool(starts, clock.now, rate_limit=RateLimit(4)))
    log = MemoryEventLog()
    trace: list[dict[str, Any]] = []
    await run_batch(reg, calls("search", 3), log=log, trace=trace)
    waits = [e for e in log.events if e["type"] == "tool/rate_wait"]
    assert [(e["callId"], e["tool"]) for e in waits] == [("c1", "search"), ("c2", "search")]
    assert [e["waited_ms"] for e in waits] == pytest.approx([250.0, 500.0])
    spans = {s["callId"]: s for s in trace if s.get("type") == "call"}
    assert "rateWaitMs" not in spans["c0"]
    assert spans["c2"]["rateWaitMs"] == pytest.approx(500.0)


async def test_nested_calls_take_tokens_of_the_same_bucket() -> None:
    reg, clock = registry()
    starts: list[float] = []
    limit = RateLimit(2)
    reg.register(search_tool(starts, clock.now, rate_limit=limit))

    @tool(name="fan")
    async def fan(n: int, *, ctx: ToolRunContext) -> int:
        """Search n times."""
        results = [await ctx.dispatch("search", {"query": str(i)}) for i in range(n)]
        return sum(not r.is_error for r in results)

    reg.register(fan)
    result = await run_batch(reg, [ToolCall("f", "fan", '{"n": 4}')])
    assert result.results[0].result.value == 4
    assert starts == pytest.approx([0.0, 0.5, 1.0, 1.5])


# ---------------------------------------------------------------------- result bounds
async def test_a_value_over_max_result_bytes_fails_result_too_large() -> None:
    reg, _ = registry()

    @tool(name="big", max_result_bytes=1000)
    def big(n: int) -> str:
        """A long text."""
        return "x" * n

    reg.register(big)
    result = await run_batch(
        reg, [ToolCall("a", "big", '{"n": 5000}'), ToolCall("b", "big", '{"n": 990}')]
    )
    first, second = (r.result for r in result.results)
    assert code_of(first) == "RESULT_TOO_LARGE"
    assert "max_result_bytes (1000 bytes" in first.content[0]["text"]
    assert not second.is_error  # 992 bytes of JSON text: within the bound


async def test_the_registry_bound_applies_unless_the_definition_sets_its_own() -> None:
    assert ToolRegistry().farm.max_result_bytes == DEFAULT_MAX_RESULT_BYTES == 1 << 20
    reg, _ = registry(max_result_bytes=100)

    @tool(name="small")
    def small(n: int) -> list[int]:
        """Numbers."""
        return list(range(n))

    @tool(name="roomy", max_result_bytes=10_000)
    def roomy(n: int) -> list[int]:
        """Numbers."""
        return list(range(n))

    reg.register(small)
    reg.register(roomy)
    batch = [ToolCall("a", "small", '{"n": 100}'), ToolCall("b", "roomy", '{"n": 100}')]
    result = await run_batch(reg, batch)
    assert [code_of(r.result) for r in result.results] == ["RESULT_TOO_LARGE", None]


async def test_multibyte_text_counts_its_utf8_bytes() -> None:
    reg, _ = registry(max_result_bytes=100)

    @tool(name="snow")
    def snow(n: int) -> str:
        """Snowmen."""
        return "☃" * n

    reg.register(snow)
    result = await run_batch(
        reg, [ToolCall("a", "snow", '{"n": 40}'), ToolCall("b", "snow", '{"n": 30}')]
    )
    assert [code_of(r.result) for r in result.results] == ["RESULT_TOO_LARGE", None]


async def test_long_text_blocks_are_cut_with_the_marker() -> None:
    reg, _ = registry(max_content_chars=100)

    @tool(name="page")
    def page(n: int) -> str:
        """A page."""
        return "a" * n

    @tool(name="wide", max_content_chars=2000)
    def wide(n: int) -> str:
        """A wide page."""
        return "b" * n

    reg.register(page)
    reg.register(wide)
    batch = [
        ToolCall("a", "page", '{"n": 1000}'),
        ToolCall("b", "page", '{"n": 100}'),
        ToolCall("c", "wide", '{"n": 1000}'),
    ]
    result = await run_batch(reg, batch)
    cut, exact, kept = (r.result for r in result.results)
    assert cut.content[0]["text"] == "a" * 100 + "[… 900 characters truncated]"
    assert cut.content[0]["text"].endswith(truncation_marker(900))
    assert cut.value == "a" * 1000  # the value stays whole; only what the model reads is cut
    assert exact.content[0]["text"] == "a" * 100
    assert kept.content[0]["text"] == "b" * 1000


# ---------------------------------------------------------------------- retries
def flaky(name: str, failures: list[Exception], attempts: list[int], **options: Any) -> Any:
    @tool(name=name, concurrency_safe=True, **options)
    def body(key: str) -> str:
        """Fails while failures are left."""
        attempts.append(1)
        if failures:
            raise failures.pop(0)
        return f"ok {key}"

    return body


async def test_an_idempotent_tool_survives_two_worker_losses() -> None:
    reg, _ = registry()
    attempts: list[int] = []
    lost = [ToolWorkerLostError("died"), ToolWorkerLostError("died again")]
    reg.register(flaky("fetch", lost, attempts, idempotent=True, retry=RETRY_FAST))
    log = MemoryEventLog()
    result = await run_batch(reg, [ToolCall("c0", "fetch", '{"key": "k"}')], log=log)
    assert result.results[0].result.value == "ok k"
    assert len(attempts) == 3
    retries = [e for e in log.events if e["type"] == "tool/retry"]
    assert [(e["call_id"], e["attempt"], e["code"]) for e in retries] == [
        ("c0", 2, "WORKER_LOST"),
        ("c0", 3, "WORKER_LOST"),
    ]
    kinds = [e["type"] for e in log.events]
    assert kinds == ["tool/call", "tool/retry", "tool/retry", "tool/result"]


async def test_the_result_is_the_last_attempts_when_attempts_run_out() -> None:
    reg, _ = registry()
    attempts: list[int] = []
    failures: list[Exception] = [ToolTimeoutError("slow")] * 2 + [ToolWorkerLostError("x")]
    policy = RetryPolicy(attempts=3, backoff_ms=1)
    reg.register(flaky("fetch", failures, attempts, idempotent=True, retry=policy))
    result = await run_batch(reg, [ToolCall("c0", "fetch", '{"key": "k"}')])
    assert len(attempts) == 3
    assert code_of(result.results[0].result) == "WORKER_LOST"


async def test_only_the_codes_of_the_policy_are_retried() -> None:
    reg, _ = registry()
    attempts: list[int] = []
    policy = RetryPolicy(on=("WORKER_LOST",), backoff_ms=1)
    failures: list[Exception] = [ToolTimeoutError("slow"), ValueError("plain")]
    reg.register(flaky("fetch", failures, attempts, idempotent=True, retry=policy))
    result = await run_batch(reg, [ToolCall("c0", "fetch", '{"key": "k"}')])
    assert code_of(result.results[0].result) == "TOOL_TIMEOUT"
    assert len(attempts) == 1


async def test_a_tool_that_is_not_idempotent_is_never_retried() -> None:
    reg, _ = registry()
    attempts: list[int] = []
    reg.register(flaky("write", [ToolWorkerLostError("x")], attempts))
    result = await run_batch(reg, [ToolCall("c0", "write", '{"key": "k"}')])
    assert code_of(result.results[0].result) == "WORKER_LOST"
    assert len(attempts) == 1


async def test_nothing_is_retried_once_the_batch_signal_fired() -> None:
    reg = ToolRegistry()  # real time: the backoff is 60 s, the abort ends it
    attempts: list[int] = []
    policy = RetryPolicy(backoff_ms=60_000)
    reg.register(
        flaky("fetch", [ToolWorkerLostError("x")], attempts, idempotent=True, retry=policy)
    )
    log = MemoryEventLog()
    ctrl = AbortController()
    task = asyncio.ensure_future(
        run_batch(reg, [ToolCall("c0", "fetch", '{"key": "k"}')], ctrl.signal, log)
    )
    await until(lambda: bool(attempts), "the first attempt")
    await asyncio.sleep(0.01)  # let the failure reach the backoff (a retry would need 60 s)
    ctrl.abort("user")
    result = await asyncio.wait_for(task, 10)
    assert len(attempts) == 1
    assert code_of(result.results[0].result) == "WORKER_LOST"
    assert not [e for e in log.events if e["type"] == "tool/retry"]


async def test_each_attempt_takes_its_own_token() -> None:
    reg, clock = registry()
    starts: list[float] = []
    failures: list[Exception] = [ToolWorkerLostError("x")]

    @tool(name="fetch", idempotent=True, retry=RetryPolicy(backoff_ms=1), rate_limit=RateLimit(1))
    async def fetch(key: str) -> str:
        """Fetch."""
        starts.append(clock.now())
        if failures:
            raise failures.pop(0)
        return key

    reg.register(fetch)
    result = await run_batch(reg, [ToolCall("c0", "fetch", '{"key": "k"}')])
    assert result.results[0].result.value == "k"
    assert starts == pytest.approx([0.0, 1.0])


async def test_a_retry_runs_again_through_the_around_dispatch_wrappers() -> None:
    reg, _ = registry()
    attempts: list[int] = []
    seen: list[str] = []
    reg.register(
        flaky("fetch", [ToolWorkerLostError("x")], attempts, idempotent=True, retry=RETRY_FAST)
    )

    async def wrapper(execution: Any, next_: Any) -> Any:
        seen.append(execution.call_id)
        return await next_()

    reg.on_execute(wrapper)
    result = await run_batch(reg, [ToolCall("c0", "fetch", '{"key": "k"}')])
    assert not result.results[0].result.is_error
    assert seen == ["c0", "c0"]
