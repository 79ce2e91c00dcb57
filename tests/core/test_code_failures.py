"""C-CODE-14/15: failures of ``run_code`` itself, and how its output renders."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from toolray import AbortController, AbortSignal, ToolExecutionInput, ToolRegistry, text_block
from toolray.code import CodeRunOutcome, code_run_failed

from ._code_helpers import code_registry, outcome, run_code, text

pytestmark = pytest.mark.asyncio


# ---------------------------------------------------------------- C-CODE-14
async def test_c_code_14_a_failed_run_is_a_structured_failure_with_logs() -> None:
    reg, fake = code_registry()

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        raise code_run_failed("output-limit", "outer output exceeded 8 bytes", ["captured"])

    fake.behavior = program
    result = await run_code(reg)
    assert result.to_wire()["error"]["info"] == {
        "name": "CodeRunFailedError",
        "code": "CODE_RUN_FAILED",
    }
    assert text(result) == (
        "Error: code run failed (output-limit): outer output exceeded 8 bytes\n"
        "Captured output:\ncaptured"
    )


@pytest.mark.parametrize("mode", ["code", "both"])
async def test_c_code_14_no_runtime_is_a_structured_failure(mode: str) -> None:
    reg = ToolRegistry(mode=mode)
    result = await run_code(reg)
    assert result.is_error
    assert "requires a code runtime" in text(result)
    assert f'mode "{mode}"' in text(result)
    assert result.error.info.code == "CODE_RUN_FAILED"  # type: ignore[union-attr]


@pytest.mark.parametrize("description", ["", "   ", "\n\t"])
async def test_c_code_14_an_empty_description_is_rejected(description: str) -> None:
    reg, fake = code_registry()
    result = await run_code(reg, description=description)
    assert text(result) == "Error: invalid description: expected a non-empty string"
    assert fake.runs == []


async def test_c_code_14_missing_arguments_are_invalid_args() -> None:
    reg, fake = code_registry()
    result = await reg.execute(
        ToolExecutionInput("c1", "run_code", {"code": "1"}, AbortController().signal)
    )
    assert result.error.info.code == "INVALID_ARGS"  # type: ignore[union-attr]
    assert fake.runs == []


# ---------------------------------------------------------------- C-CODE-15
@pytest.mark.parametrize(
    ("produced", "expected"),
    [
        (outcome("printed"), "printed"),
        (outcome(result="returned"), "returned"),
        (outcome("printed", result="returned"), "printed\nreturned"),
        (outcome(), "(run_code completed with no output)"),
        (outcome(result={"n": 42, "ok": True}), '{\n  "n": 42,\n  "ok": true\n}'),
        (outcome(result={}), "{}"),
        (outcome(result=[]), "[]"),
        (outcome(result=["x", 2]), '[\n  "x",\n  2\n]'),
        (outcome(result=None), "null"),
        (outcome(result={"outer": [{"inner": True}]}), None),
        (outcome(result="é"), "é"),
    ],
)
async def test_c_code_15_rendering(produced: CodeRunOutcome, expected: str | None) -> None:
    reg, fake = code_registry()

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        return produced

    fake.behavior = program
    result = await run_code(reg)
    if expected is None:
        expected = json.dumps(produced.result, indent=2)
    assert result.content == [text_block(expected)]
    assert result.meta is None
    value = {"logs": produced.logs} | ({"result": produced.result} if produced.has_result else {})
    assert result.value == value


async def test_c_code_15_deep_results_render_linearly_without_recursion() -> None:
    reg, fake = code_registry()
    leaf = {"emptyArray": [], "emptyObject": {}, "pair": ["leaf", 2], "record": {"a": None}}
    value: Any = leaf
    for _ in range(5000):
        value = [value]

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        return outcome(result=value)

    fake.behavior = program
    rendered = text(await run_code(reg))
    assert rendered.startswith("[\n  [\n    [")
    assert '"leaf"' in rendered
    assert rendered.endswith("]")
    assert len(rendered) < 11_000
    compact = json.dumps(leaf, separators=(",", ":"))
    assert "".join(rendered.split()) == "[" * 5000 + compact + "]" * 5000
