"""The rate-limit step: a call of a rate-limited tool waits for its token, then dispatches.

The token is taken before the around-dispatch waterfall, so a call refused by its limit
(``RATE_LIMITED``: no token within ``max_wait_ms``) or aborted while it waits
(``ABORTED_BEFORE_DISPATCH``) never starts its body and never reaches the wrappers. A wait
is on the record: the trace's ``rateWaitMs`` and, when the batch has a log, a
``tool/rate_wait`` event (``callId``, ``tool``, ``waited_ms``).

A runner may get the body ready first (its optional ``prepare(call)``: on Ray, the pool's
workers load the tool's code), so a token is not spent on a start delayed by that work —
late starts would bunch with the punctual ones that follow and exceed the limit.
"""

from __future__ import annotations

from toolray._normalize import aborted, failure_from
from toolray.errors import RateLimitedError

from ._call import Call
from ._dispatch import BodyRunner, NestFactory, run_dispatch

__all__ = ("run_throttled",)


async def run_throttled(call: Call, runner: BodyRunner | None, nest: NestFactory | None) -> Call:
    """Take a token of the call's tool (if it is rate-limited), then run the dispatch stage."""
    limit = getattr(call.definition, "rate_limit", None)
    if limit is None:
        return await run_dispatch(call, runner, nest)
    inp = call.input
    prepare = getattr(runner, "prepare", None)
    if prepare is not None:
        await prepare(call)
    try:
        waited = await call.registry.farm.rate_limiter.acquire(inp.name, limit, inp.signal)
    except RateLimitedError as exc:
        return call.settle("post", failure_from(exc))
    if waited is None:
        return call.settle("post", aborted(call.body_invoked))
    if waited > 0:
        waited_ms = round(waited * 1000, 3)
        call.notes["rateWaitMs"] = round(call.notes.get("rateWaitMs", 0) + waited_ms, 3)
        call.log(
            {
                "type": "tool/rate_wait",
                "callId": inp.call_id,
                "tool": inp.name,
                "waited_ms": waited_ms,
            }
        )
    return await run_dispatch(call, runner, nest)
