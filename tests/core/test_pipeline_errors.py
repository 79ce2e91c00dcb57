"""P-ERR: error classes, codes and model-facing texts.

Python mapping of P-ERR-3: Python can only raise ``BaseException`` subclasses, so
``throw 'kaboom'`` / ``throw {message}`` / ``throw {code: 500}`` become "an exception whose
``str()`` is X", "an exception carrying a ``str`` ``message`` attribute" and "an exception
without one"; "inspection and coercion both throw" becomes "``str(exc)`` raises".
P-ERR-5's durable ``tool/result`` event is ``result.to_wire()`` in Python: the
check is that the wire ``error`` carries no ``info``.
``CODE_RUN_FAILED`` (``run_code``) belongs to the Code Mode suite; only its error class is
checked here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from toolray import (
    Accept,
    Block,
    CodeRunFailedError,
    HarnessError,
    ReplaceValue,
    ToolExecutionFailure,
    ToolFailure,
    ToolRegistry,
    text_block,
)
from toolray.errors import TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH, TOOL_TIMEOUT

from . import _pipeline_helpers as h
from ._pipeline_helpers import NOT_LOSSLESS, Probe, call, error_wire, make_tool, msg

Scenario = Callable[[ToolRegistry, Probe], Awaitable[Any]]


@pytest.mark.parametrize(
    "scenario",
    [
        h.sc_pre_deny,
        h.sc_guard_deny,
        h.sc_pre_throws,
        h.sc_body_throws,
        h.sc_unknown,
        h.sc_pre_aborted,
        h.sc_aborted_after_body,
        h.sc_invalid_args,
        h.sc_invalid_output,
        h.sc_args_fail,
        h.sc_timeout,
    ],
    ids=lambda s: f"P-ERR-1-{s.__name__[3:]}",
)
async def test_p_err_1_registry_failures_are_one_error_block(scenario: Scenario) -> None:
    reg = ToolRegistry()
    result = await scenario(reg, Probe(reg))
    assert isinstance(result, ToolExecutionFailure)
    assert result.content == [text_block(f"Error: {result.error.message}")]


async def test_p_err_1_exceptions_block_wrapper_and_finalizer_content_are_verbatim() -> None:
    reg = ToolRegistry()
    reg.register(make_tool())
    reg.on_post_execute(lambda e, r, n: Block([text_block("feedback")]))
    blocked = await reg.execute(call())
    assert blocked.content == [text_block("feedback")]

    reg = ToolRegistry()
    reg.register(make_tool())
    authored = ToolExecutionFailure(ToolFailure("m"), [text_block("wrapper text")])
    reg.on_execute(lambda e, n: authored)
    assert (await reg.execute(call())).content == [text_block("wrapper text")]

    reg = ToolRegistry()
    reg.register(make_tool(finalize_content=lambda e, r: [text_block("final")]))
    reg.guard(lambda e: "denied")
    assert (await reg.execute(call())).content == [text_block("final")]


async def test_p_err_2_info_only_for_harness_errors() -> None:
    for exc, info in (
        (HarnessError("disk full", "ENOSPC"), ("HarnessError", "ENOSPC")),
        (OSError("disk full"), None),
    ):
        reg = ToolRegistry()

        async def body(args: Any, ctx: Any, exc: Exception = exc) -> Any:
            raise exc

        reg.register(make_tool("echo", body))
        result = await reg.execute(call())
        assert result.to_wire() == error_wire("disk full", info)


class _WithMessage(Exception):
    def __init__(self) -> None:
        super().__init__("positional text")
        self.message = "denied by object"


class _NonStrMessage(Exception):
    def __init__(self) -> None:
        super().__init__("str form")
        self.message = 500


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("cannot print")


@pytest.mark.parametrize(
    ("exc", "text"),
    [
        (RuntimeError("plain"), "plain"),
        (_WithMessage(), "denied by object"),
        (ValueError("kaboom"), "kaboom"),
        (_NonStrMessage(), "str form"),
        (_Unprintable(), "<unprintable thrown value>"),
    ],
    ids=[
        "P-ERR-3-error",
        "P-ERR-3-message-attr",
        "P-ERR-3-str",
        "P-ERR-3-non-str-message",
        "P-ERR-3-unprintable",
    ],
)
async def test_p_err_3_message_extraction(exc: Exception, text: str) -> None:
    reg = ToolRegistry()

    async def body(args: Any, ctx: Any) -> Any:
        raise exc

    reg.register(make_tool("echo", body))
    result = await reg.execute(call())
    assert result.content == [text_block(f"Error: {text}")]
    assert result.error.message == text  # type: ignore[union-attr]


CODES: list[tuple[Scenario, str, str, str]] = [
    (h.sc_unknown, "UNKNOWN_TOOL", "ToolNotFoundError", 'unknown tool "nope"'),
    (
        h.sc_collapse,
        "UNKNOWN_TOOL",
        "ToolNotFoundError",
        'unknown tool "echo": only `run_code` is callable directly — call `echo` from inside a '
        "`run_code` program instead",
    ),
    (
        h.sc_invalid_args,
        "INVALID_ARGS",
        "ToolArgsError",
        'invalid arguments: missing required property "path"',
    ),
    (
        h.sc_invalid_output,
        "INVALID_TOOL_OUTPUT",
        "ToolOutputError",
        'tool "echo" returned invalid output: "value" must be a string',
    ),
    (h.sc_aborted_after_body, "ABORTED", "AbortError", "tool call aborted"),
    (
        h.sc_pre_aborted,
        "ABORTED_BEFORE_DISPATCH",
        "AbortError",
        "tool call aborted before dispatch",
    ),
    (h.sc_timeout, "TOOL_TIMEOUT", "ToolTimeoutError", "tool call timed out after 100ms"),
]


@pytest.mark.parametrize(
    ("scenario", "code", "name", "message"),
    CODES,
    ids=[f"P-ERR-4-{c[1]}-{c[0].__name__[3:]}" for c in CODES],
)
async def test_p_err_4_code_table(scenario: Scenario, code: str, name: str, message: str) -> None:
    reg = ToolRegistry()
    result = await scenario(reg, Probe(reg))
    assert result.to_wire() == error_wire(message, (name, code))


def test_p_err_4_exported_constants_and_code_run_failed() -> None:
    assert (TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH, TOOL_TIMEOUT) == (
        "ABORTED",
        "ABORTED_BEFORE_DISPATCH",
        "TOOL_TIMEOUT",
    )
    err = CodeRunFailedError("code run failed (syntax): boom")
    assert isinstance(err, HarnessError)
    assert (err.code, err.name) == ("CODE_RUN_FAILED", "CodeRunFailedError")


async def test_p_err_4_tool_owned_code_is_kept() -> None:
    reg = ToolRegistry()

    async def body(args: Any, ctx: Any) -> Any:
        raise HarnessError("web fetch aborted", "WEB_ABORTED")

    reg.register(make_tool("echo", body))
    result = await reg.execute(call())
    assert result.to_wire() == error_wire("web fetch aborted", ("HarnessError", "WEB_ABORTED"))


@pytest.mark.parametrize(
    "scenario",
    [h.sc_pre_deny, h.sc_ask_deny, h.sc_guard_deny, h.sc_args_fail, h.sc_body_throws],
    ids=lambda s: f"P-ERR-5-{s.__name__[3:]}",
)
async def test_p_err_5_infoless_failures(scenario: Scenario) -> None:
    reg = ToolRegistry()
    result = await scenario(reg, Probe(reg))
    assert result.is_error
    assert "info" not in result.to_wire()["error"]


@pytest.mark.parametrize(
    "decision",
    [Block([text_block("blocked")]), ReplaceValue("x")],
    ids=["P-ERR-5-block", "P-ERR-5-cannot-replace"],
)
async def test_p_err_5_post_execute_failures_carry_no_info(decision: Any) -> None:
    reg = ToolRegistry()
    reg.register(make_tool("echo", h._raise_async))  # a failed result (for ReplaceValue)
    reg.on_post_execute(lambda e, r, n: decision)
    result = await reg.execute(call())
    assert result.is_error
    assert "info" not in result.to_wire()["error"]


ORIGINS: dict[str, Callable[[ToolRegistry], Any]] = {
    "body": lambda reg: reg.register(make_tool("throws", h._raise_async)),
    "pre": lambda reg: reg.on_pre_execute(h._raise_async),
    "guard": lambda reg: reg.guard(h._raise_sync),
    "around": lambda reg: reg.on_execute(h._raise_async),
    "post": lambda reg: reg.on_post_execute(h._raise_async),
    "observer": lambda reg: reg.on_result(h._raise_sync),
    "finalize": lambda reg: reg.register(make_tool("fin", finalize_content=h._raise_sync)),
}


@pytest.mark.parametrize("origin", list(ORIGINS), ids=lambda o: f"P-ERR-6-{o}")
async def test_p_err_6_failures_never_raise_out_of_execute(origin: str) -> None:
    reg = ToolRegistry()
    reg.register(make_tool())
    ORIGINS[origin](reg)
    name = {"body": "throws", "finalize": "fin"}.get(origin, "echo")
    result = await reg.execute(call(name))
    if origin == "observer":
        assert not result.is_error  # contained: the outcome does not change
    else:
        assert result.is_error
    unknown = await reg.execute(call("nope"))
    assert unknown.is_error


@pytest.mark.parametrize(
    "authored",
    [
        ToolExecutionFailure(error=None, content=[text_block("x")]),  # type: ignore[arg-type]
        ToolExecutionFailure(ToolFailure("m"), [{"type": "text", "text": {1}}]),
        ToolExecutionFailure(
            ToolFailure("m"), [text_block("x")], additional_contexts=(msg("ok"), "bad")
        ),  # type: ignore[arg-type]
    ],
    ids=["P-ERR-7-missing-error", "P-ERR-7-lossy-content", "P-ERR-7-bad-context"],
)
async def test_p_err_7_malformed_wrapper_failure_fails_materialization(authored: Any) -> None:
    reg = ToolRegistry()
    reg.register(make_tool())
    reg.on_execute(lambda e, n: authored)
    result = await reg.execute(call())
    assert result.to_wire() == error_wire(NOT_LOSSLESS)


async def test_p_err_7_accept_on_a_malformed_failure_cannot_rescue_it() -> None:
    reg = ToolRegistry()
    reg.register(make_tool())
    reg.on_execute(
        lambda e, n: dataclasses.replace(
            ToolExecutionFailure(ToolFailure("m"), [text_block("x")]), error=None
        )
    )
    reg.on_post_execute(lambda e, r, n: Accept(content=[text_block("fixed?")]))
    result = await reg.execute(call())
    assert result.to_wire() == error_wire(NOT_LOSSLESS)
