"""Packaging and layering: the core imports without Ray; ``__all__`` is curated."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import toolray
import toolray.lowlevel
import toolray.policies
import toolray.testing

ROOT = Path(__file__).resolve().parents[2]


def test_import_toolray_works_with_ray_unavailable() -> None:
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "import toolray, toolray.testing, toolray.policies, toolray.lowlevel\n"
        "assert 'ray' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_core_sources_never_import_ray() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "src" / "toolray").rglob("*.py")
        if any(
            line.strip().startswith(("import ray", "from ray"))
            for line in path.read_text().splitlines()
        )
    ]
    assert offenders == []


def test_all_is_curated_and_resolvable() -> None:
    for module in (toolray, toolray.testing, toolray.policies, toolray.lowlevel):
        names = module.__all__
        assert isinstance(names, tuple)
        assert len(names) == len(set(names))
        assert all(hasattr(module, name) for name in names)
        assert not [n for n in names if n.startswith("_")]


def test_api_names_are_exported() -> None:
    expected = {
        "snapshot_json",
        "FrozenDict",
        "FrozenList",
        "HarnessError",
        "JsonSchemaError",
        "ToolArgsError",
        "ToolOutputError",
        "ToolNotFoundError",
        "AbortError",
        "ToolTimeoutError",
        "NotJsonError",
        "ToolWorkerLostError",
        "ExecutorLostError",
        "ExecutorUnavailableError",
        "CodeRunFailedError",
        "ToolBatchExecutionError",
        "value_schema_to_json_schema",
        "parameter_schema_to_json_schema",
        "validate_args",
        "assert_supported_json_schema",
        "assert_object_json_schema",
        "validate_json_schema_value",
        "compile_validator",
        "ToolOutput",
        "ToolDefinition",
        "define_tool",
        "tool",
        "text_block",
        "UserMessage",
        "ToolResult",
        "AbortController",
        "AbortSignal",
        "Disposer",
        "ToolRegistry",
        "ScopedTools",
        "ActivationContext",
        "ModelSelection",
        "ResolvedToolSet",
        "RESERVED_TOOL_NAME",
        "ToolExecutionInput",
        "ExecutionToken",
        "ToolExecution",
        "ToolDispatchExecution",
        "ToolRunContext",
        "Allow",
        "Deny",
        "Cancel",
        "Ask",
        "Accept",
        "ReplaceValue",
        "Block",
        "ToolExecutionSuccess",
        "ToolExecutionFailure",
        "ToolFailure",
        "ToolErrorInfo",
        "ApprovalService",
        "ApprovalRequest",
        "ToolCall",
        "ToolBatchInput",
        "ToolBatchResult",
        "ToolCallResult",
        "ToolExecutor",
        "BatchExecutor",
        "EventLog",
        "MemoryEventLog",
        "JsonlEventLog",
        "TimeoutPolicy",
        "Placement",
        "Clock",
    }
    assert expected <= set(toolray.__all__)
    assert {"FakeClock", "Gate", "RecordingTool", "Sequencer"} <= set(toolray.testing.__all__)
    assert toolray.RESERVED_TOOL_NAME == "run_code"
