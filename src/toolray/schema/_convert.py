"""A JSON Schema converted into the enforced subset: standard schemas and pydantic's.

The registry enforces a small subset of JSON Schema (``type/oneOf/properties/required/
additionalProperties/items/enum/const`` plus the annotations ``description/title/default/
examples``). :func:`convert` rewrites the common spellings of a standard schema into it
without changing what the schema accepts:

- local ``$ref`` (``#/$defs/X``, ``#/definitions/X``) is inlined, the referring node's own
  keywords laid over the target; a single-schema ``allOf`` is merged likewise;
- ``anyOf`` and ``type: [...]`` become ``oneOf`` when their branches are provably disjoint
  (a bare branch that covers another absorbs it, so ``integer | number`` is ``number``);
- ``enum`` / ``const`` without a ``type`` get the type of their values; ``properties`` /
  ``items`` without a ``type`` imply ``object`` / ``array``; a ``required`` name without a
  property schema gets ``{}`` (any value);
- metadata and unknown keywords (``$schema``, ``$id``, ``$comment``, ``deprecated``,
  ``readOnly``, ``x-…``) carry no constraint and are dropped.

What cannot be mapped is reported, one violation per place, rooted at ``schema``:

- *value constraints* the subset cannot check (``minimum``, ``maxLength``, ``pattern``,
  ``format``, ``minItems``, a typed ``additionalProperties``…). With ``relax=True`` they are
  dropped instead and listed in the node's ``description``, so the model still reads them
  (the tool, or the MCP server behind it, must enforce them itself);
- *structural* keywords with no equivalent (``not``, ``if/then/else``, ``patternProperties``,
  ``prefixItems``, a several-schema ``allOf``, an ``anyOf`` whose branches overlap, a remote
  or recursive ``$ref``…) are violations in both modes.

:func:`convert_pydantic` is the same walk for the schemas pydantic writes (the ``@tool``
side): there a keyword outside the subset is kept, for the subset walk to report it by name
(``schema.minimum is not a supported keyword``), a branch of a converted ``anyOf`` is named
by its place in the resulting ``oneOf``, and ``discriminator`` beside ``oneOf`` is dropped
(the branches' ``const`` tags already make them disjoint).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from itertools import combinations
from typing import Any, Final

from ._unions import disjoint, drop_covered, kind_matches, type_literals

__all__ = ("convert", "convert_pydantic")

_ANNOTATIONS: Final = ("description", "title", "default", "examples")
_CONSTRAINTS: Final = frozenset(
    ("type", "oneOf", "properties", "required", "additionalProperties", "items", "enum", "const")
)
_VALUE_CONSTRAINTS: Final = frozenset(
    (
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
        "minLength", "maxLength", "pattern", "format", "contentEncoding", "contentMediaType",
        "minItems", "maxItems", "uniqueItems", "minContains", "maxContains",
        "minProperties", "maxProperties",
    )
)  # fmt: skip
_STRUCTURAL: Final = frozenset(
    (
        "not", "if", "then", "else", "patternProperties", "propertyNames", "dependentRequired",
        "dependentSchemas", "dependencies", "prefixItems", "contains", "additionalItems",
        "unevaluatedProperties", "unevaluatedItems", "contentSchema", "$dynamicRef",
        "$recursiveRef",
    )
)  # fmt: skip
_REF_PREFIXES: Final = ("#/$defs/", "#/definitions/")
_OVERLAP: Final = " (only unions of disjoint types are supported)"
_TYPED_MAP: Final = (
    " must be a boolean: a typed map is a value constraint the subset cannot check"
    " (relax=True allows any value and notes it in the description)"
)
_TYPED_MAPPING: Final = (
    " must be a boolean: a typed mapping (dict[str, X]) is outside the subset;"
    " use dict[str, Any] or a model"
)


def convert(schema: Mapping[str, Any], *, relax: bool) -> tuple[dict[str, Any], list[str]]:
    """Convert ``schema`` into the subset; returns the result and every violation found.

    Example:
        >>> convert({"type": ["string", "null"], "maxLength": 3}, relax=True)
        ({'oneOf': [{'type': 'string'}, {'type': 'null'}], 'description': '(maxLength: 3)'}, [])
    """
    return _Converter(schema, relax=relax).run(schema)


def convert_pydantic(schema: Any, defs: Mapping[str, Any]) -> tuple[Any, list[str]]:
    """Convert one node of a pydantic JSON Schema (``$ref`` resolved against ``defs``).

    Example:
        >>> convert_pydantic({"anyOf": [{"type": "integer"}, {"type": "null"}]}, {})
        ({'oneOf': [{'type': 'integer'}, {'type': 'null'}]}, [])
    """
    return _Converter({"$defs": defs}, relax=False, pydantic=True).run(schema)


class _Converter:
    """One walk over a schema; ``pydantic`` selects that dialect (see the module docstring)."""

    def __init__(self, root: Mapping[str, Any], *, relax: bool, pydantic: bool = False) -> None:
        self.root = root
        self.relax = relax
        self.pydantic = pydantic
        self.violations: list[str] = []
        self._expanding: list[str] = []

    def run(self, schema: Any) -> tuple[Any, list[str]]:
        try:
            out = self.node(schema, "schema")
        except RecursionError:
            return {}, ["schema is nested too deeply to convert"]
        return out, self.violations

    def node(self, node: Any, path: str) -> Any:
        if not isinstance(node, Mapping) and self.pydantic:
            return node  # the subset walk reports it
        if node is True:
            return {}
        if not isinstance(node, Mapping):
            self.violations.append(f"{path} must be a schema object")
            return {}
        if "$ref" in node:
            return self._inline(node, path)
        if "allOf" in node:
            return self._all_of(node, path)
        out: dict[str, Any] = {}
        notes: list[str] = []
        for key, value in node.items():
            self._keyword(out, notes, key, value, path)
        if self.pydantic and "oneOf" in out:
            out.pop("discriminator", None)
        if "anyOf" in node:
            out = self._any_of(node["anyOf"], out, path)
        if isinstance(out.get("type"), list):
            out = self._type_list(out, path)
        if isinstance(out.get("oneOf"), list) and len(out["oneOf"]) == 1:
            out = {**out.pop("oneOf")[0], **out}
        _infer_type(out)
        if notes:
            text = f"({'; '.join(notes)})"
            description = out.get("description")
            out["description"] = f"{description} {text}" if isinstance(description, str) else text
        return out

    def _keyword(
        self, out: dict[str, Any], notes: list[str], key: str, value: Any, path: str
    ) -> None:
        where = f"{path}.{key}"
        if key in _ANNOTATIONS:
            if _is_json(value):
                out[key] = _plain(value)
        elif key == "properties":
            self._properties(out, value, where)
        elif key == "items":
            self._items(out, value, where)
        elif key == "additionalProperties":
            self._additional(out, notes, value, where)
        elif key == "oneOf":
            out[key] = self._branches(value, where)
        elif key in _CONSTRAINTS:
            out[key] = _plain(value)
        elif key in ("anyOf", "allOf", "$ref", "$defs"):
            pass  # handled by the walk
        elif self.pydantic:
            out[key] = value  # kept: the subset walk names it
        elif key in _VALUE_CONSTRAINTS:
            self._value_constraint(notes, key, value, where)
        elif key in _STRUCTURAL:
            self.violations.append(f"{where} is not supported (the subset has no equivalent)")
        # anything else ($schema, $id, $comment, deprecated, x-…) constrains nothing

    def _value_constraint(self, notes: list[str], key: str, value: Any, where: str) -> None:
        if self.relax:
            notes.append(f"{key}: {json.dumps(value, default=str)}")
        else:
            self.violations.append(
                f"{where} is a value constraint the subset cannot check"
                " (relax=True drops it and notes it in the description)"
            )

    def _properties(self, out: dict[str, Any], value: Any, where: str) -> None:
        if not isinstance(value, Mapping):
            self.violations.append(f"{where} must be an object of schemas")
            return
        out["properties"] = {k: self.node(v, f"{where}.{k}") for k, v in value.items()}

    def _items(self, out: dict[str, Any], value: Any, where: str) -> None:
        if isinstance(value, list | tuple):
            self.violations.append(f"{where} as an array (tuple validation) is not supported")
        elif value is not True:
            out["items"] = self.node(value, where)

    def _additional(self, out: dict[str, Any], notes: list[str], value: Any, where: str) -> None:
        if isinstance(value, bool) or (isinstance(value, Mapping) and _is_any(value)):
            out["additionalProperties"] = value if isinstance(value, bool) else True
        elif self.relax:
            out["additionalProperties"] = True
            notes.append(f"additionalProperties: {json.dumps(_plain(value), default=str)}")
        else:
            self.violations.append(where + (_TYPED_MAPPING if self.pydantic else _TYPED_MAP))

    def _branches(self, value: Any, where: str, named: str | None = None) -> list[Any]:
        """Each branch converted; ``named``: the path its branches are reported under."""
        if not isinstance(value, list | tuple) or not value:
            self.violations.append(f"{where} must be a non-empty array of schemas")
            return []
        at = named or where
        return [self.node(branch, f"{at}[{i}]") for i, branch in enumerate(value)]

    def _inline(self, node: Mapping[str, Any], path: str) -> Any:
        ref = node["$ref"]
        target = _resolve(self.root, ref)
        if target is None:
            self.violations.append(
                f"{path}.$ref {ref!r} is not a local reference (#/$defs/… or #/definitions/…)"
            )
            return {}
        if ref in self._expanding:
            self.violations.append(f"{path}.$ref {ref!r} is recursive and cannot be inlined")
            return {}
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        self._expanding.append(ref)
        try:
            return self.node({**target, **siblings}, path)
        finally:
            self._expanding.pop()

    def _all_of(self, node: Mapping[str, Any], path: str) -> Any:
        branches = node["allOf"]
        rest = {key: value for key, value in node.items() if key != "allOf"}
        if isinstance(branches, list | tuple) and len(branches) == 1:
            first = branches[0] if isinstance(branches[0], Mapping) else {}
            return self.node({**first, **rest}, path)
        self.violations.append(f"{path}.allOf with several schemas is not supported")
        return self.node(rest, path)

    def _any_of(self, raw: Any, out: dict[str, Any], path: str) -> dict[str, Any]:
        named = f"{path}.oneOf" if self.pydantic else None
        branches = drop_covered(self._branches(raw, f"{path}.anyOf", named))
        if len(branches) == 1:
            return {**branches[0], **out}
        for (i, left), (j, right) in combinations(enumerate(branches), 2):
            if not disjoint(left, right):
                self.violations.append(
                    f"{path}.anyOf branches {i} and {j} overlap, so it cannot become oneOf"
                    + (_OVERLAP if self.pydantic else "")
                )
                break
        if branches:
            out["oneOf"] = branches
        return out

    def _type_list(self, out: dict[str, Any], path: str) -> dict[str, Any]:
        """``type: [a, b]`` as one ``oneOf`` branch per type, each with its own keywords."""
        types = list(dict.fromkeys(out.pop("type")))
        if len(types) == 1:
            out["type"] = types[0]
            return out
        shared: dict[str, Any] = {key: out.pop(key) for key in _ANNOTATIONS if key in out}
        branches = drop_covered([_branch_for(kind, out) for kind in types])
        if len(branches) == 1:
            return {**branches[0], **shared}
        for (i, left), (j, right) in combinations(enumerate(branches), 2):
            if not disjoint(left, right):
                self.violations.append(f"{path}.type entries {i} and {j} overlap")
        return {"oneOf": branches, **shared}


def _branch_for(kind: Any, node: dict[str, Any]) -> dict[str, Any]:
    keep = {
        "object": ("properties", "required", "additionalProperties"),
        "array": ("items",),
    }.get(kind, ("enum", "const") if kind in ("string", "number", "integer", "boolean") else ())
    branch = {"type": kind, **{key: node[key] for key in keep if key in node}}
    if "enum" in branch:
        branch["enum"] = [v for v in branch["enum"] if kind_matches(kind, v)]
    return branch


def _resolve(root: Mapping[str, Any], ref: Any) -> Mapping[str, Any] | None:
    if not isinstance(ref, str):
        return None
    for prefix in _REF_PREFIXES:
        if ref.startswith(prefix):
            table = root.get(prefix[2:-1])
            target = table.get(ref[len(prefix) :]) if isinstance(table, Mapping) else None
            return target if isinstance(target, Mapping) else None
    return None


def _infer_type(node: dict[str, Any]) -> None:
    if "type" in node or "oneOf" in node:
        pass
    elif any(key in node for key in ("properties", "required", "additionalProperties")):
        node["type"] = "object"
    elif "items" in node:
        node["type"] = "array"
    else:
        type_literals(node)
    required = node.get("required")
    if node.get("type") == "object" and isinstance(required, list):
        properties = node.setdefault("properties", {})
        for name in required:
            if isinstance(name, str) and name not in properties:
                properties[name] = {}


def _is_any(node: Mapping[str, Any]) -> bool:
    return all(key in _ANNOTATIONS for key in node)


def _plain(value: Any) -> Any:
    """A detached plain copy (mappings as ``dict``, sequences as ``list``)."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True
