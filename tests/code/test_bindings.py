"""Binding calls across the process boundary: failures, lossless JSON, concurrency, lifecycle."""

from __future__ import annotations

import asyncio

import pytest

from tests.code._helpers import Recorder, failure, kind_of, run
from toolray import HarnessError
from toolray.code import BindingError, PythonRuntime
from toolray.testing import Gate


async def test_a_failed_call_raises_tool_call_error_with_the_message_only(
    runtime: PythonRuntime,
) -> None:
    # C-CODE-5: the program sees the failure message only, plus the tool's name.
    async def explode(args):
        raise BindingError("deliberate failure")

    async def harness(args):
        raise HarnessError("denied by policy", "DENIED")

    program = (
        "out = []\nfor f in (tools.explode, tools.harness):\n"
        "    try:\n        await f()\n    except ToolCallError as e:\n"
        "        out.append([e.tool_name, str(e)])\nout"
    )
    got = await run(runtime, program, {"explode": explode, "harness": harness})
    assert got.result == [["explode", "deliberate failure"], ["harness", "denied by policy"]]


async def test_an_uncaught_tool_call_error_fails_the_run(runtime: PythonRuntime) -> None:
    rec = Recorder()
    err = await failure(runtime, "print('before')\nawait fail(a=1)", bindings=rec.bindings())
    assert err.message == (
        "code run failed (exception): ToolCallError: failed with 1 args\nCaptured output:\nbefore"
    )


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        ("echo(v=float('nan'))", "arguments.v: NaN is not a JSON number"),
        ("echo(v=float('inf'))", "arguments.v: an infinity is not a JSON number"),
        ("echo(v=-0.0)", "arguments.v: -0.0 is not lossless JSON"),
        ("echo(v=(1, 2))", "arguments.v: a tuple is not a JSON array"),
        ("echo(v={1: 2})", "arguments.v: key 1 is not a string"),
        ("echo(v=[b'x'])", "arguments.v[0]: bytes is not a JSON value"),
        ("echo(v=object())", "arguments.v: object is not a JSON value"),
    ],
)
async def test_non_json_arguments_are_rejected_before_dispatch(
    runtime: PythonRuntime, call: str, problem: str
) -> None:
    # C-CODE-11: the binding rejects and nothing is dispatched.
    rec = Recorder()
    program = f"try:\n    await {call}\nexcept ToolCallError as e:\n    m = str(e)\nm"
    out = await run(runtime, program, rec.bindings())
    assert out.result == f"tool arguments must be lossless JSON: {problem}"
    assert rec.calls == []


async def test_a_non_json_binding_value_fails_the_call(runtime: PythonRuntime) -> None:
    async def bad(args):
        return {"x": float("nan")}

    program = "try:\n    await bad()\nexcept ToolCallError as e:\n    m = str(e)\nm"
    out = await run(runtime, program, {"bad": bad})
    assert out.result == (
        "tool result must be lossless JSON: value.x is not lossless JSON: NaN is not a JSON number"
    )


async def test_values_cross_losslessly(runtime: PythonRuntime) -> None:
    value = {"big": 2**80, "neg": -(2**70), "f": 0.1, "u": "é\u2028\U0001f600", "n": None}

    async def give(args):
        return value

    out = await run(
        runtime,
        "v = await give()\n[v, await echo(v=v)]",
        {"give": give} | {"echo": Recorder().bindings()["echo"]},
    )
    assert out.result == [value, {"echo": {"v": value}}]


async def test_gathered_calls_are_all_outstanding_at_once(runtime: PythonRuntime) -> None:
    # Several calls in flight on the one pipe, answered out of order, matched by id.
    started: list[int] = []
    all_in = Gate()
    release = {i: Gate() for i in range(5)}

    async def slow(args):
        i = args["i"]
        started.append(i)
        if len(started) == 5:
            all_in.open()
        await release[i].wait()
        return i * 10

    async def driver() -> None:
        await all_in.wait()
        for i in reversed(range(5)):
            release[i].open()

    program = "import asyncio\nawait asyncio.gather(*[tools.slow(i=i) for i in range(5)])"
    out, _ = await asyncio.gather(run(runtime, program, {"slow": slow}), driver())
    assert started == [0, 1, 2, 3, 4]  # invoked in the order the program called them
    assert out.result == [0, 10, 20, 30, 40]


async def test_run_settles_without_waiting_for_an_unawaited_call(runtime: PythonRuntime) -> None:
    # C-CODE-12: the run is over when the program is; a late value is discarded.
    entered, release, finished = Gate(), Gate(), Gate()

    async def slow(args):
        entered.open()
        await release.wait()
        finished.open()
        return 1

    program = (
        "import asyncio\nt = asyncio.get_running_loop().create_task(tools.slow())\n"
        "await asyncio.sleep(0)\n'done'"
    )
    run_task = asyncio.ensure_future(run(runtime, program, {"slow": slow}))
    out = await run_task
    await entered.wait()
    assert out.result == "done"
    assert not finished.is_open
    release.open()
    await finished.wait()  # it runs to its end; its value goes nowhere


async def test_no_binding_is_called_after_the_run_settles(runtime: PythonRuntime) -> None:
    # C-CODE-12: a call the program would make after settlement never reaches the host.
    rec = Recorder()
    entered, release = Gate(), Gate()

    async def hold(args):
        entered.open()
        await release.wait()
        return 0

    program = (
        "import asyncio\nasync def later():\n    await tools.hold()\n    await tools.echo(x=1)\n"
        "asyncio.get_running_loop().create_task(later())\nawait asyncio.sleep(0)\n'done'"
    )
    out = await run(runtime, program, {"hold": hold, **rec.bindings()})
    await entered.wait()
    release.open()
    assert out.result == "done"
    assert rec.calls == []


async def test_a_binding_raising_before_it_awaits_fails_only_the_call(
    runtime: PythonRuntime,
) -> None:
    def sync_boom(args):
        raise ValueError("bad input")

    def sync_ok(args):
        return "plain"

    program = (
        "try:\n    await tools.boom()\nexcept ToolCallError as e:\n    m = str(e)\n"
        "[m, await tools.ok()]"
    )
    out = await run(runtime, program, {"boom": sync_boom, "ok": sync_ok})
    assert out.result == ["bad input", "plain"]


async def test_a_reserved_name_is_only_on_tools(runtime: PythonRuntime) -> None:
    async def tools_tool(args):
        return "the tool"

    out = await run(runtime, "[type(tools).__name__, await tools.tools()]", {"tools": tools_tool})
    assert out.result == ["module", "the tool"]


async def test_kinds_helper_sees_exception_for_tool_errors(runtime: PythonRuntime) -> None:
    err = await failure(runtime, "await fail()", bindings=Recorder().bindings())
    assert kind_of(err) == "exception"
