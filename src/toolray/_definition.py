"""Tool definitions: the registered unit, ``define_tool`` and the register-time checks."""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ._arguments import args_error
from ._content import ContentBlock
from .farm._bounds import check_bound
from .farm._values import RateLimit, RetryPolicy
from .schema import (
    assert_supported_json_schema,
    compile_validator,
    parameter_schema_to_json_schema,
    value_schema_to_json_schema,
)
from .schema._params import JsonSchemaParameters, compile_parameters

if TYPE_CHECKING:
    from ._context import ToolRunContext
    from ._execution import ToolExecution
    from ._outcomes import ToolExecutionResult
    from .presentation import ToolCallView, ToolResult, ToolResultView

__all__ = (
    "ISOLATION_MODES",
    "RESERVED_TOOL_NAME",
    "REUSE_MODES",
    "Placement",
    "ToolDefinition",
    "ToolOutput",
    "check_registration",
    "define_tool",
    "not_a_definition",
)

RESERVED_TOOL_NAME = "run_code"

ISOLATION_MODES = ("call", "shared", "sandbox")
"""How far a body reaches on Ray: its own call only (in a confined process, with
``"sandbox"``), or every call of its worker."""
REUSE_MODES = ("tool", "never")
"""Which later calls a call process takes: its tool's only, or none."""

JsonSchema = dict[str, Any]
ContentProjector = Callable[["ToolExecution", "ToolExecutionResult"], "list[ContentBlock] | None"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutput:
    """The canonical output contract: the value's schema and its pure projections."""

    schema: JsonSchema
    render: Callable[[Any, Any], list[ContentBlock]]
    presentation_meta: Callable[[Any, Any], Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """Ray layer only: which worker pool runs the body (ignored in-process).

    Tools with equal placements share one pool. ``num_cpus``, ``num_gpus``, ``resources``
    and ``runtime_env`` are the worker actors' options; ``size``, ``spare`` and
    ``max_concurrency`` size that pool (one worker, no spare and the configured
    concurrency when not given); ``pool`` names a ``[pools.<name>]`` table of the runtime
    configuration, whose settings the other fields override.

    ``isolation`` says how far a body's fault reaches: ``"call"`` runs each call alone in
    a child process of the worker (a crash, a memory blow-up or a kill at the deadline
    fails that call only), ``"shared"`` runs the bodies as threads and tasks of the worker
    itself (fastest; a fault fails every call in that worker). ``None`` takes the pool's
    setting: ``"call"`` for CPU pools, ``"shared"`` (one call at a time) for GPU pools.

    ``min_size`` / ``max_size`` (default ``size`` for both: a fixed pool) and ``idle_s``
    (default 60) make the pool elastic: it adds workers while calls wait for one, up to
    ``max_size``, and retires workers idle for ``idle_s``, down to ``min_size``.

    ``reuse`` (with ``isolation="call"``): a call process whose call ended cleanly takes
    later calls of the same tool definition only (``"tool"``, the default) — never another
    tool's, whichever scope it comes from — or none at all (``"never"``: a fresh process
    per call).

    ``isolation="sandbox"`` runs each call in a fresh process confined like a Code Mode
    program (its own user, pid, mount, ipc and network namespaces, Landlock, a syscall
    filter; never reused): the body sees its arguments, its context, what Python and the
    tools' code need, and only the paths and network granted here — ``read_paths``
    (absolute, read-only), ``write_paths`` (absolute, read-write; on a root host they must
    be writable by uid 65534) and ``network`` (``False``: no network at all).

    Example:
        >>> Placement(resources={"gpu_slot": 1}, size=2).spare is None
        True
    """

    num_cpus: float | None = None
    num_gpus: float | None = None
    resources: dict[str, float] | None = None
    runtime_env: dict[str, Any] | None = None
    pool: str | None = None
    size: int | None = None
    spare: int | None = None
    max_concurrency: int | None = None
    min_size: int | None = None
    max_size: int | None = None
    idle_s: float | None = None
    isolation: Literal["call", "shared", "sandbox"] | None = None
    reuse: Literal["tool", "never"] = "tool"
    read_paths: tuple[str, ...] = ()
    write_paths: tuple[str, ...] = ()
    network: bool = False

    def __post_init__(self) -> None:
        if self.isolation not in (None, *ISOLATION_MODES):
            raise ValueError(
                f'Placement.isolation must be "call", "shared" or "sandbox", not {self.isolation!r}'
            )
        for field in ("read_paths", "write_paths"):
            object.__setattr__(self, field, _absolute_paths(field, getattr(self, field)))
        if not isinstance(self.network, bool):
            raise ValueError(f"Placement.network must be a bool, not {self.network!r}")
        if self.reuse not in REUSE_MODES:
            raise ValueError(f'Placement.reuse must be "tool" or "never", not {self.reuse!r}')
        fields = (("size", 1), ("spare", 0), ("max_concurrency", 1), ("min_size", 1))
        for field, least in (*fields, ("max_size", 1)):
            value = getattr(self, field)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                kind = "a positive integer" if least else "a non-negative integer"
                raise ValueError(f"Placement.{field} must be {kind}, not {value!r}")
        if self.idle_s is not None and not _is_positive_finite(self.idle_s):
            raise ValueError(f"Placement.idle_s must be a positive number, not {self.idle_s!r}")
        low, high = self.min_size, self.max_size
        if low is not None and high is not None and low > high:
            raise ValueError(
                f"Placement.min_size ({self.min_size}) must not exceed max_size ({self.max_size})"
            )


def _absolute_paths(field: str, paths: object) -> tuple[str, ...]:
    if isinstance(paths, str) or not isinstance(paths, (tuple, list)):
        raise ValueError(f"Placement.{field} must be a tuple of absolute paths, not {paths!r}")
    for path in paths:
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError(f"Placement.{field} holds {path!r}: an absolute path is expected")
    return tuple(paths)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDefinition:
    """A registered tool: model-facing schema, output contract, body and host metadata."""

    name: str
    description: str | None
    parameters: JsonSchema
    output: ToolOutput
    execute: Callable[[Any, ToolRunContext], Awaitable[Any] | Any]
    timeout_ms: float | None = None
    is_concurrency_safe: Callable[[Any], bool] | None = None
    present_call: Callable[[Any], ToolCallView | None] | None = None
    present_result: Callable[[Any, ToolResult], ToolResultView | None] | None = None
    project_content: ContentProjector | None = None
    finalize_content: ContentProjector | None = None
    placement: Placement | None = None
    rate_limit: RateLimit | None = None
    max_result_bytes: int | None = None
    max_content_chars: int | None = None
    idempotent: bool = False
    retry: RetryPolicy | None = None
    environment: str | None = None
    """The environment whose instance the body acts on (``ctx.environment``), if any."""

    def __post_init__(self) -> None:
        check_farm_controls(self)
        check_environment_binding(self.name, self.environment, self.placement)


def check_environment_binding(name: str, environment: Any, placement: Any) -> None:
    """A tool of an environment runs where its instance lives: no placement of its own."""
    if environment is None:
        return
    if not isinstance(environment, str) or not environment:
        raise TypeError(f'tool "{name}": environment must be an environment\'s name (a str)')
    if placement is not None:
        raise ValueError(
            f'tool "{name}": a tool of environment "{environment}" runs where its instance '
            "lives; give the environment a placement instead of the tool"
        )


def check_farm_controls(definition: ToolDefinition) -> None:
    """The farm controls' register-time checks: types, bounds, retries only if idempotent."""
    name = definition.name
    if definition.rate_limit is not None and not isinstance(definition.rate_limit, RateLimit):
        raise TypeError(f'tool "{name}": rate_limit must be a RateLimit or None')
    check_bound(f'tool "{name}"', "max_result_bytes", definition.max_result_bytes)
    check_bound(f'tool "{name}"', "max_content_chars", definition.max_content_chars)
    retry = definition.retry
    if retry is None:
        return
    if not isinstance(retry, RetryPolicy):
        raise TypeError(f'tool "{name}": retry must be a RetryPolicy or None')
    if definition.idempotent is not True:
        raise ValueError(
            f'tool "{name}": a retry policy needs idempotent=True (toolray never re-runs a '
            "tool that did not declare itself safe to run twice)"
        )


def _is_positive_finite(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and value > 0


def define_tool(
    *,
    name: str,
    description: str | None,
    parameters: dict[str, Any] | JsonSchemaParameters,
    output: ToolOutput,
    execute: Callable[[Any, ToolRunContext], Awaitable[Any] | Any],
    timeout_ms: float | None = None,
    is_concurrency_safe: Callable[[Any], bool] | None = None,
    present_call: Callable[[Any], ToolCallView | None] | None = None,
    present_result: Callable[[Any, ToolResult], ToolResultView | None] | None = None,
    project_content: ContentProjector | None = None,
    finalize_content: ContentProjector | None = None,
    placement: Placement | None = None,
    rate_limit: RateLimit | None = None,
    max_result_bytes: int | None = None,
    max_content_chars: int | None = None,
    idempotent: bool = False,
    retry: RetryPolicy | None = None,
    environment: str | None = None,
) -> ToolDefinition:
    """Build a :class:`ToolDefinition` from DSL specs, validating arguments in the body.

    ``parameters`` is a parameter-map spec (or a JSON Schema through
    ``json_schema_parameters``) and ``output.schema`` a value spec; both compile here
    (R-DSL-27..31). The wrapped body raises ``ToolArgsError`` on invalid arguments and
    otherwise passes the same argument object to ``execute``; the classifier and presenters
    see only valid arguments.

    The farm controls: ``rate_limit`` (a :class:`~toolray.RateLimit` shared by every caller),
    ``max_result_bytes`` / ``max_content_chars`` (override the registry's bounds),
    ``idempotent`` and ``retry`` (a :class:`~toolray.RetryPolicy`; ``ValueError`` unless the
    tool is idempotent).

    ``environment`` names the environment the body acts on: its scope's instance is
    ``ctx.environment``, and the call runs where that instance lives (so the tool takes no
    ``placement`` of its own). Such a tool is exclusive unless ``is_concurrency_safe``
    says otherwise: the instance's exclusive calls run one at a time, in arrival order.

    Example:
        >>> echo = define_tool(
        ...     name="echo",
        ...     description="Echo text",
        ...     parameters={"text": {"type": "string", "required": True}},
        ...     output=ToolOutput(
        ...         schema={"type": "string"}, render=lambda a, v: [{"type": "text", "text": v}]
        ...     ),
        ...     execute=lambda args, ctx: args["text"],
        ... )
        >>> echo.parameters["required"]
        ['text']
    """
    if timeout_ms is not None and not _is_positive_finite(timeout_ms):
        raise ValueError(f"define_tool({name}): timeout_ms must be a positive finite number")
    if retry is not None and idempotent is not True:
        raise ValueError(
            f"define_tool({name}): a retry policy needs idempotent=True (toolray never "
            "re-runs a tool that did not declare itself safe to run twice)"
        )
    compiled_parameters = compile_parameters(parameters, parameter_schema_to_json_schema)
    compiled_output = value_schema_to_json_schema(output.schema)
    check = compile_validator(compiled_parameters, "")

    def validated(args: Any) -> Any:
        violations = check(args)
        if violations:
            raise args_error(args, violations)
        return args

    if inspect.iscoroutinefunction(execute):

        async def body(args: Any, ctx: ToolRunContext) -> Any:
            return await execute(validated(args), ctx)

    else:

        def body(args: Any, ctx: ToolRunContext) -> Any:  # type: ignore[misc]
            return execute(validated(args), ctx)

    return ToolDefinition(
        name=name,
        description=description,
        parameters=compiled_parameters,
        output=ToolOutput(
            schema=compiled_output,
            render=output.render,
            presentation_meta=output.presentation_meta,
        ),
        execute=body,
        timeout_ms=timeout_ms,
        is_concurrency_safe=_soft(check, is_concurrency_safe, False),
        present_call=_soft(check, present_call, None),
        present_result=_soft(check, present_result, None),
        project_content=project_content,
        finalize_content=finalize_content,
        placement=placement,
        rate_limit=rate_limit,
        max_result_bytes=max_result_bytes,
        max_content_chars=max_content_chars,
        idempotent=idempotent,
        retry=retry,
        environment=environment,
    )


def _soft(check: Callable[[Any], list[str]], fn: Any, invalid: Any) -> Any:
    """Wrap a classifier or presenter so that invalid arguments never reach it."""
    if fn is None:
        return None

    def wrapper(args: Any, *rest: Any) -> Any:
        if check(args):
            return invalid
        return fn(args, *rest)

    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper


def not_a_definition(value: object) -> TypeError:
    """The error of ``register(value)`` for a ``value`` that is not a ``ToolDefinition``.

    A plain function is the common slip: the message names the decorator that makes it one.

    Example:
        >>> def add(a: int, b: int) -> int: ...
        >>> print(not_a_definition(add))
        register() takes a ToolDefinition, not function "add"; decorate it with @tool (from toolray import tool)
    """  # noqa: E501
    if inspect.isfunction(value) or inspect.ismethod(value):
        return TypeError(
            f'register() takes a ToolDefinition, not function "{value.__name__}"; '
            "decorate it with @tool (from toolray import tool)"
        )
    return TypeError(f"register() takes a ToolDefinition, not {type(value).__name__}")


def check_registration(definition: ToolDefinition) -> None:
    """The register-time checks, in their documented order (R-REG-02..08).

    Output shape, then output schema, then ``timeout_ms``, then the reserved name; the
    duplicate check belongs to the layer.
    """
    name = definition.name
    output = getattr(definition, "output", None)
    if (
        output is None
        or not callable(getattr(output, "render", None))
        or not (
            getattr(output, "presentation_meta", None) is None or callable(output.presentation_meta)
        )
    ):
        raise TypeError(
            f'tool "{name}" must declare output {{ schema, render, presentation_meta? }}'
        )
    assert_supported_json_schema(getattr(output, "schema", None))
    if definition.timeout_ms is not None and not _is_positive_finite(definition.timeout_ms):
        raise TypeError(f'tool "{name}" timeout_ms must be a positive finite number')
    if name == RESERVED_TOOL_NAME:
        raise ValueError(
            f'tool name "{RESERVED_TOOL_NAME}" is reserved for the Code Mode presentation '
            "transport and cannot be registered or shadowed"
        )
