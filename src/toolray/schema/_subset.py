"""The enforced JSON-Schema subset: ``assert_supported_json_schema`` and friends (R-JS).

The walk collects *every* violation, in walk order, with paths rooted at ``schema``:

1. per node: unknown keywords and non-lossless annotations (in key order), then
   ``description`` / ``title`` that are not strings;
2. ``type`` beside ``oneOf`` stops the node; neither of them makes any constraint keyword a
   violation (fixed order ``properties, required, additionalProperties, items, enum,
   const``);
3. a ``oneOf`` node: its branches, then the keywords that may not stand beside it;
4. a typed node: a bad ``type`` stops it; misplaced keywords; then the type's own checks
   (an object's property subtrees, then its ``required``, then ``additionalProperties``).

The walk is iterative (an explicit task stack), so 5,000 nested unions are fine, and it
tracks the nodes on the current path only: a cycle is ``<path> is circular``, a subtree
shared by siblings is fine.
"""

from __future__ import annotations

from typing import Any, Final

from toolray.errors import JsonSchemaError

from ._equality import json_equal
from ._plain import (
    ANNOTATION_KEYWORDS,
    SCALAR_TYPES,
    SCHEMA_TYPES,
    LazyPath,
    is_lossless,
    is_plain_array,
    is_schema_record,
    scalar_matches,
)

__all__ = (
    "assert_object_json_schema",
    "assert_supported_json_schema",
    "schema_violations",
)

_CONSTRAINTS: Final = frozenset(
    ("type", "oneOf", "properties", "required", "additionalProperties", "items", "enum", "const")
)
_ANNOTATIONS: Final = frozenset(ANNOTATION_KEYWORDS)
_SIBLINGS: Final = ("properties", "required", "additionalProperties", "items", "enum", "const")
_ALLOWED_FOR: Final = (
    ("properties", ("object",)),
    ("required", ("object",)),
    ("additionalProperties", ("object",)),
    ("items", ("array",)),
    ("enum", SCALAR_TYPES),
    ("const", SCALAR_TYPES),
)
_UNSUPPORTED: Final = (
    " is not a supported keyword"
    " (subset: type/oneOf/properties/required/additionalProperties/items/enum/const + annotations)"
)
_TYPE_LIST: Final = "/".join(SCHEMA_TYPES)
_OBJECT_ROOT: Final = 'schema.type must be "object" (structured output is object-rooted)'

# Tasks: ("enter", node, path) | ("leave", id) | ("one-of-tail", node, path)
#        | ("object-tail", node, path)
_Task = tuple[Any, ...]
_Path = LazyPath | str


def schema_violations(schema: Any) -> list[str]:
    """Every violation of the enforced subset in ``schema``, in walk order (``[]`` if none)."""
    violations: list[str] = []
    on_path: set[int] = set()
    tasks: list[_Task] = [("enter", schema, "schema")]
    while tasks:
        task = tasks.pop()
        kind = task[0]
        if kind == "leave":
            on_path.discard(task[1])
        elif kind == "one-of-tail":
            node, path = task[1], task[2]
            violations.extend(
                f"{path}.{key} is not supported beside oneOf" for key in _SIBLINGS if key in node
            )
        elif kind == "object-tail":
            _check_object_tail(task[1], task[2], violations)
        else:
            _enter(task[1], task[2], violations, on_path, tasks)
    return violations


def _enter(node: Any, path: _Path, out: list[str], on_path: set[int], tasks: list[_Task]) -> None:
    if not is_schema_record(node):
        out.append(f"{path} must be a schema object")
        return
    if id(node) in on_path:
        out.append(f"{path} is circular")
        return
    on_path.add(id(node))
    tasks.append(("leave", id(node)))
    _check_keywords(node, path, out)
    has_type = "type" in node
    has_one_of = "oneOf" in node
    if has_type and has_one_of:
        out.append(f"{path} cannot declare both type and oneOf")
    elif not has_type and not has_one_of:
        out.extend(f"{path}.{key} requires type or oneOf" for key in _SIBLINGS if key in node)
    elif has_one_of:
        _enter_one_of(node, path, out, tasks)
    else:
        _enter_typed(node, path, out, tasks)


def _check_keywords(node: dict[str, Any], path: _Path, out: list[str]) -> None:
    for key, value in node.items():
        if key in _CONSTRAINTS:
            continue
        if key in _ANNOTATIONS:
            if not is_lossless(value):
                out.append(f"{path}.{key} annotation must be lossless JSON data")
            continue
        out.append(f"{path}.{key}{_UNSUPPORTED}")
    if "description" in node and type(node["description"]) is not str:
        out.append(f"{path}.description must be a string")
    if "title" in node and type(node["title"]) is not str:
        out.append(f"{path}.title must be a string")


def _enter_one_of(node: dict[str, Any], path: _Path, out: list[str], tasks: list[_Task]) -> None:
    branches = node["oneOf"]
    tasks.append(("one-of-tail", node, path))
    if not is_plain_array(branches) or len(branches) < 2:
        out.append(f"{path}.oneOf must be an array of at least two schemas")
        return
    tasks.extend(
        ("enter", branches[index], LazyPath(path, f".oneOf[{index}]"))
        for index in range(len(branches) - 1, -1, -1)
    )


def _enter_typed(node: dict[str, Any], path: _Path, out: list[str], tasks: list[_Task]) -> None:
    declared = node["type"]
    if not isinstance(declared, str) or declared not in SCHEMA_TYPES:
        if isinstance(declared, list | tuple):
            out.append(f"{path}.type must be a single type string (type arrays are not supported)")
        else:
            out.append(f"{path}.type must be one of {_TYPE_LIST}")
        return
    for key, types in _ALLOWED_FOR:
        if key in node and declared not in types:
            out.append(f'{path}.{key} is not supported on type "{declared}"')
    if declared == "object":
        tasks.append(("object-tail", node, path))
        if "properties" in node:
            properties = node["properties"]
            if not is_schema_record(properties):
                out.append(f"{path}.properties must be an object of schemas")
            else:
                for key, child in reversed(list(properties.items())):
                    tasks.append(("enter", child, LazyPath(path, f".properties.{key}")))
    elif declared == "array":
        if "items" in node:
            tasks.append(("enter", node["items"], LazyPath(path, ".items")))
    else:
        _check_literals(node, path, declared, out)


def _check_literals(node: dict[str, Any], path: _Path, declared: str, out: list[str]) -> None:
    allowed: Any = node.get("enum")
    enum_valid = (
        is_plain_array(allowed)
        and len(allowed) > 0
        and all(scalar_matches(declared, entry) for entry in allowed)
    )
    if "enum" in node and not enum_valid:
        out.append(f"{path}.enum must be a non-empty array of {declared} values")
    if "const" in node:
        const = node["const"]
        if not scalar_matches(declared, const):
            out.append(f"{path}.const must be a {declared} value")
        elif enum_valid and not any(json_equal(entry, const) for entry in allowed):
            out.append(f"{path}.const must be one of {path}.enum when both are declared")


def _check_object_tail(node: dict[str, Any], path: _Path, out: list[str]) -> None:
    if "required" in node:
        required = node["required"]
        if not is_plain_array(required) or any(type(entry) is not str for entry in required):
            out.append(f"{path}.required must be an array of strings")
        else:
            properties: Any = node.get("properties")
            declared = properties if is_schema_record(properties) else {}
            out.extend(
                f'{path}.required names "{key}" which is not in properties'
                for key in required
                if key not in declared
            )
    if "additionalProperties" in node and type(node["additionalProperties"]) is not bool:
        out.append(f"{path}.additionalProperties must be a boolean")


def assert_supported_json_schema(schema: Any) -> None:
    """Raise unless ``schema`` lies inside the enforced JSON-Schema subset.

    Raises:
        JsonSchemaError: with every violation, in walk order.

    Example:
        >>> assert_supported_json_schema({"type": "string", "enum": ["a"]})
        >>> try:
        ...     assert_supported_json_schema({"type": "string", "pattern": "x"})
        ... except JsonSchemaError as err:
        ...     print(err.violations[0][:38])
        schema.pattern is not a supported keyw
    """
    violations = schema_violations(schema)
    if violations:
        raise JsonSchemaError(violations)


def assert_object_json_schema(schema: Any) -> None:
    """Like :func:`assert_supported_json_schema`, and the root must declare ``type: object``.

    The object-root check is made only when the subset walk found nothing else.

    Raises:
        JsonSchemaError: with every violation.
    """
    violations = schema_violations(schema)
    if not violations and not (
        is_schema_record(schema) and "type" in schema and schema["type"] == "object"
    ):
        violations.append(_OBJECT_ROOT)
    if violations:
        raise JsonSchemaError(violations)
