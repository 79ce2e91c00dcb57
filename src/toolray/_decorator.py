"""``@tool``: a :class:`ToolDefinition` from a plain function's signature, hints and docstring.

pydantic derives the schemas (one model over the parameters, a ``TypeAdapter`` over the
return annotation); :func:`~toolray.schema._pydantic.to_subset` brings them into the
enforced subset. A call then runs in three steps, all inside the body, so the pipeline sees
an ordinary tool:

1. the JSON arguments are checked against the compiled parameter schema (``ToolArgsError``
   with the same texts as a ``define_tool`` tool);
2. pydantic converts them in JSON mode (so nested models arrive as instances, enums as
   members, containers as fresh plain ``dict`` / ``list``; a custom validator's refusal is
   also a ``ToolArgsError``), and the function is called with keyword arguments only,
   every parameter given (defaults filled by pydantic);
3. the return value is dumped in JSON mode through the return annotation (models become
   dicts), then validated by the pipeline against ``output.schema``.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, TypedDict, Unpack, get_args, get_origin, get_type_hints, overload

from pydantic import BaseModel, Field, PydanticUserError, TypeAdapter, ValidationError, create_model
from pydantic.json_schema import PydanticJsonSchemaWarning
from pydantic_core import PydanticSerializationError, PydanticUndefined

from ._arguments import args_error
from ._content import ContentBlock, text_block
from ._context import ToolRunContext
from ._definition import Placement, ToolDefinition, ToolOutput
from .errors import ToolArgsError
from .farm._values import RateLimit, RetryPolicy
from .schema import assert_supported_json_schema, compile_validator
from .schema._pydantic import output_json_schema, parameters_json_schema

__all__ = ("ToolOptions", "tool")

_EMPTY = inspect.Parameter.empty
_Fn = Callable[..., Any]


class ToolOptions(TypedDict, total=False):
    """The keyword options of :func:`tool` (all optional).

    ``render`` and the presenters have the :class:`ToolDefinition` signatures (they receive
    the raw JSON arguments); ``concurrency_safe`` is a bool or a predicate over them.
    """

    name: str
    description: str | None
    timeout_ms: float | None
    concurrency_safe: bool | Callable[[Any], bool]
    output_schema: dict[str, Any] | None
    render: Callable[[Any, Any], list[ContentBlock]]
    presentation_meta: Callable[[Any, Any], Any] | None
    present_call: Callable[[Any], Any] | None
    present_result: Callable[[Any, Any], Any] | None
    project_content: Callable[[Any, Any], list[ContentBlock] | None] | None
    finalize_content: Callable[[Any, Any], list[ContentBlock] | None] | None
    placement: Placement | None
    rate_limit: RateLimit | None
    max_result_bytes: int | None
    max_content_chars: int | None
    idempotent: bool
    retry: RetryPolicy | None
    environment: str | None


@overload
def tool(fn: _Fn, /, **options: Unpack[ToolOptions]) -> ToolDefinition: ...
@overload
def tool(fn: None = None, /, **options: Unpack[ToolOptions]) -> Callable[[_Fn], ToolDefinition]: ...
def tool(
    fn: _Fn | None = None, /, **options: Unpack[ToolOptions]
) -> ToolDefinition | Callable[[_Fn], ToolDefinition]:
    """Build a :class:`ToolDefinition` from a function; usable bare or with options.

    Every parameter needs an annotation and becomes a property of the object-rooted
    parameter schema (required unless it has a default); a keyword-only parameter annotated
    :class:`ToolRunContext` receives the run context instead. The description is the
    docstring's first paragraph, parameter descriptions come from its ``Args:`` section (an
    explicit ``Field(description=...)`` wins). The result replaces the function; keep the
    function by calling ``tool(fn)`` instead of decorating.

    Raises:
        JsonSchemaError: a type whose schema falls outside the enforced subset.
        TypeError: ``*args`` / ``**kwargs``, positional-only or unannotated parameters, a
            misplaced run-context parameter, a type pydantic cannot describe, or an
            unknown option.
        ValueError: ``timeout_ms`` that is not a positive finite number, or a ``retry``
            policy on a tool not declared ``idempotent=True``.

    Example:
        >>> @tool(timeout_ms=5_000)
        ... def add(a: int, b: int = 1) -> int:
        ...     '''Add two integers.
        ...
        ...     Args:
        ...         a: the first term.
        ...     '''
        ...     return a + b
        >>> add.description, add.parameters["required"], add.output.schema
        ('Add two integers.', ['a'], {'type': 'integer'})
    """
    unknown = sorted(set(options) - set(ToolOptions.__annotations__))
    if unknown:
        raise TypeError(f"tool() got unexpected options: {', '.join(unknown)}")
    if fn is None:
        return lambda inner: _build(inner, options)
    return _build(fn, options)


def _build(fn: _Fn, options: ToolOptions) -> ToolDefinition:
    name = options.get("name", getattr(fn, "__name__", ""))
    timeout_ms = options.get("timeout_ms")
    if timeout_ms is not None and not _positive_finite(timeout_ms):
        raise ValueError(f"tool({name}): timeout_ms must be a positive finite number")
    summary, arg_docs = parse_docstring(inspect.getdoc(fn))
    binding = _Binding.of(fn, name, arg_docs)
    output_schema = options.get("output_schema")
    if output_schema is None:
        output_schema = _pydantic(name, "the return type", binding.output_json_schema)
    else:
        assert_supported_json_schema(output_schema)
    check = binding.check
    return ToolDefinition(
        name=name,
        description=options.get("description", summary),
        parameters=binding.parameters,
        output=ToolOutput(
            schema=output_schema,
            render=options.get("render", render_text),
            presentation_meta=options.get("presentation_meta"),
        ),
        execute=_body(fn, binding),
        timeout_ms=timeout_ms,
        is_concurrency_safe=_classifier(check, options.get("concurrency_safe", False)),
        present_call=_soft(check, options.get("present_call")),
        present_result=_soft(check, options.get("present_result")),
        project_content=options.get("project_content"),
        finalize_content=options.get("finalize_content"),
        placement=options.get("placement"),
        rate_limit=options.get("rate_limit"),
        max_result_bytes=options.get("max_result_bytes"),
        max_content_chars=options.get("max_content_chars"),
        idempotent=options.get("idempotent", False),
        retry=options.get("retry"),
        environment=options.get("environment"),
    )


def render_text(args: Any, value: Any) -> list[ContentBlock]:
    """The default ``render``: a ``str`` as-is, anything else as JSON text, in one block."""
    return [text_block(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))]


def _body(fn: _Fn, binding: _Binding) -> Callable[[Any, ToolRunContext], Any]:
    if inspect.iscoroutinefunction(fn):

        async def run_async(args: Any, ctx: ToolRunContext) -> Any:
            return binding.dump(await fn(**binding.kwargs(args, ctx)))

        return run_async

    def run(args: Any, ctx: ToolRunContext) -> Any:
        return binding.dump(fn(**binding.kwargs(args, ctx)))

    return run


@dataclass(frozen=True, slots=True, kw_only=True)
class _Binding:
    """How JSON arguments become a call, and a return value becomes JSON."""

    parameters: dict[str, Any]
    check: Callable[[Any], list[str]]
    model: type[BaseModel]
    fields: tuple[tuple[str, str], ...]  # (model field, function parameter)
    context_param: str | None
    returns_json: bool  # False: no return annotation, or ``-> None``
    output: TypeAdapter[Any]

    @classmethod
    def of(cls, fn: _Fn, name: str, arg_docs: dict[str, str]) -> _Binding:
        try:
            hints = get_type_hints(fn, include_extras=True)
        except Exception as exc:
            raise TypeError(f"tool({name}): cannot resolve the type hints: {exc}") from exc
        context_param, params = _split_parameters(fn, name, hints)
        fields = {
            f"p{i}": _field(p, hints[p.name], arg_docs.get(p.name)) for i, p in enumerate(params)
        }
        model = _model(name, fields, params)
        parameters = parameters_json_schema(
            _pydantic(name, "the parameters", model.model_json_schema)
        )
        returns = hints.get("return", type(None))
        returns_json = returns is not type(None)
        output_type = returns if returns_json else Any
        return cls(
            parameters=parameters,
            check=compile_validator(parameters, ""),
            model=model,
            fields=tuple(zip(fields, (p.name for p in params), strict=True)),
            context_param=context_param,
            returns_json=returns_json,
            output=_pydantic(name, "the return type", lambda: TypeAdapter(output_type)),
        )

    def output_json_schema(self) -> dict[str, Any]:
        if not self.returns_json:
            return {}
        return output_json_schema(self.output.json_schema(mode="serialization"))

    def kwargs(self, args: Any, ctx: ToolRunContext) -> dict[str, Any]:
        violations = self.check(args)
        if violations:
            raise args_error(args, violations)
        try:
            parsed = self.model.model_validate_json(json.dumps(args))
        except ValidationError as err:
            raise ToolArgsError([_pydantic_violation(e) for e in err.errors()]) from None
        call = {param: getattr(parsed, field) for field, param in self.fields}
        if self.context_param is not None:
            call[self.context_param] = ctx
        return call

    def dump(self, value: Any) -> Any:
        try:
            return self.output.dump_python(value, mode="json", warnings=False)
        except PydanticSerializationError:
            return value  # left for the pipeline to report as not JSON


def _split_parameters(
    fn: _Fn, name: str, hints: dict[str, Any]
) -> tuple[str | None, list[inspect.Parameter]]:
    """The run-context parameter, and the parameters that make the schema."""
    context_param: str | None = None
    params: list[inspect.Parameter] = []
    for param in inspect.signature(fn).parameters.values():
        where = f'tool({name}): parameter "{param.name}"'
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{where}: *args and **kwargs are not supported")
        if param.kind is param.POSITIONAL_ONLY:
            raise TypeError(f"{where}: positional-only parameters are not supported")
        if param.name not in hints:
            raise TypeError(f"{where} needs a type annotation (use Any for any JSON)")
        if hints[param.name] is not ToolRunContext:
            params.append(param)
        elif param.kind is not param.KEYWORD_ONLY or context_param is not None:
            raise TypeError(f"{where}: the ToolRunContext must be one keyword-only parameter")
        else:
            context_param = param.name
    return context_param, params


def _field(param: inspect.Parameter, annotation: Any, doc: str | None) -> tuple[Any, Any]:
    # Fields are named p0, p1… with the parameter name as alias, so no parameter name can
    # clash with BaseModel attributes or pydantic's rules on leading underscores. The
    # docstring description comes first in the metadata: the user's own Field() wins.
    base, metadata = annotation, ()
    if get_origin(annotation) is Annotated:
        base, *rest = get_args(annotation)
        metadata = tuple(rest)
    ours = Field(alias=param.name, description=doc)
    default = PydanticUndefined if param.default is _EMPTY else param.default
    return Annotated[(base, ours, *metadata)], default


def _model(name: str, fields: dict[str, Any], params: list[inspect.Parameter]) -> Any:
    try:
        return _pydantic(name, "the parameters", lambda: create_model(f"{name}_args", **fields))
    except TypeError:
        for (annotation, _), param in zip(fields.values(), params, strict=True):
            _pydantic(name, f'parameter "{param.name}"', partial(TypeAdapter, annotation))
        raise


def _pydantic(name: str, what: str, make: Callable[[], Any]) -> Any:
    try:
        with warnings.catch_warnings():
            # A default that is not JSON is left out of the schema; that is fine here.
            warnings.simplefilter("ignore", PydanticJsonSchemaWarning)
            return make()
    except PydanticUserError as exc:
        raise TypeError(f"tool({name}): pydantic cannot describe {what}: {exc}") from exc


def _pydantic_violation(error: Any) -> str:
    """A pydantic error in the validator's path style: ``"items[0].n": Value error, …``."""
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"])
    return f'"{path.removeprefix(".") or "arguments"}": {error["msg"]}'


def _positive_finite(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and value > 0


def _classifier(
    check: Callable[[Any], list[str]], option: bool | Callable[[Any], bool]
) -> Callable[[Any], bool] | None:
    if option is False:
        return None  # the registry's fail-closed default: exclusive
    if option is True:
        return _soft(check, lambda args: True, False)
    if not callable(option):
        raise TypeError("tool(): concurrency_safe must be a bool or a callable over the arguments")
    return _soft(check, option, False)


def _soft(
    check: Callable[[Any], list[str]], fn: Any, invalid: Any = None
) -> Callable[..., Any] | None:
    """Invalid arguments never reach a classifier or presenter (as with ``define_tool``)."""
    if fn is None:
        return None

    def wrapper(args: Any, *rest: Any) -> Any:
        return invalid if check(args) else fn(args, *rest)

    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper


# ---------------------------------------------------------------- docstrings (Google style)

_ARGS_HEADERS = frozenset(
    ("Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments")
)
_HEADER = re.compile(r"^([A-Z][A-Za-z ]*):\s*$")
_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str | None, dict[str, str]]:
    r"""The first paragraph (lines joined by spaces) and the ``Args:`` descriptions.

    Example:
        >>> parse_docstring("Find files.\n\nArgs:\n  glob (str): a pattern,\n    like *.py")
        ('Find files.', {'glob': 'a pattern, like *.py'})
    """
    if not doc:
        return None, {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _HEADER.match(line):
            break
        summary.append(line.strip())
    return (" ".join(summary) or None), _arg_docs(lines)


def _arg_docs(lines: list[str]) -> dict[str, str]:
    docs: dict[str, list[str]] = {}
    section: str | None = None
    entry_indent = 0
    current: list[str] = []
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if not line.strip():
            continue
        if indent == 0:  # a section header, or text that ends the section
            header = _HEADER.match(line)
            section, entry_indent = (header[1] if header else None), 0
            continue
        if section not in _ARGS_HEADERS:
            continue
        entry = _ENTRY.match(line.strip())
        if entry and indent <= (entry_indent or indent):
            entry_indent = indent
            current = docs.setdefault(entry[1], [])
            current.append(entry[2].strip())
        else:
            current.append(line.strip())
    return {key: " ".join(part for part in parts if part) for key, parts in docs.items()}
