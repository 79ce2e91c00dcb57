"""Unions in the enforced subset: when ``anyOf`` / ``type`` arrays can become ``oneOf``.

``oneOf`` rejects a value that matches two branches, so a standard ``anyOf`` becomes
``oneOf`` only when no value can match two of its branches. :func:`disjoint` decides that
conservatively (``False`` when unsure): by JSON type (``integer`` lies inside ``number``), by
``enum`` / ``const`` values (type-aware: ``True`` is not ``1``), or by a required property
whose schemas are disjoint (a tagged union). :func:`drop_covered` first removes a branch
that a bare branch already accepts, so ``integer | number`` is ``number`` and
``Any | None`` is any JSON. Both converters into the subset (a standard JSON Schema and
pydantic's) use these helpers.
"""

from __future__ import annotations

from typing import Any, Final

from ._equality import json_equal

__all__ = (
    "covers",
    "disjoint",
    "drop_covered",
    "json_types",
    "kind_matches",
    "type_literals",
    "widen",
)

_ANNOTATIONS: Final = ("description", "title", "default", "examples")
_SCALAR_TYPE: Final = {bool: "boolean", int: "integer", float: "number", str: "string"}


def type_literals(node: dict[str, Any]) -> None:
    """Give a typeless ``enum`` / ``const`` the type of its values (``oneOf`` when mixed)."""
    values = node.get("enum", [node["const"]] if "const" in node else None)
    if not isinstance(values, list) or not values:
        return
    kinds = [_scalar_type(value) for value in values]
    if None in kinds:
        return
    order = list(dict.fromkeys(kinds))
    if len(order) == 1:
        node["type"] = order[0]
        return
    node.pop("const", None)
    node.pop("enum", None)
    node["oneOf"] = [
        {"type": kind, "enum": [v for v, k in zip(values, kinds, strict=True) if k == kind]}
        for kind in order
    ]


def _scalar_type(value: Any) -> str | None:
    return "null" if value is None else _SCALAR_TYPE.get(type(value))


def kind_matches(kind: str, value: Any) -> bool:
    found = _scalar_type(value)
    return found == kind or (kind == "number" and found == "integer")


def _is_bare(node: Any) -> bool:
    """Only ``type`` and annotations: the node accepts every value of its type (or any)."""
    return isinstance(node, dict) and all(k == "type" or k in _ANNOTATIONS for k in node)


def widen(types: frozenset[str]) -> frozenset[str]:
    """``types`` with ``integer`` added where ``number`` is (a number schema accepts them)."""
    return types | {"integer"} if "number" in types else types


def json_types(node: Any) -> frozenset[str] | None:
    """The JSON types a subset node may accept, or ``None`` when unknown (any)."""
    if not isinstance(node, dict):
        return None
    if isinstance(node.get("type"), str):
        return frozenset((node["type"],))
    if isinstance(node.get("oneOf"), list):
        found: set[str] = set()
        for branch in node["oneOf"]:
            branch_types = json_types(branch)
            if branch_types is None:
                return None
            found |= branch_types
        return frozenset(found)
    return None


def covers(wide: Any, narrow: Any) -> bool:
    """Whether the *bare* branch ``wide`` accepts every value ``narrow`` accepts.

    A bare branch without a ``type`` accepts any JSON value, so it covers every branch.
    """
    if not (_is_bare(wide) and isinstance(narrow, dict)):
        return False
    if "type" not in wide:
        return True
    narrow_types = json_types(narrow)
    return narrow_types is not None and narrow_types <= widen(frozenset((wide["type"],)))


def drop_covered(branches: list[Any]) -> list[Any]:
    """Drop a branch that a bare branch already covers (of two equal ones, keep the first)."""
    kept: list[Any] = []
    for index, branch in enumerate(branches):
        if not any(
            covers(other, branch) and not (covers(branch, other) and other_index > index)
            for other_index, other in enumerate(branches)
            if other_index != index
        ):
            kept.append(branch)
    return kept


def _literals(node: Any) -> list[Any] | None:
    if not isinstance(node, dict):
        return None
    if isinstance(node.get("enum"), list):
        return list(node["enum"])
    return [node["const"]] if "const" in node else None


def disjoint(left: Any, right: Any) -> bool:
    """Whether no value can match both converted schemas (``False`` when unsure)."""
    left_types, right_types = json_types(left), json_types(right)
    if left_types is None or right_types is None:
        return False
    if not widen(left_types) & widen(right_types):
        return True
    left_values, right_values = _literals(left), _literals(right)
    if left_values is not None and right_values is not None:
        return not any(json_equal(a, b) for a in left_values for b in right_values)
    if left_types == right_types == frozenset(("object",)):
        shared = set(left.get("required", ())) & set(right.get("required", ()))
        lp, rp = left.get("properties", {}), right.get("properties", {})
        return any(k in lp and k in rp and disjoint(lp[k], rp[k]) for k in shared)
    return False
