"""The policy stages: pre-execute + approval + guards, and post-execute.

Precedence (which outcome wins, P-ERR): a throw in the gates is kept; approval
``cancelled`` with the caller aborted is ``ABORTED_BEFORE_DISPATCH``; a denial beats a
cancellation that arrived during the gates; otherwise an abort after the gates is
``ABORTED_BEFORE_DISPATCH``. After post-execute, an accepted *success* with the caller
aborted becomes ``ABORTED`` (body ran) or ``ABORTED_BEFORE_DISPATCH``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from toolray._approval import ApprovalRequest
from toolray._decisions import Accept, Allow, Ask, Block, Cancel, Deny, ReplaceValue
from toolray._normalize import (
    aborted,
    block_message,
    fail,
    failure_from,
)
from toolray._outcomes import ToolExecutionFailure, ToolExecutionResult, ToolExecutionSuccess
from toolray._signals import DeadlineReason
from toolray._waterfall import maybe_await, run_waterfall

from ._call import Call

__all__ = ("run_post_execute", "run_pre_execute")


async def _allow() -> Allow:
    return Allow()


async def _accept() -> Accept:
    return Accept()


async def _ask(call: Call, ask: Ask) -> tuple[Any, bool]:
    """Resolve an ``Ask``: ``(decision, approval_cancelled)``."""
    name = call.input.name
    service = call.registry.approval
    if service is None:
        return Deny(ask.reason or f'tool "{name}" requires approval (not yet supported)'), False
    scope = call.input.scope
    if scope is None:
        reason = f'tool "{name}" requires approval, but the call has no agent to route it through'
        return Deny(reason), False
    request = ApprovalRequest(
        scope=scope,
        tool_name=name,
        call_id=call.input.call_id,
        reason=ask.reason,
        signal=call.input.signal,
        display_reason=ask.display_reason,
    )
    outcome = await maybe_await(service.request(request))
    if outcome == "allowed-once":
        return Allow(), False
    if outcome == "rejected":
        return Deny(f'the user rejected tool "{name}"'), False
    if outcome == "cancelled":
        return Deny(f'approval for tool "{name}" was cancelled'), True
    if outcome == "unavailable":
        return Deny(f'tool "{name}" requires approval, but no approval channel is available'), False
    raise ValueError(f'unreachable variant in ApprovalOutcome: "{outcome}"')


async def run_pre_execute(call: Call) -> Call:
    """Pre-execute waterfall, approval, guards; sets the call's next stage."""
    registry, execution = call.registry, call.execution
    caller = call.input.signal
    try:
        decision = await run_waterfall(
            registry.hooks("pre", call.input.scope), (execution,), _allow
        )
        approval_cancelled = False
        if isinstance(decision, Ask):
            decision, approval_cancelled = await _ask(call, decision)
        if approval_cancelled and caller.aborted:
            return call.settle("post", aborted(False))
        if isinstance(decision, Deny):
            denied = fail(str(decision.reason), decision.info, fault="policy")
            return call.settle("post", denied)
        if isinstance(decision, Cancel):
            return call.settle("post", aborted(False))
        if not isinstance(decision, Allow):
            raise TypeError(f"unreachable variant in PreToolDecision: {decision!r}")
        denial = registry.check_guards(execution)
    except Exception as exc:
        return call.settle("final", failure_from(exc))
    if denial is not None:
        return call.settle("post", fail(denial, fault="policy"))
    if caller.aborted:
        return call.settle("post", aborted(False))
    return call.settle("dispatch")


def _project_content(call: Call, result: ToolExecutionResult) -> ToolExecutionResult:
    project, call.project = call.project, None
    if project is None:
        return result
    content = project(call.execution, result)
    if content is None:
        return result
    return dataclasses.replace(result, content=content)


def _apply(call: Call, result: ToolExecutionResult, decision: Any) -> ToolExecutionResult:
    if isinstance(decision, Accept):
        contexts = (*result.additional_contexts, *decision.additional_contexts)
        if decision.content is not None:
            return dataclasses.replace(
                result, content=decision.content, additional_contexts=contexts
            )
        if not decision.additional_contexts:
            return result
        return dataclasses.replace(result, additional_contexts=contexts)
    if isinstance(decision, Block):
        return ToolExecutionFailure(
            error=fail(block_message(decision.feedback), fault="policy").error,
            content=decision.feedback,
            additional_contexts=tuple(decision.additional_contexts),
        )
    if isinstance(decision, ReplaceValue):
        if not isinstance(result, ToolExecutionSuccess):
            raise TypeError("tools/post-execute cannot replace the value of a failed result")
        contexts = (*result.additional_contexts, *decision.additional_contexts)
        return call.renormalize(decision.value, contexts, result.concludes_turn)
    raise TypeError(f"unreachable variant in PostToolDecision: {decision!r}")


async def run_post_execute(call: Call) -> None:
    """``project_content``, the post-execute waterfall, and the last cancellation check."""
    assert call.result is not None
    hooks = call.registry.hooks("post", call.input.scope)
    if not hooks and call.project is None:  # nothing can change the result: only the check
        if isinstance(call.result, ToolExecutionSuccess) and _cancelled(call):
            call.result = aborted(call.body_invoked, call.result.additional_contexts)
        return
    try:
        result = _project_content(call, call.result)
        decision = await run_waterfall(hooks, (call.execution, result), _accept)
        result = _apply(call, result, decision)
    except Exception as exc:
        call.result = failure_from(exc)
        return
    if isinstance(result, ToolExecutionSuccess) and _cancelled(call):
        result = aborted(call.body_invoked, result.additional_contexts)
    call.result = result


def _cancelled(call: Call) -> bool:
    """The caller aborted before this success committed (a sealed one stands).

    A batch's deadline replaces only the successes that settled after it passed.
    """
    signal = call.input.signal
    if not signal.aborted or call.sealed:
        return False
    return not (call.in_time and isinstance(signal.reason, DeadlineReason))
