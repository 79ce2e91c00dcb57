"""``@tool``: schemas derived by pydantic, the subset conversion, and calls through the pipeline."""

from __future__ import annotations

import inspect
from enum import Enum
from typing import Annotated, Any, Literal

import cloudpickle
import pytest
from pydantic import BaseModel, ConfigDict, Field, field_validator
from typing_extensions import TypedDict

from toolray import (
    AbortController,
    Placement,
    ToolDefinition,
    ToolExecutionInput,
    ToolRegistry,
    ToolRunContext,
    text_block,
    tool,
)
from toolray._decorator import parse_docstring
from toolray.errors import JsonSchemaError
from toolray.schema import assert_object_json_schema

# ---------------------------------------------------------------- types used by the tools


class Color(Enum):
    RED = "red"
    GREEN = "green"


class Point(BaseModel):
    model_config = ConfigDict(extra="forbid")
    x: int
    y: int = 0


class Tag(BaseModel):
    label: str


class Bag(BaseModel):
    model_config = ConfigDict(extra="allow")
    n: int


class Box(TypedDict):
    w: float
    h: float


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Node(BaseModel):
    children: list[Node] = []


class Positive(BaseModel):
    n: int

    @field_validator("n")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("must be positive")
        return value


class Opaque:
    pass


def _props(definition: ToolDefinition) -> dict[str, Any]:
    return definition.parameters["properties"]


def _has_key(node: Any, key: str) -> bool:
    if isinstance(node, dict):
        return key in node or any(_has_key(value, key) for value in node.values())
    if isinstance(node, list):
        return any(_has_key(value, key) for value in node)
    return False


async def _run(definition: ToolDefinition, arguments: Any) -> Any:
    registry = ToolRegistry()
    registry.register(definition)
    call = ToolExecutionInput("c1", definition.name, arguments, AbortController().signal)
    return await registry.execute(call)


# ---------------------------------------------------------------- parameter schemas


def test_scalars_are_required_in_declaration_order_and_the_root_is_open() -> None:
    @tool
    def f(b: bool, a: int, s: str, x: float) -> None: ...

    assert f.parameters == {
        "type": "object",
        "properties": {
            "b": {"title": "B", "type": "boolean"},
            "a": {"title": "A", "type": "integer"},
            "s": {"title": "S", "type": "string"},
            "x": {"title": "X", "type": "number"},
        },
        "required": ["b", "a", "s", "x"],
    }
    assert_object_json_schema(f.parameters)


def test_no_parameters_gives_an_empty_object_without_required() -> None:
    @tool
    def ping() -> str:
        return "pong"

    assert ping.parameters == {"type": "object", "properties": {}}


def test_optional_becomes_one_of_and_defaults_are_annotations() -> None:
    @tool
    def f(
        a: int | None, b: int | None = None, c: str = "x", d: list[str] | None = None
    ) -> None: ...

    props = _props(f)
    assert props["a"] == {"oneOf": [{"type": "integer"}, {"type": "null"}], "title": "A"}
    assert props["b"]["oneOf"] == [{"type": "integer"}, {"type": "null"}]
    assert props["b"]["default"] is None
    assert props["c"] == {"default": "x", "title": "C", "type": "string"}
    assert props["d"]["oneOf"][0] == {"items": {"type": "string"}, "type": "array"}
    assert f.parameters["required"] == ["a"]


def test_a_default_that_is_not_lossless_json_is_left_out() -> None:
    @tool
    def f(x: float = float("nan"), y: Any = Opaque()) -> None: ...  # noqa: B008

    assert "default" not in _props(f)["x"]
    assert _props(f)["y"] == {"title": "Y"}


def test_lists_and_open_mappings() -> None:
    @tool
    def f(names: list[str], grid: list[list[int]], meta: dict[str, Any], raw: Any) -> None: ...

    props = _props(f)
    assert props["names"] == {"items": {"type": "string"}, "title": "Names", "type": "array"}
    assert props["grid"]["items"] == {"items": {"type": "integer"}, "type": "array"}
    assert props["meta"] == {"additionalProperties": True, "title": "Meta", "type": "object"}
    assert props["raw"] == {"title": "Raw"}


def test_nested_models_stay_closed_or_open_as_pydantic_declares() -> None:
    @tool
    def f(closed: Point, open_: Tag, extra: Bag) -> None: ...

    props = _props(f)
    assert props["closed"] == {
        "additionalProperties": False,
        "properties": {
            "x": {"title": "X", "type": "integer"},
            "y": {"default": 0, "title": "Y", "type": "integer"},
        },
        "required": ["x"],
        "title": "Point",
        "type": "object",
    }
    assert "additionalProperties" not in props["open_"]
    assert props["open_"]["properties"] == {"label": {"title": "Label", "type": "string"}}
    assert props["extra"]["additionalProperties"] is True


def test_typed_dict_is_an_object() -> None:
    @tool
    def f(box: Box) -> None: ...

    assert _props(f)["box"] == {
        "properties": {
            "w": {"title": "W", "type": "number"},
            "h": {"title": "H", "type": "number"},
        },
        "required": ["w", "h"],
        "title": "Box",
        "type": "object",
    }


def test_literals_and_enums_become_enums() -> None:
    @tool
    def f(
        mode: Literal["fast", "slow"],
        one: Literal["only"],
        color: Color,
        mixed: Literal[1, "a", None] = None,
    ) -> None: ...

    props = _props(f)
    assert props["mode"] == {"enum": ["fast", "slow"], "title": "Mode", "type": "string"}
    assert props["one"] == {"const": "only", "title": "One", "type": "string"}
    assert props["color"] == {"enum": ["red", "green"], "title": "Color", "type": "string"}
    assert props["mixed"]["oneOf"] == [
        {"type": "integer", "enum": [1]},
        {"type": "string", "enum": ["a"]},
        {"type": "null", "enum": [None]},
    ]


def test_refs_are_inlined_everywhere_with_the_referring_annotations() -> None:
    @tool
    def f(
        start: Annotated[Point, Field(description="where to start")],
        end: Point | None = None,
        path: list[Point] | None = None,
    ) -> Point:
        return start

    assert not _has_key(f.parameters, "$ref")
    assert not _has_key(f.parameters, "$defs")
    props = _props(f)
    assert props["start"]["description"] == "where to start"
    assert props["start"]["required"] == ["x"]
    assert props["end"]["oneOf"][0]["title"] == "Point"
    assert props["path"]["oneOf"][0]["items"]["additionalProperties"] is False
    assert f.output.schema["title"] == "Point"
    assert not _has_key(f.output.schema, "$ref")


def test_subsumed_and_tagged_unions() -> None:
    @tool
    def f(n: int | float, anything: Any | None, pet: Cat | Dog, maybe: Cat | Dog | None = None):
        """Unions."""

    props = _props(f)
    assert props["n"] == {"title": "N", "type": "number"}
    assert props["anything"] == {"title": "Anything"}
    assert [branch["title"] for branch in props["pet"]["oneOf"]] == ["Cat", "Dog"]
    assert "discriminator" not in props["pet"]
    assert [branch.get("title") for branch in props["maybe"]["oneOf"]] == ["Cat", "Dog", None]


def test_tagged_union_with_discriminator_drops_the_keyword() -> None:
    @tool
    def f(pet: Annotated[Cat | Dog, Field(discriminator="kind")]) -> None: ...

    assert "discriminator" not in _props(f)["pet"]
    assert len(_props(f)["pet"]["oneOf"]) == 2


# ---------------------------------------------------------------- definition-time errors


def _violations(fn: Any) -> tuple[str, ...]:
    with pytest.raises(JsonSchemaError) as caught:
        tool(fn)
    assert caught.value.code == "UNSUPPORTED_SCHEMA"
    return caught.value.violations


def test_a_keyword_outside_the_subset_names_keyword_and_parameter() -> None:
    def f(
        count: Annotated[int, Field(ge=0)], name: Annotated[str, Field(max_length=3)]
    ) -> None: ...

    violations = _violations(f)
    assert len(violations) == 2
    assert violations[0].startswith('parameter "count": schema.minimum is not a supported keyword')
    assert violations[1].startswith('parameter "name": schema.maxLength')


def test_nested_keywords_and_return_types_outside_the_subset() -> None:
    def f(ids: set[int]) -> None: ...

    def g() -> Annotated[str, Field(pattern="^x")]:
        return "x"

    assert _violations(f)[0].startswith('parameter "ids": schema.uniqueItems')
    assert _violations(g)[0].startswith("return value: schema.pattern")


def test_typed_mappings_recursion_and_overlapping_unions_fail() -> None:
    def mapping(counts: dict[str, int]) -> None: ...

    def recursive(tree: Node) -> None: ...

    def overlap(x: Tag | Point) -> None: ...

    def overlap_scalars(x: int | Literal["a"] | str) -> None: ...

    assert (
        'parameter "counts": schema.additionalProperties must be a boolean'
        in (_violations(mapping)[0])
    )
    assert "recursive" in _violations(recursive)[0]
    assert _violations(overlap)[0].startswith(
        'parameter "x": schema.anyOf branches 0 and 1 overlap'
    )
    assert tool(overlap_scalars).parameters["properties"]["x"]["oneOf"] == [
        {"type": "integer"},
        {"type": "string"},
    ]


def test_an_output_schema_option_replaces_the_return_annotation() -> None:
    @tool(output_schema={"type": "string"})
    def f() -> Annotated[str, Field(pattern="^x")]:
        return "x"

    assert f.output.schema == {"type": "string"}
    with pytest.raises(JsonSchemaError):
        tool(output_schema={"type": "string", "format": "uri"})(lambda: "x")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def f(*items: int) -> None: ...", "*args and **kwargs"),
        ("def f(**items: int) -> None: ...", "*args and **kwargs"),
        ("def f(x: int, /) -> None: ...", "positional-only"),
        ("def f(x) -> None: ...", "needs a type annotation"),
        ("def f(ctx: ToolRunContext) -> None: ...", "one keyword-only parameter"),
        ("def f(*, a: ToolRunContext, b: ToolRunContext) -> None: ...", "one keyword-only"),
        ("def f(x: Opaque) -> None: ...", 'pydantic cannot describe parameter "x"'),
        ("def f() -> Opaque: ...", "pydantic cannot describe the return type"),
        ("def f(x: 'Missing') -> None: ...", "cannot resolve the type hints"),
    ],
)
def test_unsupported_signatures_raise_type_error(source: str, message: str) -> None:
    namespace: dict[str, Any] = {"ToolRunContext": ToolRunContext, "Opaque": Opaque}
    exec(source, namespace)
    with pytest.raises(TypeError, match="tool\\(f\\)") as caught:
        tool(namespace["f"])
    assert message in str(caught.value)


def test_bad_options() -> None:
    def f() -> None: ...

    with pytest.raises(TypeError, match="unexpected options: colour"):
        tool(colour="red")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="timeout_ms must be a positive finite number"):
        tool(f, timeout_ms=0)
    with pytest.raises(TypeError, match="concurrency_safe"):
        tool(f, concurrency_safe="yes")  # type: ignore[typeddict-item]


# ---------------------------------------------------------------- names, docstrings, options


def test_docstring_gives_the_description_and_parameter_descriptions() -> None:
    @tool
    def search(query: str, limit: int = 10, lang: Annotated[str, Field(description="own")] = ""):
        """Search the index for documents
        that match a query.

        Results are ranked.

        Args:
            query (str): what to look for,
                in plain words.
            limit: at most this many.
            lang: from the docstring (an explicit Field description wins).

        Returns:
            the hits.
        """

    assert search.name == "search"
    assert search.description == "Search the index for documents that match a query."
    props = _props(search)
    assert props["query"]["description"] == "what to look for, in plain words."
    assert props["limit"]["description"] == "at most this many."
    assert props["lang"]["description"] == "own"


def test_no_docstring_and_explicit_name_and_description() -> None:
    def f(x: int) -> int:
        return x

    plain = tool(f)
    named = tool(f, name="renamed", description="Explicit.")
    assert (plain.name, plain.description) == ("f", None)
    assert (named.name, named.description) == ("renamed", "Explicit.")
    assert "description" not in _props(plain)["x"]


def test_parse_docstring_sections() -> None:
    doc = """Summary line.
    Args:
        a: first.
        *rest: ignored name stars.
    Raises:
        ValueError: not an argument.
    """
    assert parse_docstring(doc) == ("Summary line.", {"a": "first.", "rest": "ignored name stars."})
    assert parse_docstring(None) == (None, {})
    assert parse_docstring("\nArgs:\n    a: x") == (None, {"a": "x"})


def test_host_options_are_passed_through() -> None:
    placement = Placement(num_cpus=2)

    @tool(timeout_ms=250, placement=placement)
    def f() -> None: ...

    assert (f.timeout_ms, f.placement, f.is_concurrency_safe) == (250, placement, None)


def test_concurrency_safe_bool_or_predicate_never_sees_invalid_args() -> None:
    def read(path: str) -> str:
        return path

    always = tool(read, concurrency_safe=True)
    by_args = tool(read, concurrency_safe=lambda args: args["path"].startswith("/tmp"))
    assert always.is_concurrency_safe is not None
    assert by_args.is_concurrency_safe is not None
    assert always.is_concurrency_safe({"path": "x"}) is True
    assert always.is_concurrency_safe({"path": 1}) is False
    assert by_args.is_concurrency_safe({"path": "/tmp/a"}) is True
    assert by_args.is_concurrency_safe({"path": "/etc"}) is False
    assert by_args.is_concurrency_safe({}) is False


# ---------------------------------------------------------------- calls through the registry


async def test_sync_body_receives_converted_arguments() -> None:
    seen: dict[str, Any] = {}

    @tool
    def place(
        where: Point, color: Color, tags: list[Tag], size: Box, n: int = 3, extra: Any = None
    ) -> str:
        seen.update(where=where, color=color, tags=tags, size=size, n=n, extra=extra)
        return f"{where.x},{where.y} {color.value}"

    assert not inspect.iscoroutinefunction(place.execute)
    arguments = {
        "where": {"x": 1},
        "color": "red",
        "tags": [{"label": "a"}],
        "size": {"w": 1, "h": 2.5},
        "extra": {"k": [1]},
    }
    result = await _run(place, arguments)
    assert not result.is_error
    assert result.value == "1,0 red"
    assert result.content == [text_block("1,0 red")]
    assert seen["where"] == Point(x=1, y=0)
    assert seen["color"] is Color.RED
    assert seen["tags"] == [Tag(label="a")]
    assert seen["size"] == {"w": 1.0, "h": 2.5}
    assert isinstance(seen["size"]["w"], float)
    assert seen["n"] == 3
    assert type(seen["extra"]) is dict
    assert type(seen["extra"]["k"]) is list  # fresh plain containers, not frozen snapshots


async def test_async_body_stays_async_and_gets_the_run_context() -> None:
    @tool
    async def lookup(key: str, *, ctx: ToolRunContext) -> dict[str, Any]:
        """Look a key up."""
        return {"key": key, "call": ctx.call_id, "aborted": ctx.signal.aborted}

    assert inspect.iscoroutinefunction(lookup.execute)
    assert list(_props(lookup)) == ["key"]
    result = await _run(lookup, {"key": "k"})
    assert result.value == {"key": "k", "call": "c1", "aborted": False}
    assert result.content == [text_block('{"key": "k", "call": "c1", "aborted": false}')]


async def test_a_model_return_value_is_dumped_to_json_data() -> None:
    @tool
    async def origin(shift: int = 0) -> Point:
        return Point(x=shift)

    result = await _run(origin, {"shift": 2})
    assert result.value == {"x": 2, "y": 0}
    assert result.content == [text_block('{"x": 2, "y": 0}')]


async def test_unannotated_return_is_any_json_and_models_are_still_dumped() -> None:
    @tool
    def f(color: Color):
        return {"color": color, "tag": Tag(label="t")}

    assert f.output.schema == {}
    result = await _run(f, {"color": "green"})
    assert result.value == {"color": "green", "tag": {"label": "t"}}


async def test_custom_render() -> None:
    @tool(render=lambda args, value: [text_block(f"{args['a']} -> {value}")])
    def double(a: int) -> int:
        return a * 2

    result = await _run(double, {"a": 4})
    assert (result.value, result.content) == (8, [text_block("4 -> 8")])


async def test_invalid_args_give_an_invalid_args_result() -> None:
    calls: list[int] = []

    @tool
    def f(a: int, where: Point) -> int:
        calls.append(a)
        return a

    result = await _run(f, {"a": "one", "where": {"x": 1, "z": 2}})
    assert result.is_error
    assert result.error.info.code == "INVALID_ARGS"
    assert result.error.message == (
        'invalid arguments: "a" must be an integer; '
        '"where.z" is not a declared property (additionalProperties: false)'
    )
    missing = await _run(f, {"where": {"x": 1}})
    assert missing.error.info.code == "INVALID_ARGS"
    assert calls == []


async def test_a_pydantic_validator_refusal_is_invalid_args_too() -> None:
    @tool
    def f(p: Positive) -> int:
        return p.n

    assert (await _run(f, {"p": {"n": 2}})).value == 2
    result = await _run(f, {"p": {"n": -1}})
    assert result.error.info.code == "INVALID_ARGS"
    assert result.error.message == 'invalid arguments: "p.n": Value error, must be positive'

    @tool
    def g(ps: list[Positive]) -> int:
        return len(ps)

    result = await _run(g, {"ps": [{"n": 1}, {"n": 0}]})
    assert result.error.message == 'invalid arguments: "ps[1].n": Value error, must be positive'


async def test_a_value_that_breaks_the_return_annotation_is_an_output_error() -> None:
    @tool
    def f() -> int:
        return "not an int"  # type: ignore[return-value]

    result = await _run(f, {})
    assert result.error.info.code == "INVALID_TOOL_OUTPUT"


async def test_parameter_names_that_clash_with_pydantic_still_work() -> None:
    @tool
    def f(json: int, model_config: str = "m", _private: bool = False) -> list[Any]:
        return [json, model_config, _private]

    assert list(_props(f)) == ["json", "model_config", "_private"]
    result = await _run(f, {"json": 1, "_private": True})
    assert result.value == [1, "m", True]


async def test_a_definition_survives_cloudpickle() -> None:
    @tool(concurrency_safe=True)
    def f(where: Point, *, ctx: ToolRunContext) -> Point:
        return where

    copy = cloudpickle.loads(cloudpickle.dumps(f))
    assert copy.parameters == f.parameters
    assert (await _run(copy, {"where": {"x": 5}})).value == {"x": 5, "y": 0}
