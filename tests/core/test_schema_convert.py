"""R-JS: one converter into the enforced subset, in two dialects (standard and pydantic).

The standard dialect serves ``json_schema_parameters``, the pydantic one ``@tool``; they
share the walk and the union helpers, so a union converts the same way in both.
"""

from __future__ import annotations

from typing import Any

import pytest

from toolray.schema._convert import convert, convert_pydantic
from toolray.schema._unions import covers, disjoint, drop_covered

UNIONS = [
    # (anyOf branches, the converted node)
    ([{"type": "integer"}, {"type": "null"}], {"oneOf": [{"type": "integer"}, {"type": "null"}]}),
    ([{"type": "integer"}, {"type": "number"}], {"type": "number"}),
    ([{}, {"type": "null"}], {}),  # Any | None is any JSON value
    ([{"description": "any"}, {"type": "string"}], {"description": "any"}),
    ([{"type": "string"}, {"type": "string"}], {"type": "string"}),  # equal branches: one
    (
        [{"type": "string", "enum": ["a"]}, {"type": "string", "enum": ["b"]}],
        {"oneOf": [{"type": "string", "enum": ["a"]}, {"type": "string", "enum": ["b"]}]},
    ),
]


@pytest.mark.parametrize(("branches", "expected"), UNIONS)
def test_r_js_a_union_converts_the_same_way_in_both_dialects(
    branches: list[Any], expected: dict[str, Any]
) -> None:
    assert convert({"anyOf": branches}, relax=False) == (expected, [])
    assert convert_pydantic({"anyOf": branches}, {}) == (expected, [])


def test_r_js_overlapping_branches_are_a_violation_in_both_dialects() -> None:
    branches = [
        {"type": "object", "required": ["x"]},
        {"type": "object", "title": "y", "required": []},
    ]
    _, standard = convert({"anyOf": branches}, relax=False)
    _, pydantic = convert_pydantic({"anyOf": branches}, {})
    assert standard == ["schema.anyOf branches 0 and 1 overlap, so it cannot become oneOf"]
    assert pydantic == [
        "schema.anyOf branches 0 and 1 overlap, so it cannot become oneOf"
        " (only unions of disjoint types are supported)"
    ]


def test_r_js_the_pydantic_dialect_keeps_unknown_keywords_for_the_subset_walk() -> None:
    node = {"type": "integer", "minimum": 0, "title": "n"}
    assert convert_pydantic(node, {}) == ({"type": "integer", "minimum": 0, "title": "n"}, [])
    out, violations = convert(node, relax=False)
    assert out == {"type": "integer", "title": "n"}
    assert violations[0].startswith("schema.minimum is a value constraint")


def test_r_js_refs_resolve_in_both_dialects_and_recursion_is_named() -> None:
    defs = {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}}
    ref = {"$ref": "#/$defs/Point", "description": "where"}
    expected = {**defs["Point"], "description": "where"}
    assert convert_pydantic(ref, defs) == (expected, [])
    assert convert({**ref, "$defs": defs}, relax=False)[0] == expected
    loop = {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}}
    _, violations = convert_pydantic({"$ref": "#/$defs/Node"}, loop)
    assert violations == [
        "schema.properties.next.$ref '#/$defs/Node' is recursive and cannot be inlined"
    ]


def test_r_js_disjointness_compares_literals_json_style() -> None:
    # True is not 1, so these enum branches cannot both match a value
    assert disjoint({"type": "boolean", "enum": [True]}, {"type": "integer", "enum": [1]})
    # 1.0 is 1: the two literals are one value
    assert not disjoint({"type": "number", "enum": [1.0]}, {"type": "integer", "enum": [1]})
    # compound literals compare as JSON too
    left = {"type": "object", "enum": [{"a": [1]}]}
    assert not disjoint(left, {"type": "object", "enum": [{"a": [1.0]}]})


def test_r_js_an_untyped_bare_branch_covers_every_branch() -> None:
    assert covers({}, {"type": "string"})
    assert covers({"type": "number"}, {"type": "integer"})
    assert not covers({"type": "integer", "enum": [1]}, {"type": "integer"})
    assert drop_covered([{"type": "integer"}, {}]) == [{}]
