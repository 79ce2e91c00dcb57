"""Packaging and layering: the core imports without Ray; ``__all__`` is curated."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import toolray
import toolray.errors
import toolray.lowlevel
import toolray.policies
import toolray.presentation
import toolray.schema
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


NAMESPACES = (
    toolray,
    toolray.errors,
    toolray.lowlevel,
    toolray.policies,
    toolray.presentation,
    toolray.schema,
    toolray.testing,
)


def test_all_is_curated_and_resolvable() -> None:
    for module in NAMESPACES:
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
    public = {name for module in NAMESPACES for name in module.__all__}
    assert expected <= public
    assert {"FakeClock", "Gate", "RecordingTool", "Sequencer"} <= set(toolray.testing.__all__)


def test_the_top_level_surface_is_small_and_names_the_base_error() -> None:
    assert len(toolray.__all__) <= 90
    assert "ToolrayError" in toolray.__all__
    assert toolray.ToolrayError is toolray.errors.ToolrayError
    # presentation cards, planner internals and the schema API have namespaces of their own
    assert "ToolCallView" in toolray.presentation.__all__
    assert {"Stage", "next_stage", "plan_stages"} <= set(toolray.lowlevel.__all__)
    assert "validate_args" in toolray.schema.__all__
    assert not {"ToolCallView", "Stage", "next_stage", "validate_args"} & set(toolray.__all__)


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("ToolCallView", toolray.presentation),
        ("ToolResult", toolray.presentation),
        ("plan_stages", toolray.lowlevel),
        ("parse_arguments", toolray.lowlevel),
        ("validate_args", toolray.schema),
        ("TOOL_TIMEOUT", toolray.errors),
    ],
)
def test_a_name_that_moved_still_imports_from_toolray_with_a_deprecation_warning(
    name: str, home: object
) -> None:
    with pytest.warns(DeprecationWarning, match=rf"toolray\.{name} is deprecated: import it from"):
        value = getattr(toolray, name)
    assert value is getattr(home, name)
    with pytest.warns(DeprecationWarning, match=name):
        exec(f"from toolray import {name}", {})


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        toolray.nonexistent  # type: ignore[attr-defined]  # noqa: B018


def test_statistics_is_a_deprecated_alias_of_stats() -> None:
    reg = toolray.ToolRegistry()
    executor = toolray.BatchExecutor(reg)
    assert reg.stats().tools == 0
    assert executor.stats().batches == 0
    with pytest.warns(DeprecationWarning, match=r"statistics\(\) is deprecated: use stats\(\)"):
        assert reg.statistics() == reg.stats()
    with pytest.warns(DeprecationWarning, match=r"statistics\(\) is deprecated"):
        assert executor.statistics() == executor.stats()
    assert toolray.RESERVED_TOOL_NAME == "run_code"


def _deprecated_uses(source: str) -> list[str]:
    """``from toolray import X`` / ``toolray.X`` for a name that moved out of ``toolray``."""
    moved = toolray._MOVED  # type: ignore[attr-defined]
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "toolray" and not node.level:
            found.extend(alias.name for alias in node.names if alias.name in moved)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "toolray"
            and node.attr in moved
        ):
            found.append(node.attr)
    return found


def test_the_repository_uses_no_deprecated_name() -> None:
    """The deprecation path is for others' code: ours imports names from their new homes."""
    offenders: list[str] = []
    for folder in ("src", "actors", "tests", "benchmarks", "examples"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            names = _deprecated_uses(path.read_text(encoding="utf-8"))
            offenders.extend(f"{path.relative_to(ROOT)}: {name}" for name in names)
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        for block in re.findall(r"```python\n(.*?)```", text, re.S):
            names = _deprecated_uses(block)
            offenders.extend(f"{path.relative_to(ROOT)}: {name}" for name in names)
    assert offenders == []
    assert _deprecated_uses("from toolray import ToolCallView\ntoolray.plan_stages") == [
        "ToolCallView",
        "plan_stages",
    ]
