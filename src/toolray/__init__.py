"""toolray: execute LLM-agent tool calls — validated, policed, scheduled, one result per call.

The core (this package) never imports Ray; ``toolray_actors`` runs the same registry and
scheduler on Ray actors. ``toolray`` holds what an application uses every day; the rest
has a namespace of its own:

- ``toolray.errors`` — every exception (``ToolrayError`` is the base) and the failure codes;
- ``toolray.presentation`` — the cards a UI renders for a call and its result;
- ``toolray.schema`` — the schema DSL, the enforced JSON-Schema subset and its validators;
- ``toolray.policies`` (``TimeoutPolicy``), ``toolray.testing`` (virtual time, gates);
- ``toolray.code`` — the runtime that runs Code Mode (programmatic tool calling) programs;
- ``toolray.adapters`` — provider formats (OpenAI, Anthropic, MCP);
- ``toolray.lowlevel`` — for runtimes that host the pipeline elsewhere: the planner, the
  pipeline's entry points, the system clock.

A name that moved from ``toolray`` to one of them still imports from ``toolray``, with a
``DeprecationWarning`` naming its new home.

Example:
    >>> import asyncio
    >>> from toolray import (
    ...     AbortController, ToolCall, ToolBatchInput, ToolOutput, ToolRegistry, define_tool,
    ...     text_block,
    ... )
    >>> reg = ToolRegistry()
    >>> _ = reg.register(define_tool(
    ...     name="add", description="Add two integers",
    ...     parameters={"a": {"type": "integer", "required": True},
    ...                 "b": {"type": "integer", "required": True}},
    ...     output=ToolOutput(schema={"type": "integer"}, render=lambda a, v: [text_block(str(v))]),
    ...     execute=lambda args, ctx: args["a"] + args["b"],
    ... ))
    >>> calls = [ToolCall("c1", "add", '{"a": 1, "b": 2}')]
    >>> batch = ToolBatchInput(calls, AbortController().signal)
    >>> asyncio.run(reg.execute_batch(batch)).results[0].result.value
    3
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from . import errors as _errors
from . import lowlevel as _lowlevel
from . import presentation as _presentation
from . import schema as _schema
from ._activation import ActivationContext as ActivationContext
from ._activation import ModelSelection as ModelSelection
from ._approval import ApprovalOutcome as ApprovalOutcome
from ._approval import ApprovalRequest as ApprovalRequest
from ._approval import ApprovalService as ApprovalService
from ._clock import Clock as Clock
from ._content import ContentBlock as ContentBlock
from ._content import UserMessage as UserMessage
from ._content import text_block as text_block
from ._context import ToolRunContext as ToolRunContext
from ._decisions import Accept as Accept
from ._decisions import Allow as Allow
from ._decisions import Ask as Ask
from ._decisions import Block as Block
from ._decisions import Cancel as Cancel
from ._decisions import Deny as Deny
from ._decisions import PostToolDecision as PostToolDecision
from ._decisions import PreToolDecision as PreToolDecision
from ._decisions import ReplaceValue as ReplaceValue
from ._decorator import tool as tool
from ._definition import RESERVED_TOOL_NAME as RESERVED_TOOL_NAME
from ._definition import Placement as Placement
from ._definition import ToolDefinition as ToolDefinition
from ._definition import ToolOutput as ToolOutput
from ._definition import define_tool as define_tool
from ._disposer import Disposer as Disposer
from ._eventlog import EventLog as EventLog
from ._eventlog import JsonlEventLog as JsonlEventLog
from ._eventlog import MemoryEventLog as MemoryEventLog
from ._eventlog import read_jsonl as read_jsonl
from ._execution import ExecutionToken as ExecutionToken
from ._execution import ToolDispatchExecution as ToolDispatchExecution
from ._execution import ToolExecution as ToolExecution
from ._execution import ToolExecutionInput as ToolExecutionInput
from ._faults import FAULT_CLASSES as FAULT_CLASSES
from ._json import FrozenDict as FrozenDict
from ._json import FrozenList as FrozenList
from ._json import JsonValue as JsonValue
from ._json import snapshot_json as snapshot_json
from ._json import thaw_json as thaw_json
from ._outcomes import ToolErrorInfo as ToolErrorInfo
from ._outcomes import ToolExecutionFailure as ToolExecutionFailure
from ._outcomes import ToolExecutionResult as ToolExecutionResult
from ._outcomes import ToolExecutionSuccess as ToolExecutionSuccess
from ._outcomes import ToolFailure as ToolFailure
from ._signals import AbortController as AbortController
from ._signals import AbortSignal as AbortSignal
from ._signals import TimeoutReason as TimeoutReason
from .batch._executor import BatchExecutor as BatchExecutor
from .batch._types import LogStep as LogStep
from .batch._types import ToolBatchInput as ToolBatchInput
from .batch._types import ToolBatchResult as ToolBatchResult
from .batch._types import ToolCall as ToolCall
from .batch._types import ToolCallResult as ToolCallResult
from .batch._types import ToolExecutor as ToolExecutor
from .batch._types import ToolModelInput as ToolModelInput
from .codemode._program import PtcDispatchLog as PtcDispatchLog
from .codemode._prompt import ToolPromptSection as ToolPromptSection
from .environments._definition import EnvironmentDefinition as EnvironmentDefinition
from .environments._definition import EnvironmentStatus as EnvironmentStatus
from .environments._definition import define_environment as define_environment
from .environments._handle import EnvironmentHandle as EnvironmentHandle
from .errors import AbortError as AbortError
from .errors import CodeRunFailedError as CodeRunFailedError
from .errors import EnvironmentFailedError as EnvironmentFailedError
from .errors import EnvironmentLostError as EnvironmentLostError
from .errors import ExecutorLostError as ExecutorLostError
from .errors import ExecutorUnavailableError as ExecutorUnavailableError
from .errors import HarnessError as HarnessError
from .errors import JsonSchemaError as JsonSchemaError
from .errors import NotJsonError as NotJsonError
from .errors import ToolArgsError as ToolArgsError
from .errors import ToolBatchExecutionError as ToolBatchExecutionError
from .errors import ToolNotFoundError as ToolNotFoundError
from .errors import ToolOutputError as ToolOutputError
from .errors import ToolrayError as ToolrayError
from .errors import ToolTimeoutError as ToolTimeoutError
from .errors import ToolWorkerLostError as ToolWorkerLostError
from .farm._values import RateLimit as RateLimit
from .farm._values import RetryPolicy as RetryPolicy
from .policies import TimeoutPolicy as TimeoutPolicy
from .registry._admission import ResolvedToolSet as ResolvedToolSet
from .registry._registry import ToolRegistry as ToolRegistry
from .registry._state import RegistryStatistics as RegistryStatistics
from .registry._write import ScopedTools as ScopedTools
from .scheduler._plan import ExecutionMode as ExecutionMode
from .schema._params import JsonSchemaParameters as JsonSchemaParameters
from .schema._params import json_schema_parameters as json_schema_parameters

__version__ = "0.1.0"

_HOMES = {
    "toolray.errors": _errors,
    "toolray.lowlevel": _lowlevel,
    "toolray.presentation": _presentation,
    "toolray.schema": _schema,
}

__all__ = (
    "FAULT_CLASSES",
    "RESERVED_TOOL_NAME",
    "AbortController",
    "AbortError",
    "AbortSignal",
    "Accept",
    "ActivationContext",
    "Allow",
    "ApprovalOutcome",
    "ApprovalRequest",
    "ApprovalService",
    "Ask",
    "BatchExecutor",
    "Block",
    "Cancel",
    "Clock",
    "CodeRunFailedError",
    "ContentBlock",
    "Deny",
    "Disposer",
    "EnvironmentDefinition",
    "EnvironmentFailedError",
    "EnvironmentHandle",
    "EnvironmentLostError",
    "EnvironmentStatus",
    "EventLog",
    "ExecutionMode",
    "ExecutionToken",
    "ExecutorLostError",
    "ExecutorUnavailableError",
    "FrozenDict",
    "FrozenList",
    "HarnessError",
    "JsonSchemaError",
    "JsonSchemaParameters",
    "JsonValue",
    "JsonlEventLog",
    "LogStep",
    "MemoryEventLog",
    "ModelSelection",
    "NotJsonError",
    "Placement",
    "PostToolDecision",
    "PreToolDecision",
    "PtcDispatchLog",
    "RegistryStatistics",
    "ReplaceValue",
    "ResolvedToolSet",
    "ScopedTools",
    "TimeoutPolicy",
    "TimeoutReason",
    "ToolArgsError",
    "ToolBatchExecutionError",
    "ToolBatchInput",
    "ToolBatchResult",
    "ToolCall",
    "ToolCallResult",
    "ToolDefinition",
    "ToolDispatchExecution",
    "ToolErrorInfo",
    "ToolExecution",
    "ToolExecutionFailure",
    "ToolExecutionInput",
    "ToolExecutionResult",
    "ToolExecutionSuccess",
    "ToolExecutor",
    "ToolFailure",
    "ToolModelInput",
    "ToolNotFoundError",
    "ToolOutput",
    "ToolOutputError",
    "ToolPromptSection",
    "ToolRegistry",
    "ToolRunContext",
    "ToolTimeoutError",
    "ToolWorkerLostError",
    "ToolrayError",
    "UserMessage",
    "define_environment",
    "define_tool",
    "json_schema_parameters",
    "read_jsonl",
    "snapshot_json",
    "text_block",
    "thaw_json",
    "tool",
)

_MOVED: dict[str, str] = {
    "DiffCallView": "toolray.presentation",
    "DiffResultView": "toolray.presentation",
    "FileDiff": "toolray.presentation",
    "FileLocation": "toolray.presentation",
    "GenericCallView": "toolray.presentation",
    "GenericResultView": "toolray.presentation",
    "ReadLine": "toolray.presentation",
    "ReadResultView": "toolray.presentation",
    "SearchFileMatches": "toolray.presentation",
    "SearchLineMatch": "toolray.presentation",
    "SearchMatchesResultView": "toolray.presentation",
    "SearchPathsResultView": "toolray.presentation",
    "TerminalCallView": "toolray.presentation",
    "TerminalResultView": "toolray.presentation",
    "ToolCallKind": "toolray.presentation",
    "ToolCallView": "toolray.presentation",
    "ToolResult": "toolray.presentation",
    "ToolResultView": "toolray.presentation",
    "WebFetchResultView": "toolray.presentation",
    "WebSearchResultView": "toolray.presentation",
    "WebSource": "toolray.presentation",
    "Stage": "toolray.lowlevel",
    "next_stage": "toolray.lowlevel",
    "plan_stages": "toolray.lowlevel",
    "parse_arguments": "toolray.lowlevel",
    "SystemClock": "toolray.lowlevel",
    "BatchStatistics": "toolray.lowlevel",
    "assert_object_json_schema": "toolray.schema",
    "assert_supported_json_schema": "toolray.schema",
    "compile_validator": "toolray.schema",
    "parameter_schema_to_json_schema": "toolray.schema",
    "validate_args": "toolray.schema",
    "validate_json_schema_value": "toolray.schema",
    "value_schema_to_json_schema": "toolray.schema",
    "TOOL_ABORTED": "toolray.errors",
    "TOOL_ABORTED_BEFORE_DISPATCH": "toolray.errors",
    "TOOL_TIMEOUT": "toolray.errors",
}
"""Names ``toolray`` exported before its surface narrowed, and where each lives now."""

if not TYPE_CHECKING:  # type checkers see only the names above: use the new homes

    def __getattr__(name: str) -> Any:
        home = _MOVED.get(name)
        if home is None:
            raise AttributeError(f"module 'toolray' has no attribute {name!r}")
        warnings.warn(
            f"toolray.{name} is deprecated: import it from {home}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(_HOMES[home], name)
