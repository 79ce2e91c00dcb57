"""Hypothesis: random sequences of binding calls (random JSON arguments, some failing) give the
program exactly what the same calls give when awaited directly in-process."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.code._helpers import Recorder, run
from toolray.code import BindingError, PythonRuntime

floats = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda f: not (f == 0 and math.copysign(1.0, f) < 0)  # -0.0 is not lossless JSON
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | floats | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
calls = st.tuples(
    st.sampled_from(["echo", "fail"]),
    st.dictionaries(st.text(max_size=6), json_values, max_size=3),
    st.sampled_from(["kwargs", "dict", "tools"]),
)


@pytest.fixture(scope="module")
def shared_runtime() -> Iterator[PythonRuntime]:
    runtime = PythonRuntime(timeout_s=60, warm=2)
    yield runtime
    runtime.close()


def _program(steps: list[tuple[str, dict, str]], concurrent: bool) -> str:
    forms = {"kwargs": "{0}(**A[{1}])", "dict": "{0}(A[{1}])", "tools": "tools.{0}(**A[{1}])"}
    exprs = [forms[form].format(name, i) for i, (name, _, form) in enumerate(steps)]
    head = (
        "import asyncio, json\n"
        f"A = json.loads({json.dumps([args for _, args, _ in steps])!r})\n"
        "async def one(pending):\n"
        "    try:\n        return {'ok': await pending}\n"
        "    except ToolCallError as e:\n        return {'err': [e.tool_name, str(e)]}\n"
    )
    if concurrent:
        return head + f"await asyncio.gather({', '.join(f'one({e})' for e in exprs)})"
    return head + "out = []\n" + "".join(f"out.append(await one({e}))\n" for e in exprs) + "out"


async def _reference(steps: list[tuple[str, dict, str]]) -> tuple[list[Any], list[Any]]:
    rec = Recorder()
    bindings = rec.bindings()
    out: list[Any] = []
    for name, args, _ in steps:
        try:
            out.append({"ok": await bindings[name](json.loads(json.dumps(args)))})
        except BindingError as err:
            out.append({"err": [name, str(err)]})
    return out, rec.calls


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(calls, max_size=8), concurrent=st.booleans())
def test_programs_match_direct_calls(
    shared_runtime: PythonRuntime, steps: list[tuple[str, dict, str]], concurrent: bool
) -> None:
    rec = Recorder()
    outcome = asyncio.run(run(shared_runtime, _program(steps, concurrent), rec.bindings()))
    expected, expected_calls = asyncio.run(_reference(steps))
    assert outcome.result == expected
    assert rec.calls == expected_calls  # same arguments, in the order the program called
    assert outcome.logs == []
