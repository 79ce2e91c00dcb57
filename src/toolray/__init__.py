"""toolray: execute LLM-agent tool calls — validated, policed, scheduled, one result per call.

The core (this package) never imports Ray; ``toolray_actors`` runs the same registry and
scheduler on Ray actors.

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

from ._activation import ActivationContext as ActivationContext
from ._activation import ModelSelection as ModelSelection
from ._approval import ApprovalOutcome as ApprovalOutcome
from ._approval import ApprovalRequest as ApprovalRequest
from ._approval import ApprovalService as ApprovalService
from ._arguments import parse_arguments as parse_arguments
from ._clock import Clock as Clock
from ._clock import SystemClock as SystemClock
from ._content import ContentBlock as ContentBlock
from ._content import UserMessage as UserMessage
from ._content import text_block as text_block
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
from ._execution import ToolRunContext as ToolRunContext
from ._json import FrozenDict as FrozenDict
from ._json import FrozenList as FrozenList
from ._json import JsonValue as JsonValue
from ._json import snapshot_json as snapshot_json
from ._outcomes import ToolErrorInfo as ToolErrorInfo
from ._outcomes import ToolExecutionFailure as ToolExecutionFailure
from ._outcomes import ToolExecutionResult as ToolExecutionResult
from ._outcomes import ToolExecutionSuccess as ToolExecutionSuccess
from ._outcomes import ToolFailure as ToolFailure
from ._signals import AbortController as AbortController
from ._signals import AbortSignal as AbortSignal
from ._signals import TimeoutReason as TimeoutReason
from .batch._executor import BatchExecutor as BatchExecutor
from .batch._executor import BatchStatistics as BatchStatistics
from .batch._types import LogStep as LogStep
from .batch._types import ToolBatchInput as ToolBatchInput
from .batch._types import ToolBatchResult as ToolBatchResult
from .batch._types import ToolCall as ToolCall
from .batch._types import ToolCallResult as ToolCallResult
from .batch._types import ToolExecutor as ToolExecutor
from .batch._types import ToolModelInput as ToolModelInput
from .codemode._program import PtcDispatchLog as PtcDispatchLog
from .codemode._prompt import ToolPromptSection as ToolPromptSection
from .errors import TOOL_ABORTED as TOOL_ABORTED
from .errors import TOOL_ABORTED_BEFORE_DISPATCH as TOOL_ABORTED_BEFORE_DISPATCH
from .errors import TOOL_TIMEOUT as TOOL_TIMEOUT
from .errors import AbortError as AbortError
from .errors import CodeRunFailedError as CodeRunFailedError
from .errors import ExecutorLostError as ExecutorLostError
from .errors import ExecutorUnavailableError as ExecutorUnavailableError
from .errors import HarnessError as HarnessError
from .errors import JsonSchemaError as JsonSchemaError
from .errors import NotJsonError as NotJsonError
from .errors import ToolArgsError as ToolArgsError
from .errors import ToolBatchExecutionError as ToolBatchExecutionError
from .errors import ToolNotFoundError as ToolNotFoundError
from .errors import ToolOutputError as ToolOutputError
from .errors import ToolTimeoutError as ToolTimeoutError
from .errors import ToolWorkerLostError as ToolWorkerLostError
from .policies import TimeoutPolicy as TimeoutPolicy
from .presentation import DiffCallView as DiffCallView
from .presentation import DiffResultView as DiffResultView
from .presentation import FileDiff as FileDiff
from .presentation import FileLocation as FileLocation
from .presentation import GenericCallView as GenericCallView
from .presentation import GenericResultView as GenericResultView
from .presentation import ReadLine as ReadLine
from .presentation import ReadResultView as ReadResultView
from .presentation import SearchFileMatches as SearchFileMatches
from .presentation import SearchLineMatch as SearchLineMatch
from .presentation import SearchMatchesResultView as SearchMatchesResultView
from .presentation import SearchPathsResultView as SearchPathsResultView
from .presentation import TerminalCallView as TerminalCallView
from .presentation import TerminalResultView as TerminalResultView
from .presentation import ToolCallKind as ToolCallKind
from .presentation import ToolCallView as ToolCallView
from .presentation import ToolResult as ToolResult
from .presentation import ToolResultView as ToolResultView
from .presentation import WebFetchResultView as WebFetchResultView
from .presentation import WebSearchResultView as WebSearchResultView
from .presentation import WebSource as WebSource
from .registry._admission import ResolvedToolSet as ResolvedToolSet
from .registry._registry import ToolRegistry as ToolRegistry
from .registry._state import RegistryStatistics as RegistryStatistics
from .registry._write import ScopedTools as ScopedTools
from .scheduler._plan import ExecutionMode as ExecutionMode
from .scheduler._plan import Stage as Stage
from .scheduler._plan import next_stage as next_stage
from .scheduler._plan import plan_stages as plan_stages
from .schema import assert_object_json_schema as assert_object_json_schema
from .schema import assert_supported_json_schema as assert_supported_json_schema
from .schema import compile_validator as compile_validator
from .schema import parameter_schema_to_json_schema as parameter_schema_to_json_schema
from .schema import validate_args as validate_args
from .schema import validate_json_schema_value as validate_json_schema_value
from .schema import value_schema_to_json_schema as value_schema_to_json_schema
from .schema._params import JsonSchemaParameters as JsonSchemaParameters
from .schema._params import json_schema_parameters as json_schema_parameters

__version__ = "0.1.0"

__all__ = (
    "RESERVED_TOOL_NAME",
    "TOOL_ABORTED",
    "TOOL_ABORTED_BEFORE_DISPATCH",
    "TOOL_TIMEOUT",
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
    "BatchStatistics",
    "Block",
    "Cancel",
    "Clock",
    "CodeRunFailedError",
    "ContentBlock",
    "Deny",
    "DiffCallView",
    "DiffResultView",
    "Disposer",
    "EventLog",
    "ExecutionMode",
    "ExecutionToken",
    "ExecutorLostError",
    "ExecutorUnavailableError",
    "FileDiff",
    "FileLocation",
    "FrozenDict",
    "FrozenList",
    "GenericCallView",
    "GenericResultView",
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
    "ReadLine",
    "ReadResultView",
    "RegistryStatistics",
    "ReplaceValue",
    "ResolvedToolSet",
    "ScopedTools",
    "SearchFileMatches",
    "SearchLineMatch",
    "SearchMatchesResultView",
    "SearchPathsResultView",
    "Stage",
    "SystemClock",
    "TerminalCallView",
    "TerminalResultView",
    "TimeoutPolicy",
    "TimeoutReason",
    "ToolArgsError",
    "ToolBatchExecutionError",
    "ToolBatchInput",
    "ToolBatchResult",
    "ToolCall",
    "ToolCallKind",
    "ToolCallResult",
    "ToolCallView",
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
    "ToolResult",
    "ToolResultView",
    "ToolRunContext",
    "ToolTimeoutError",
    "ToolWorkerLostError",
    "UserMessage",
    "WebFetchResultView",
    "WebSearchResultView",
    "WebSource",
    "assert_object_json_schema",
    "assert_supported_json_schema",
    "compile_validator",
    "define_tool",
    "json_schema_parameters",
    "next_stage",
    "parameter_schema_to_json_schema",
    "parse_arguments",
    "plan_stages",
    "read_jsonl",
    "snapshot_json",
    "text_block",
    "tool",
    "validate_args",
    "validate_json_schema_value",
    "value_schema_to_json_schema",
)
