"""Hypothesis properties of the schema layer.

- R-DSL-26: any generated well-formed DSL spec compiles (value roots and parameter maps), and
  ``required`` equals the ``required: true`` members at every level (R-DSL-06).
- R-DSL-38: arguments generated to satisfy a spec validate to ``[]``; dropping a required key
  always yields a violation containing ``"<key>"``; a non-object top level is always
  rejected.
- R-VAL-28 and the compiled validator: for generated asserted schemas and values (valid ones,
  JSON ones and non-JSON ones), ``compile_validator(s)(v) == validate_json_schema_value(s, v)``
  and neither raises.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolray._json import snapshot_json
from toolray.schema import (
    assert_supported_json_schema,
    compile_validator,
    parameter_schema_to_json_schema,
    validate_args,
    validate_json_schema_value,
    value_schema_to_json_schema,
)

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAMES = st.sampled_from(["a", "b", "c", "path", "x y", "", "é", "__proto__", "q\"'\\"])
SCALAR_TYPES = ["string", "number", "integer", "boolean", "null"]


class MyList(list[Any]):
    pass


class MyDict(dict[str, Any]):
    pass


class MyStr(str):
    __slots__ = ()


def _not_negative_zero(x: float) -> bool:
    return not (x == 0.0 and math.copysign(1.0, x) < 0.0)


FINITE = st.floats(allow_nan=False, allow_infinity=False).filter(_not_negative_zero)
SCALAR_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "string": st.text(max_size=4),
    "number": st.one_of(st.integers(-(10**20), 10**20), FINITE),
    "integer": st.one_of(
        st.integers(-(10**20), 10**20),
        st.integers(-1000, 1000).map(float).filter(_not_negative_zero),
    ),
    "boolean": st.booleans(),
    "null": st.none(),
}
JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), FINITE, st.text(max_size=4)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def annotations(draw: st.DrawFn) -> dict[str, Any]:
    notes: dict[str, Any] = {}
    if draw(st.booleans()):
        notes["description"] = draw(st.text(max_size=5))
    if draw(st.integers(0, 4)) == 0:
        notes["default"] = draw(JSON)
    return notes


@st.composite
def scalar_specs(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(SCALAR_TYPES))
    values = SCALAR_VALUES[kind]
    spec: dict[str, Any] = {"type": kind, **draw(annotations())}
    if draw(st.booleans()):
        spec["enum"] = draw(st.lists(values, min_size=1, max_size=4))
        if draw(st.booleans()):
            spec["const"] = draw(st.sampled_from(spec["enum"]))
    elif draw(st.booleans()):
        spec["const"] = draw(values)
    return spec


def _kind(spec: dict[str, Any]) -> str | None:
    """The disjoint value kind of a spec (``None`` for json and unions, which overlap)."""
    declared = spec.get("type")
    if declared in ("number", "integer"):
        return "numeric"
    return None if declared in (None, "json") else str(declared)


def _member(pair: tuple[dict[str, Any], bool]) -> dict[str, Any]:
    spec, required = pair
    return {**spec, "required": True} if required else spec


def parameter_maps(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    return st.dictionaries(NAMES, st.tuples(children, st.booleans()).map(_member), max_size=4)


def _extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    arrays = st.one_of(
        st.just({"type": "array"}), children.map(lambda items: {"type": "array", "items": items})
    )
    objects = st.builds(
        lambda open_, props, has: {
            "type": "object",
            "additionalProperties": open_,
            **({"properties": props} if has else {}),
        },
        st.booleans(),
        parameter_maps(children),
        st.booleans(),
    )
    unions = st.lists(
        children.filter(lambda s: _kind(s) is not None), min_size=2, max_size=3, unique_by=_kind
    ).map(lambda branches: {"oneOf": branches})
    return st.one_of(arrays, objects, unions)


JSON_SPECS = annotations().map(lambda notes: {"type": "json", **notes})
VALUE_SPECS = st.recursive(st.one_of(scalar_specs(), JSON_SPECS), _extend, max_leaves=8)
PARAMETER_SPECS = parameter_maps(VALUE_SPECS)


def values_for(spec: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values that satisfy a (disjoint-union) DSL spec."""
    if "oneOf" in spec:
        return st.one_of([values_for(branch) for branch in spec["oneOf"]])
    declared = spec["type"]
    if declared == "json":
        return JSON
    if declared == "array":
        items = values_for(spec["items"]) if "items" in spec else JSON
        return st.lists(items, max_size=3)
    if declared == "object":
        return args_for(spec.get("properties", {}), open_=spec["additionalProperties"])
    if "const" in spec:
        return st.just(spec["const"])
    if "enum" in spec:
        return st.sampled_from(spec["enum"])
    return SCALAR_VALUES[declared]


def args_for(members: dict[str, Any], *, open_: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    required = {k: values_for(m) for k, m in members.items() if m.get("required") is True}
    optional = {k: values_for(m) for k, m in members.items() if m.get("required") is not True}
    base = st.fixed_dictionaries(required, optional=optional)
    if not open_:
        return base
    extra = st.dictionaries(
        st.text(max_size=3).filter(lambda k: k not in members), JSON, max_size=2
    )
    return st.tuples(base, extra).map(lambda pair: {**pair[1], **pair[0]})


def _required_members(spec: dict[str, Any]) -> list[str]:
    return [key for key, member in spec.items() if member.get("required") is True]


def _check_required(members: dict[str, Any], compiled: dict[str, Any]) -> None:
    assert compiled.get("required", []) == _required_members(members)
    assert "required" not in compiled or compiled["required"]
    for key, member in members.items():
        if member.get("type") == "object" and "properties" in member:
            _check_required(member["properties"], compiled["properties"][key])


@SETTINGS
@given(VALUE_SPECS, PARAMETER_SPECS)
def test_r_dsl_26_well_formed_specs_compile(value_spec: Any, parameter_spec: Any) -> None:
    value_schema_to_json_schema(value_spec)
    compiled = parameter_schema_to_json_schema(parameter_spec)
    assert list(compiled) == [
        "type",
        "properties",
        *(["required"] if "required" in compiled else []),
    ]
    _check_required(parameter_spec, compiled)


@SETTINGS
@given(st.data(), PARAMETER_SPECS)
def test_r_dsl_38_satisfying_args_validate(data: st.DataObject, spec: Any) -> None:
    args = data.draw(args_for(spec))
    assert validate_args(spec, args) == []
    assert compile_validator(parameter_schema_to_json_schema(spec), "")(args) == []


@SETTINGS
@given(st.data(), PARAMETER_SPECS, NAMES, VALUE_SPECS)
def test_r_dsl_38_dropping_a_required_key_is_rejected(
    data: st.DataObject, spec: Any, name: str, member: Any
) -> None:
    spec = {**spec, name: {**member, "required": True}}
    victim = data.draw(st.sampled_from(_required_members(spec)))
    args = data.draw(args_for(spec))
    del args[victim]
    violations = validate_args(spec, args)
    assert any(f'"{victim}"' in violation for violation in violations)


@SETTINGS
@given(
    PARAMETER_SPECS,
    st.one_of(st.text(), st.integers(), st.booleans(), st.none(), FINITE, st.lists(JSON)),
)
def test_r_dsl_38_non_object_top_level_is_rejected(spec: Any, args: Any) -> None:
    assert validate_args(spec, args) == ['"arguments" must be an object']


# ---------------------------------------------------------------- compiled == interpreted


@st.composite
def raw_scalars(draw: st.DrawFn) -> dict[str, Any]:
    spec = draw(scalar_specs())
    spec.pop("description", None)
    return spec


def _raw_extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    @st.composite
    def objects(draw: st.DrawFn) -> dict[str, Any]:
        props = draw(st.dictionaries(NAMES, children, max_size=4))
        node: dict[str, Any] = {"type": "object"}
        if props or draw(st.booleans()):
            node["properties"] = props
        if props and draw(st.booleans()):
            node["required"] = draw(st.lists(st.sampled_from(sorted(props)), max_size=3))
        flag = draw(st.sampled_from([None, True, False]))
        if flag is not None:
            node["additionalProperties"] = flag
        return node

    arrays = st.one_of(
        st.just({"type": "array"}), children.map(lambda items: {"type": "array", "items": items})
    )
    unions = st.lists(children, min_size=2, max_size=3).map(lambda branches: {"oneOf": branches})
    return st.one_of(objects(), arrays, unions)


RAW_SCHEMAS = st.recursive(st.one_of(raw_scalars(), annotations()), _raw_extend, max_leaves=10)
ODD_LEAVES = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, -0.0, True, 2**80, 1.0, (1,), b"x", None]),
    st.builds(set),
    st.integers(-3, 3),
    NAMES,
)


def _odd_containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=2).map(MyList),
        st.lists(inner, max_size=2).map(tuple),
        st.dictionaries(NAMES, inner, max_size=3),
        st.dictionaries(NAMES, inner, max_size=2).map(MyDict),
        st.dictionaries(st.one_of(NAMES, NAMES.map(MyStr), st.integers(0, 2)), inner, max_size=2),
    )


ODD_VALUES = st.recursive(ODD_LEAVES, _odd_containers, max_leaves=10)


def raw_values_for(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values shaped like ``schema`` (valid or nearly so), with odd values mixed in."""
    if "oneOf" in schema:
        return st.one_of([raw_values_for(branch) for branch in schema["oneOf"]])
    declared = schema.get("type")
    if declared is None:
        return st.one_of(JSON, ODD_VALUES)
    if declared == "array":
        items = raw_values_for(schema["items"]) if "items" in schema else JSON
        return st.lists(st.one_of(items, ODD_LEAVES), max_size=3)
    if declared == "object":
        props = schema.get("properties", {})
        shaped = st.fixed_dictionaries(
            {}, optional={k: raw_values_for(v) for k, v in props.items()}
        )
        odd_keys = st.one_of(NAMES, NAMES.map(MyStr))
        extra = st.dictionaries(odd_keys, st.one_of(JSON, ODD_LEAVES), max_size=2)
        return st.tuples(shaped, extra).map(lambda pair: {**pair[1], **pair[0]})
    if "enum" in schema:
        return st.one_of(st.sampled_from(schema["enum"]), SCALAR_VALUES[declared], ODD_LEAVES)
    return st.one_of(SCALAR_VALUES[declared], ODD_LEAVES)


def _frozen(value: Any) -> Any:
    try:
        return snapshot_json(value)
    except Exception:
        return value


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), RAW_SCHEMAS, st.sampled_from(["value", "", "out"]))
def test_compiled_validator_matches_the_interpreter(
    data: st.DataObject, schema: dict[str, Any], label: str
) -> None:
    assert_supported_json_schema(schema)
    check = compile_validator(schema, label)
    for _ in range(3):
        value = data.draw(st.one_of(raw_values_for(schema), ODD_VALUES, JSON))
        if data.draw(st.booleans()):
            value = _frozen(value)
        expected = validate_json_schema_value(schema, value, label)
        assert isinstance(expected, list)
        assert check(value) == expected
