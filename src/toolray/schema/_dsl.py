"""The author schema DSL: compile value specs and parameter maps to raw JSON Schema (R-DSL).

Compilation has two stages. *Compile* walks the author spec and stops at the **first**
problem (one violation, paths rooted at ``schema`` or ``parameters``); *assert* then runs
the enforced-subset walk on the result, which collects every violation (paths always
rooted at ``schema``). Both raise :class:`~toolray.errors.JsonSchemaError`.

The compile walk is iterative, visits the spec depth-first in declaration order, and tracks
the specs on the current path only, so 5,000 nested unions compile, a cycle is reported as
``<path> is circular`` and a subtree shared by siblings is fine. Compiled nodes are plain
dicts whose key order is fixed (R-DSL-24):

- object: ``type, description, title, default, examples, additionalProperties, properties,
  required``;
- scalar: ``type, <annotations>, enum, const``; array: ``type, <annotations>, items``;
- union: ``oneOf, <annotations>``; parameter root: ``type, properties, required``.
"""

from __future__ import annotations

from typing import Any, Final, NoReturn

from toolray._json import JsonValue
from toolray.errors import JsonSchemaError

from ._plain import ANNOTATION_KEYWORDS, LazyPath, is_plain_array, is_schema_record
from ._subset import assert_supported_json_schema
from ._validate import validate_json_schema_value

__all__ = (
    "parameter_schema_to_json_schema",
    "validate_args",
    "value_schema_to_json_schema",
)

_SCALARS: Final = ("string", "number", "integer", "boolean", "null")
_KEYS_BY_TYPE: Final = {
    "json": ("type",),
    "object": ("type", "properties", "additionalProperties"),
    "array": ("type", "items"),
    **dict.fromkeys(_SCALARS, ("type", "enum", "const")),
}
_BAD_TYPE: Final = "type must be string/number/integer/boolean/null/array/object/json, or use oneOf"

# Where a compiled node goes: (container, key) -- a dict key or a list index.
_Slot = tuple[Any, Any]
# Tasks: ("value", spec, path, allow_required, slot) | ("map", spec, path, slot, owner)
#        | ("member", spec, path, key, properties, required) | ("map-tail", required, owner)
#        | ("leave", id)
_Task = tuple[Any, ...]
_Path = LazyPath | str


def _fail(message: str) -> NoReturn:
    raise JsonSchemaError([message])


class _Compiler:
    """One run of the compile stage; ``run`` executes tasks until the stack drains."""

    def __init__(self) -> None:
        self.on_path: set[int] = set()
        self.tasks: list[_Task] = []

    def run(self, first: _Task) -> None:
        self.tasks.append(first)
        while self.tasks:
            task = self.tasks.pop()
            kind = task[0]
            if kind == "leave":
                self.on_path.discard(task[1])
            elif kind == "map-tail":
                if task[1]:
                    task[2]["required"] = task[1]
            elif kind == "member":
                self._member(*task[1:])
            elif kind == "map":
                self._map(*task[1:])
            else:
                self._value(*task[1:])

    def _enter(self, spec: Any, path: _Path, not_record: str) -> None:
        if not is_schema_record(spec):
            _fail(f"{path} {not_record}")
        if id(spec) in self.on_path:
            _fail(f"{path} is circular")
        self.on_path.add(id(spec))
        self.tasks.append(("leave", id(spec)))

    def _map(self, spec: Any, path: _Path, slot: _Slot, owner: dict[str, Any]) -> None:
        self._enter(spec, path, "must be an object of value schemas")
        properties: dict[str, Any] = {}
        required: list[str] = []
        slot[0][slot[1]] = properties
        self.tasks.append(("map-tail", required, owner))
        for key, member in reversed(list(spec.items())):
            member_path = LazyPath(path, f".{key}")
            self.tasks.append(("member", member, member_path, key, properties, required))

    def _member(
        self, spec: Any, path: _Path, key: str, properties: dict[str, Any], required: list[str]
    ) -> None:
        if not is_schema_record(spec):
            _fail(f"{path} must be a value schema object")
        if "required" in spec:
            if spec["required"] is not True:
                _fail(f"{path}.required must be true when present")
            required.append(key)
        self.tasks.append(("value", spec, path, True, (properties, key)))

    def _value(self, spec: Any, path: _Path, allow_required: bool, slot: _Slot) -> None:
        self._enter(spec, path, "must be a value schema object")
        node: dict[str, Any] = {}
        slot[0][slot[1]] = node
        author_keys = (*ANNOTATION_KEYWORDS, "required") if allow_required else ANNOTATION_KEYWORDS
        if "oneOf" in spec:
            self._union(spec, path, author_keys, node)
            return
        declared = spec.get("type")
        allowed = _KEYS_BY_TYPE.get(declared) if type(declared) is str else None
        if allowed is None:
            _fail(f"{path}.{_BAD_TYPE}")
        _check_author_keys(spec, path, (*author_keys, *allowed))
        if declared == "json":
            _copy_annotations(spec, node)
        elif declared == "object":
            self._object(spec, path, node)
        elif declared == "array":
            node["type"] = "array"
            _copy_annotations(spec, node)
            if "items" in spec:
                items_path = LazyPath(path, ".items")
                self.tasks.append(("value", spec["items"], items_path, False, (node, "items")))
        else:
            _scalar(spec, path, declared, node)

    def _union(
        self, spec: dict[str, Any], path: _Path, author_keys: tuple[str, ...], node: dict[str, Any]
    ) -> None:
        _check_author_keys(spec, path, (*author_keys, "oneOf", "type"))
        if "type" in spec:
            _fail(f"{path} cannot declare both type and oneOf")
        branches = spec["oneOf"]
        if not is_plain_array(branches):
            _fail(f"{path}.oneOf must be an array of at least two value schemas")
        compiled: list[Any] = [None] * len(branches)
        node["oneOf"] = compiled
        _copy_annotations(spec, node)
        for index in range(len(branches) - 1, -1, -1):
            branch_path = LazyPath(path, f".oneOf[{index}]")
            self.tasks.append(("value", branches[index], branch_path, False, (compiled, index)))

    def _object(self, spec: dict[str, Any], path: _Path, node: dict[str, Any]) -> None:
        if type(spec.get("additionalProperties")) is not bool:
            _fail(f"{path}.additionalProperties must be explicitly true or false")
        node["type"] = "object"
        _copy_annotations(spec, node)
        node["additionalProperties"] = spec["additionalProperties"]
        if "properties" in spec:
            map_path = LazyPath(path, ".properties")
            self.tasks.append(("map", spec["properties"], map_path, (node, "properties"), node))


def _check_author_keys(spec: dict[str, Any], path: _Path, allowed: tuple[str, ...]) -> None:
    for key in spec:
        if key not in allowed:
            _fail(f"{path}.{key} is not supported by the value schema DSL")


def _copy_annotations(spec: dict[str, Any], node: dict[str, Any]) -> None:
    for key in ANNOTATION_KEYWORDS:
        if key in spec:
            node[key] = spec[key]


def _scalar(spec: dict[str, Any], path: _Path, declared: str, node: dict[str, Any]) -> None:
    node["type"] = declared
    _copy_annotations(spec, node)
    if "enum" in spec:
        if not is_plain_array(spec["enum"]):
            _fail(f"{path}.enum must be a non-empty array of scalar values")
        node["enum"] = list(spec["enum"])
    if "const" in spec:
        node["const"] = spec["const"]


def value_schema_to_json_schema(spec: Any) -> dict[str, Any]:
    """Compile a value spec (any JSON root) to a raw schema inside the enforced subset.

    The author-only ``{"type": "json"}`` node becomes an annotation-only schema.

    Raises:
        JsonSchemaError: the first compile problem, or every subset violation.

    Example:
        >>> value_schema_to_json_schema({"type": "array", "items": {"type": "json"}})
        {'type': 'array', 'items': {}}
    """
    holder: dict[str, Any] = {}
    _Compiler().run(("value", spec, "schema", False, (holder, "value")))
    schema: dict[str, Any] = holder["value"]
    assert_supported_json_schema(schema)
    return schema


def parameter_schema_to_json_schema(spec: Any) -> dict[str, Any]:
    """Compile a parameter map to its open object root ``{type, properties, required?}``.

    Members marked ``"required": True`` are collected into ``required`` (declaration order),
    which is present only when non-empty; the root never declares ``additionalProperties``.

    Raises:
        JsonSchemaError: the first compile problem, or every subset violation.

    Example:
        >>> parameter_schema_to_json_schema({"path": {"type": "string", "required": True}})
        {'type': 'object', 'properties': {'path': {'type': 'string'}}, 'required': ['path']}
    """
    holder: dict[str, Any] = {}
    _Compiler().run(("map", spec, "parameters", (holder, "properties"), holder))
    schema: dict[str, Any] = {"type": "object", **holder}
    assert_supported_json_schema(schema)
    return schema


def validate_args(spec: Any, args: JsonValue) -> list[str]:
    """Validate tool arguments against a parameter map (compiled on every call).

    The root label is ``''``: the root reads ``arguments`` and member paths have no prefix.

    Raises:
        JsonSchemaError: when ``spec`` itself is bad (the function is total over ``args``).

    Example:
        >>> validate_args({"path": {"type": "string", "required": True}}, {})
        ['missing required property "path"']
    """
    return validate_json_schema_value(parameter_schema_to_json_schema(spec), args, "")
