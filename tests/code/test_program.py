"""What a program sees and produces: globals, ``tools``, prints, the last expression, imports."""

from __future__ import annotations

import pytest

from tests.code._helpers import Recorder, failure, kind_of, run
from toolray.code import CodeRunOutcome, PythonRuntime


async def test_bindings_are_globals_and_tools_attributes(runtime: PythonRuntime) -> None:
    rec = Recorder()
    program = "a = await tools.echo(q='x')\nb = await echo({'q': 'y'})\n[a, b]"
    out = await run(runtime, program, rec.bindings())
    assert out == CodeRunOutcome(
        logs=[], result=[{"echo": {"q": "x"}}, {"echo": {"q": "y"}}], has_result=True
    )
    assert rec.calls == [("echo", {"q": "x"}), ("echo", {"q": "y"})]


async def test_positional_arguments_map_onto_parameter_names(runtime: PythonRuntime) -> None:
    seen = []

    async def search(args):
        seen.append(dict(args))
        return len(seen)

    search.parameter_names = ("query", "limit")  # type: ignore[attr-defined]
    out = await run(runtime, "await search('x', 5)\nawait search('y', limit=2)", {"search": search})
    assert seen == [{"query": "x", "limit": 5}, {"query": "y", "limit": 2}]
    assert out.result == 2


async def test_positionals_without_parameter_names_fail_the_call(runtime: PythonRuntime) -> None:
    rec = Recorder()
    program = "try:\n    await echo('x')\nexcept ToolCallError as e:\n    msg = str(e)\nmsg"
    out = await run(runtime, program, rec.bindings())
    assert out.result == "echo() takes keyword arguments or one arguments dict; got 1 positional"
    assert rec.calls == []


async def test_a_tool_name_that_is_no_identifier_is_reachable_through_tools(
    runtime: PythonRuntime,
) -> None:
    async def web(args):
        return "ok"

    out = await run(runtime, "await getattr(tools, 'web-search')()", {"web-search": web})
    assert out.result == "ok"


async def test_each_print_is_one_log_entry_without_its_newline(runtime: PythonRuntime) -> None:
    program = (
        "print('a', 1)\nprint()\nprint('x\\ny')\nprint(1, 2, sep='-', end='!')\n"
        "print('no', end='')\nimport pprint\npprint.pprint({'k': 1})"
    )
    out = await run(runtime, program)
    assert out.logs == ["a 1", "", "x\ny", "1-2!", "no", "{'k': 1}"]
    assert out.has_result is True  # the last statement is an expression (pprint() -> None)
    assert out.result is None


@pytest.mark.parametrize(
    ("program", "result", "has_result"),
    [
        ("1 + 1", 2, True),
        ("x = 1", None, False),
        ("None", None, True),
        ("", None, False),
        ("{'a': [1, 2.5, 'x', None, True]}", {"a": [1, 2.5, "x", None, True]}, True),
        ("import asyncio\nawait asyncio.sleep(0)\n'slept'", "slept", True),
        ("def f():\n    return 3\nf()", 3, True),
    ],
)
async def test_the_last_expression_is_the_result(
    runtime: PythonRuntime, program: str, result: object, has_result: bool
) -> None:
    out = await run(runtime, program)
    assert (out.result, out.has_result) == (result, has_result)


@pytest.mark.parametrize(
    ("program", "detail"),
    [
        ("{1, 2}", "result: set is not a JSON value"),
        ("float('nan')", "result: NaN is not a JSON number"),
        ("(1, 2)", "result: a tuple is not a JSON array"),
        ("{'a': {1: 2}}", "result.a: key 1 is not a string"),
        ("x = []\nx.append(x)\nx", "result[0]: circular reference"),
    ],
)
async def test_a_non_json_result_fails_as_invalid_output(
    runtime: PythonRuntime, program: str, detail: str
) -> None:
    err = await failure(runtime, program)
    assert kind_of(err) == "invalid-output"
    assert err.message == (
        f"code run failed (invalid-output): program completion must be lossless JSON: {detail}"
    )


async def test_failure_text_carries_the_captured_output(runtime: PythonRuntime) -> None:
    # C-CODE-14: the message, then the logs.
    err = await failure(runtime, "print('one')\nprint('two')\n1/0")
    assert err.code == "CODE_RUN_FAILED"
    assert err.message == (
        "code run failed (exception): ZeroDivisionError: division by zero"
        "\nCaptured output:\none\ntwo"
    )


async def test_a_syntax_error_names_its_line(runtime: PythonRuntime) -> None:
    err = await failure(runtime, "x = 1\ndef (:\n")
    assert kind_of(err) == "syntax"
    assert err.message == "code run failed (syntax): SyntaxError: invalid syntax (line 2)"


async def test_allowed_modules_and_their_submodules_import(runtime: PythonRuntime) -> None:
    program = (
        "import collections.abc, json, math\nfrom decimal import Decimal\n"
        "from fractions import Fraction\nimport statistics, hashlib, uuid, difflib\n"
        "[str(Decimal('1.1') + 1), str(Fraction(1, 3) * 3), math.floor(2.5),"
        " statistics.mean([1, 2, 3]), hashlib.sha256(b'').hexdigest()[:6]]"
    )
    out = await run(runtime, program)
    assert out.result == ["2.1", "1", 2, 2, "e3b0c4"]


@pytest.mark.parametrize(
    ("program", "module"),
    [
        ("import os", "os"),
        ("import os.path", "os.path"),
        ("from os import path", "os"),
        ("import subprocess", "subprocess"),
        ("import importlib", "importlib"),
        ("__import__('os')", "os"),
        ("len.__self__.__import__('sys')", "sys"),
        ("def f():\n    import socket\nf()", "socket"),
    ],
)
async def test_imports_outside_the_allow_list_fail_the_run(
    runtime: PythonRuntime, program: str, module: str
) -> None:
    err = await failure(runtime, program)
    assert kind_of(err) == "import"
    assert err.message.startswith(f'code run failed (import): module "{module}" is not allowed')


async def test_a_caught_import_error_lets_the_program_go_on(runtime: PythonRuntime) -> None:
    program = "try:\n    import numpy\nexcept ImportError as e:\n    r = 'fallback'\nr"
    out = await run(runtime, program)
    assert out.result == "fallback"


async def test_custom_allow_list(runtime: PythonRuntime) -> None:
    narrow = PythonRuntime(allowed_imports={"json"}, warm=0)
    try:
        assert (await run(narrow, "import json\njson.dumps([1])")).result == "[1]"
        err = await failure(narrow, "import math")
        assert err.message.startswith(
            'code run failed (import): module "math" is not allowed (allowed: json)'
        )
    finally:
        narrow.close()


async def test_open_and_input_are_not_builtins(runtime: PythonRuntime) -> None:
    err = await failure(runtime, "open('/etc/passwd')")
    assert err.message == ("code run failed (exception): NameError: name 'open' is not defined")


async def test_asyncio_run_works_in_a_program_without_top_level_await(
    runtime: PythonRuntime,
) -> None:
    rec = Recorder()
    program = (
        "import asyncio\nasync def main():\n    a = await echo(n=1)\n"
        "    b = await asyncio.gather(tools.echo(n=2), tools.echo(n=3))\n    return [a, b]\n"
        "asyncio.run(main())"
    )
    out = await run(runtime, program, rec.bindings())
    assert out.result == [{"echo": {"n": 1}}, [{"echo": {"n": 2}}, {"echo": {"n": 3}}]]


async def test_asyncio_run_under_top_level_await_is_the_usual_error(
    runtime: PythonRuntime,
) -> None:
    program = "import asyncio\nawait asyncio.sleep(0)\nasync def f():\n    pass\nasyncio.run(f())"
    err = await failure(runtime, program)
    assert err.message == (
        "code run failed (exception): RuntimeError: "
        "asyncio.run() cannot be called from a running event loop"
    )
