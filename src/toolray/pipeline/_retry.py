"""Retries of idempotent tools: the dispatch stage again, for the failures a policy names.

A tool declared ``idempotent=True`` with a :class:`~toolray.RetryPolicy` has a failure
whose code is in ``policy.on`` (by default ``WORKER_LOST`` and ``TOOL_TIMEOUT``) tried
again, up to ``policy.attempts`` attempts in all, after an exponential backoff. Each new
attempt waits for its own rate-limit token and appends a ``tool/retry`` event (``call_id``,
``attempt``, ``code``) to the batch's log; the result is the last attempt's. Nothing is
retried once the caller's signal fired — the batch was aborted, or the call's deadline
passed — not even during the backoff. A tool that is not idempotent is never re-run.
"""

from __future__ import annotations

from typing import Any

from toolray._outcomes import ToolExecutionFailure
from toolray.farm._limiter import wait_until
from toolray.farm._values import RetryPolicy

from ._call import Call
from ._dispatch import BodyRunner, NestFactory
from ._throttle import run_throttled

__all__ = ("failure_code", "run_attempts")


def failure_code(result: Any) -> str | None:
    """The code of a failed result, ``None`` for a success or an uncoded failure."""
    if not isinstance(result, ToolExecutionFailure):
        return None
    info = result.error.info
    return info.code if info is not None else None


def _policy(call: Call) -> RetryPolicy | None:
    definition = call.definition
    if getattr(definition, "idempotent", False) is not True:
        return None
    policy = getattr(definition, "retry", None)
    return policy if isinstance(policy, RetryPolicy) else None


async def run_attempts(call: Call, runner: BodyRunner | None, nest: NestFactory | None) -> Call:
    """Run the dispatch stage once, and again while the tool's retry policy says so."""
    await run_throttled(call, runner, nest)
    policy = _policy(call)
    if policy is None:
        return call
    signal, clock = call.input.signal, call.registry.clock
    for attempt in range(2, policy.attempts + 1):
        code = failure_code(call.result)
        if code is None or code not in policy.on or signal.aborted:
            break
        backoff = policy.delay_ms(attempt - 1) / 1000.0
        if not await wait_until(clock, clock.now() + backoff, signal):
            break  # aborted during the backoff: the last attempt's result stands
        call.notes["attempts"] = attempt
        call.log(
            {
                "type": "tool/retry",
                "callId": call.input.call_id,
                "call_id": call.input.call_id,
                "attempt": attempt,
                "code": code,
            }
        )
        await run_throttled(call.settle("dispatch"), runner, nest)
    return call
