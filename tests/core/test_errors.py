"""The error tree (P-ERR-4): codes, names, messages, pickling."""

from __future__ import annotations

import pickle

import pytest

import toolray
from toolray import (
    AbortError,
    CodeRunFailedError,
    ExecutorLostError,
    ExecutorUnavailableError,
    HarnessError,
    JsonSchemaError,
    NotJsonError,
    ToolArgsError,
    ToolBatchExecutionError,
    ToolNotFoundError,
    ToolOutputError,
    ToolTimeoutError,
    ToolWorkerLostError,
)
from toolray.errors import (
    RateLimitedError,
    ResultTooLargeError,
    SandboxUnavailableError,
    ToolrayError,
)

ALL = [
    (JsonSchemaError(["a", "b"]), "UNSUPPORTED_SCHEMA", "unsupported JSON schema: a; b"),
    (ToolArgsError(["x", "y"]), "INVALID_ARGS", "invalid arguments: x; y"),
    (ToolOutputError("t", ["v"]), "INVALID_TOOL_OUTPUT", 'tool "t" returned invalid output: v'),
    (ToolNotFoundError("t"), "UNKNOWN_TOOL", 'unknown tool "t"'),
    (AbortError(), "ABORTED", "tool call aborted"),
    (
        AbortError("tool call aborted before dispatch", "ABORTED_BEFORE_DISPATCH"),
        "ABORTED_BEFORE_DISPATCH",
        "tool call aborted before dispatch",
    ),
    (
        ToolTimeoutError("tool call timed out after 5ms"),
        "TOOL_TIMEOUT",
        "tool call timed out after 5ms",
    ),
    (NotJsonError("value is not lossless JSON", "value"), "NOT_JSON", "value is not lossless JSON"),
    (ToolWorkerLostError("worker died"), "WORKER_LOST", "worker died"),
    (ExecutorUnavailableError("none"), "EXECUTOR_UNAVAILABLE", "none"),
    (ExecutorLostError("the executor died"), "EXECUTOR_LOST", "the executor died"),
    (CodeRunFailedError("code run failed (x): y"), "CODE_RUN_FAILED", "code run failed (x): y"),
    (RateLimitedError("rate limited"), "RATE_LIMITED", "rate limited"),
    (ResultTooLargeError("too large"), "RESULT_TOO_LARGE", "too large"),
    (HarnessError("disk full", "ENOSPC"), "ENOSPC", "disk full"),
]


@pytest.mark.parametrize(("err", "code", "message"), ALL, ids=lambda v: getattr(v, "name", None))
def test_p_err_4_codes_names_and_messages(err: HarnessError, code: str, message: str) -> None:
    assert isinstance(err, HarnessError)
    assert err.code == code
    assert err.message == message
    assert str(err) == message
    assert err.name == type(err).__name__


@pytest.mark.parametrize(("err", "code", "message"), ALL, ids=lambda v: getattr(v, "name", None))
def test_every_error_pickles_with_its_fields(err: HarnessError, code: str, message: str) -> None:
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert back.__dict__ == err.__dict__
    assert (back.code, back.message, back.name) == (code, message, err.name)


def test_r_dsl_32_violations_are_kept_as_a_tuple() -> None:
    err = ToolArgsError(['missing required property "path"'])
    assert err.violations == ('missing required property "path"',)
    assert err.name == "ToolArgsError"


def test_default_codes_are_unique() -> None:
    classes = [c for c in vars(toolray.errors).values() if isinstance(c, type)]
    codes = [
        c.default_code for c in classes if issubclass(c, HarnessError) and c is not HarnessError
    ]
    assert len(codes) == len(set(codes))


def test_batch_error_pickles_with_results_and_contexts() -> None:
    err = ToolBatchExecutionError("boom", results=("r",), additional_contexts=("c",))
    back = pickle.loads(pickle.dumps(err))
    assert (back.message, back.results, back.additional_contexts) == ("boom", ("r",), ("c",))
    assert not isinstance(err, HarnessError)


async def test_every_result_pickles_with_its_fields() -> None:
    """Results cross processes (the Ray layer ships them): they round-trip unchanged."""
    from toolray import (
        AbortController,
        ToolBatchInput,
        ToolCall,
        ToolOutput,
        ToolRegistry,
        UserMessage,
        define_tool,
        text_block,
    )

    def body(args: object, ctx: object) -> str:
        ctx.defer_context(UserMessage([text_block("later")], source="test"))  # type: ignore[attr-defined]
        return "ok"

    reg = ToolRegistry()
    reg.register(
        define_tool(
            name="p",
            description=None,
            parameters={},
            output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
            execute=body,
        )
    )
    calls = [ToolCall("c1", "p", "{}"), ToolCall("c2", "nope", "{}")]
    batch = await reg.execute_batch(ToolBatchInput(calls, AbortController().signal))
    back = pickle.loads(pickle.dumps(batch))
    assert back == batch
    assert [r.result.to_wire() for r in back.results] == [r.result.to_wire() for r in batch.results]
    assert back.results[1].result.error.info.code == "UNKNOWN_TOOL"
    assert back.additional_contexts[0].source == "test"


def test_the_docstring_tree_draws_every_error() -> None:
    """The error tree is drawn in the docstring of ``errors.py``."""
    doc = toolray.errors.__doc__ or ""
    classes = [c for c in vars(toolray.errors).values() if isinstance(c, type)]
    coded = [c for c in classes if issubclass(c, HarnessError) and c is not HarnessError]
    for cls in coded:
        if cls.__name__.startswith("_"):
            continue
        assert f"{cls.__name__} " in doc
        assert cls.default_code in doc
    assert "ExecutorLostError             EXECUTOR_LOST" in doc
    assert "SandboxUnavailableError" in doc


def test_toolray_error_is_the_base_of_every_error_raised_on_purpose() -> None:
    from toolray_actors import ConfigError, RuntimeUnavailableError, StartError

    classes = [c for c in vars(toolray.errors).values() if isinstance(c, type)]
    ours = [c for c in classes if c.__module__ == "toolray.errors"]
    assert len(ours) >= 18
    assert all(issubclass(c, ToolrayError) for c in ours)
    for cls in (ConfigError, RuntimeUnavailableError, StartError):
        assert issubclass(cls, ToolrayError)
    assert issubclass(ConfigError, ValueError)
    assert issubclass(StartError, RuntimeError)
    assert issubclass(ToolBatchExecutionError, ToolrayError)
    assert not issubclass(ToolBatchExecutionError, HarnessError)


def test_sandbox_unavailable_names_each_missing_layer_and_pickles() -> None:
    err = SandboxUnavailableError(["landlock: refused", "seccomp: not x86_64"])
    assert str(err) == "sandbox unavailable: landlock: refused; seccomp: not x86_64"
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is SandboxUnavailableError
    assert back.missing == ("landlock: refused", "seccomp: not x86_64")
    assert str(back) == str(err)
