"""Fault classes: whom a failed call blames — one public table, from a failure's code.

A trainer tells a sample the model spoiled (learn from it) from one the infrastructure
spoiled (drop or retry it). Every failure carries one of five classes
(``ToolFailure.fault``):

- ``"input"`` — the model's call was wrong (bad arguments, a tool it was never offered);
- ``"policy"`` — a guard, an approval, a restriction or a rate limit said no;
- ``"tool"`` — the body raised, returned something invalid, or overran its own limits;
- ``"infra"`` — toolray or Ray lost something, or had no room for the call;
- ``"cancelled"`` — the caller aborted, or the batch's deadline passed.

:data:`FAULT_CLASSES` maps every code toolray produces (the Ray layer's and the
environments' included) to exactly one class. A code it does not list — a user's own
``HarnessError`` code — is ``"tool"`` (:data:`UNKNOWN_CODE_FAULT`): the body raised it. A
failure without a code is ``"tool"`` too (a body's own exception), except the few the
pipeline makes itself: a policy denial (``"policy"``) and arguments that are not JSON
(``"input"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Literal, TypeAlias

__all__ = (
    "FAULT_CLASSES",
    "FAULT_CLASS_NAMES",
    "UNKNOWN_CODE_FAULT",
    "FaultClass",
    "check_fault",
    "fault_of",
)

FaultClass: TypeAlias = Literal["input", "policy", "tool", "infra", "cancelled"]
"""The five fault classes."""

FAULT_CLASS_NAMES: Final[tuple[FaultClass, ...]] = (
    "input",
    "policy",
    "tool",
    "infra",
    "cancelled",
)
"""Every fault class, in the order the docs and ``ToolBatchResult.faults`` list them."""

UNKNOWN_CODE_FAULT: Final[FaultClass] = "tool"
"""The class of a code the table does not list (a user's own ``HarnessError`` code)."""

_BY_CLASS: dict[FaultClass, tuple[str, ...]] = {
    "input": (
        "INVALID_ARGS",  # the arguments break the tool's parameter schema
        "UNKNOWN_TOOL",  # a name the caller's scope does not offer (restricted ones too)
        "NOT_JSON",  # a value that is not lossless JSON
        "UNKNOWN_ENVIRONMENT",  # the call names an environment its scope does not have
    ),
    "policy": (
        "RATE_LIMITED",  # no token of the tool's rate limit within its max_wait_ms
    ),
    "tool": (
        "INVALID_TOOL_OUTPUT",  # the body's value breaks the tool's output contract
        "RESULT_TOO_LARGE",  # the body's value is over max_result_bytes
        "TOOL_TIMEOUT",  # the body overran its timeout_ms (counted from its start)
        "CODE_RUN_FAILED",  # a run_code program failed (its body is the program)
        "ENVIRONMENT_FAILED",  # the environment's own create (or open) raised
        "MCP_TOOL_ERROR",  # an imported MCP server's tool answered isError
        "UNSUPPORTED_SCHEMA",  # a schema outside the enforced subset
    ),
    "infra": (
        "WORKER_LOST",  # the process running the body died under it
        "EXECUTOR_LOST",  # the executor actor died before the call committed
        "EXECUTOR_UNAVAILABLE",  # no batch executor serves the scope
        "ENVIRONMENT_LOST",  # the environment's host died under the call
        "RUNTIME_UNAVAILABLE",  # the Ray runtime is shut down or unreachable
        "OVERLOADED",  # no capacity within the pool's max_queue_ms (the body never ran)
        "HARNESS_ERROR",  # an uncoded HarnessError: toolray's own, unclassified fault
    ),
    "cancelled": (
        "ABORTED",  # the caller aborted while the body ran
        "ABORTED_BEFORE_DISPATCH",  # the caller aborted before the body started
        "DEADLINE_EXCEEDED",  # the batch's deadline_s passed
    ),
}

FAULT_CLASSES: Final[Mapping[str, FaultClass]] = MappingProxyType(
    {code: fault for fault, codes in _BY_CLASS.items() for code in codes}
)
"""Every failure code toolray produces → its fault class (read-only)."""


def fault_of(code: str | None) -> FaultClass:
    """The fault class of a failure with ``code`` (``None``: an uncoded body exception).

    Example:
        >>> fault_of("WORKER_LOST"), fault_of("MY_OWN_CODE"), fault_of(None)
        ('infra', 'tool', 'tool')
    """
    if code is None:
        return UNKNOWN_CODE_FAULT
    return FAULT_CLASSES.get(code, UNKNOWN_CODE_FAULT)


def check_fault(value: object) -> FaultClass:
    """``value`` if it is one of the five classes, else ``ValueError``."""
    for name in FAULT_CLASS_NAMES:
        if value == name and isinstance(value, str):
            return name
    known = ", ".join(FAULT_CLASS_NAMES)
    raise ValueError(f"fault must be one of {known}, not {value!r}")
