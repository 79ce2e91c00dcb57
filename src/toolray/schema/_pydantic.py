"""pydantic's JSON Schema, converted into the enforced subset (the ``@tool`` side of R-JS).

pydantic describes a type with the full JSON-Schema vocabulary; the registry enforces a
small subset (``type/oneOf/properties/required/additionalProperties/items/enum/const`` plus
the annotations ``description/title/default/examples``). :func:`to_subset` bridges the two
without changing what a schema accepts:

- local ``$ref`` / ``$defs`` are inlined, with the referring node's own keywords (pydantic
  puts a field's ``description`` or ``default`` beside the ``$ref``) laid over the target;
  a single-branch ``allOf`` (older pydantic's way of doing the same) is merged likewise;
  a recursive reference cannot be inlined and is a violation;
- ``anyOf`` becomes ``oneOf`` once every pair of branches is provably disjoint. A branch
  that another *bare* branch (only ``type`` and annotations) already covers is dropped
  first, so ``int | float`` is ``number`` and ``Any | None`` is any JSON; an overlap that
  remains is a violation, because ``oneOf`` would reject values matching two branches;
- ``discriminator`` beside ``oneOf`` (pydantic's tagged unions) is dropped: the branches'
  ``const`` tags already make them disjoint, and the keyword only names the tag;
- ``enum`` / ``const`` without a ``type`` (``Literal[1, "a"]``, ``Literal["a", None]``) gets
  the type of its values, or is split into one ``oneOf`` branch per type;
- an ``additionalProperties: {}`` (any value) is ``true``; a ``default`` that is not lossless
  JSON is dropped (it is only an annotation).

Everything else is kept as pydantic declares it (closed objects stay closed, open objects
stay open), and whatever is still outside the subset (``minimum``, ``pattern``, ``format``,
``prefixItems``, a typed ``additionalProperties``…) is reported by the subset walk.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any, Final

from toolray._json import is_json
from toolray.errors import JsonSchemaError

from . import assert_supported_json_schema
from ._equality import json_equal
from ._unions import json_types, type_literals, widen

__all__ = ("output_json_schema", "parameters_json_schema", "to_subset")

_REF_PREFIX: Final = "#/$defs/"
_ANNOTATIONS: Final = frozenset(("description", "title", "default", "examples"))


def to_subset(schema: dict[str, Any], defs: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Convert one pydantic JSON Schema node (resolving against ``defs``) into the subset.

    Returns the converted schema and every violation (conversion first, then the subset
    walk), with paths rooted at ``schema``.

    Example:
        >>> to_subset({"anyOf": [{"type": "integer"}, {"type": "null"}]}, {})
        ({'oneOf': [{'type': 'integer'}, {'type': 'null'}]}, [])
    """
    converter = _Converter(defs)
    converted = converter.node(schema, "schema")
    violations = converter.violations
    if not violations:
        try:
            assert_supported_json_schema(converted)
        except JsonSchemaError as err:
            violations = list(err.violations)
    return converted, violations


def parameters_json_schema(raw: dict[str, Any]) -> dict[str, Any]:
    """The object-rooted parameter schema from a pydantic model's validation schema.

    Raises:
        JsonSchemaError: every violation, each prefixed with its parameter's name.
    """
    defs = raw.get("$defs", {})
    properties: dict[str, Any] = {}
    violations: list[str] = []
    for key, schema in raw.get("properties", {}).items():
        properties[key], found = to_subset(schema, defs)
        violations.extend(f'parameter "{key}": {violation}' for violation in found)
    if violations:
        raise JsonSchemaError(violations)
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if raw.get("required"):
        parameters["required"] = list(raw["required"])
    return parameters


def output_json_schema(raw: dict[str, Any]) -> dict[str, Any]:
    """The output schema from a ``TypeAdapter``'s serialization schema.

    Raises:
        JsonSchemaError: every violation, each prefixed with ``return value``.
    """
    schema, violations = to_subset(raw, raw.get("$defs", {}))
    if violations:
        raise JsonSchemaError([f"return value: {violation}" for violation in violations])
    return schema


class _Converter:
    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs
        self.violations: list[str] = []
        self._expanding: list[str] = []

    def node(self, node: Any, path: str) -> Any:
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return self._inline(node, path)
        out = {key: value for key, value in node.items() if key != "$defs"}
        if "allOf" in out:
            return self._all_of(out, path)
        if "oneOf" in out:
            out.pop("discriminator", None)
        if "anyOf" in out:
            out = self._any_of(out, path)
        elif isinstance(out.get("oneOf"), list):
            out["oneOf"] = [self.node(b, f"{path}.oneOf[{i}]") for i, b in enumerate(out["oneOf"])]
        _type_literals(out)
        if "default" in out and not is_json(out["default"]):
            del out["default"]
        self._children(out, path)
        return out

    def _inline(self, node: dict[str, Any], path: str) -> Any:
        ref = node["$ref"]
        name = ref[len(_REF_PREFIX) :] if isinstance(ref, str) else ""
        if not (isinstance(ref, str) and ref.startswith(_REF_PREFIX) and name in self.defs):
            self.violations.append(f"{path}.$ref {ref!r} is not a local $defs reference")
            return {}
        if name in self._expanding:
            self.violations.append(
                f"{path}.$ref is recursive ({name} refers to itself), which cannot be inlined"
            )
            return {}
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        self._expanding.append(name)
        try:
            return self.node({**self.defs[name], **siblings}, path)
        finally:
            self._expanding.pop()

    def _all_of(self, node: dict[str, Any], path: str) -> Any:
        branches = node.pop("allOf")
        if not (isinstance(branches, list) and len(branches) == 1):
            self.violations.append(f"{path}.allOf is not supported (only a single-schema allOf)")
            return node
        return self.node({**branches[0], **node}, path)

    def _any_of(self, node: dict[str, Any], path: str) -> dict[str, Any]:
        raw = node.pop("anyOf")
        if not isinstance(raw, list) or not raw:
            self.violations.append(f"{path}.anyOf must be a non-empty array of schemas")
            return node
        branches = _drop_subsumed([self.node(b, f"{path}.oneOf[{i}]") for i, b in enumerate(raw)])
        if len(branches) == 1:
            return {**branches[0], **node}
        for (i, left), (j, right) in combinations(enumerate(branches), 2):
            if not _disjoint(left, right):
                self.violations.append(
                    f"{path}.anyOf branches {i} and {j} overlap, so it cannot become oneOf"
                    " (only unions of disjoint types are supported)"
                )
                break
        node["oneOf"] = branches
        return node

    def _children(self, node: dict[str, Any], path: str) -> None:
        properties = node.get("properties")
        if isinstance(properties, dict):
            node["properties"] = {
                key: self.node(child, f"{path}.properties.{key}")
                for key, child in properties.items()
            }
        if "items" in node:
            node["items"] = self.node(node["items"], f"{path}.items")
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            if _is_any(extra):
                node["additionalProperties"] = True
            else:
                del node["additionalProperties"]
                self.violations.append(
                    f"{path}.additionalProperties must be a boolean: a typed mapping"
                    " (dict[str, X]) is outside the subset; use dict[str, Any] or a model"
                )


def _is_any(node: dict[str, Any]) -> bool:
    return all(key in _ANNOTATIONS for key in node)


def _is_bare(node: dict[str, Any]) -> bool:
    """Only ``type`` and annotations: the node accepts every value of its type."""
    return all(key == "type" or key in _ANNOTATIONS for key in node)


def _covers(wide: dict[str, Any], narrow: dict[str, Any]) -> bool:
    if not _is_bare(wide) or wide is narrow:
        return False
    if "type" not in wide:
        return True
    narrow_types = json_types(narrow)
    return narrow_types is not None and narrow_types <= widen(frozenset((wide["type"],)))


def _drop_subsumed(branches: list[Any]) -> list[Any]:
    kept: list[Any] = []
    for index, branch in enumerate(branches):
        covered_by_other = any(
            isinstance(other, dict)
            and isinstance(branch, dict)
            and _covers(other, branch)
            and not (_covers(branch, other) and other_index > index)
            for other_index, other in enumerate(branches)
            if other_index != index
        )
        if not covered_by_other:
            kept.append(branch)
    return kept


def _literal_values(node: dict[str, Any]) -> list[Any] | None:
    if "enum" in node:
        values = node["enum"]
        return values if isinstance(values, list) else None
    return [node["const"]] if "const" in node else None


def _type_literals(node: dict[str, Any]) -> None:
    """Give a type to a typeless ``enum`` / ``const``; split mixed values into ``oneOf``."""
    if "type" not in node and "oneOf" not in node:
        type_literals(node)


def _disjoint(left: Any, right: Any) -> bool:
    """Whether no JSON value can match both schemas (conservative: ``False`` if unsure)."""
    left_types, right_types = json_types(left), json_types(right)
    if left_types is None or right_types is None:
        return False
    if not widen(left_types) & widen(right_types):
        return True
    left_values, right_values = _literal_values(left), _literal_values(right)
    if left_values is not None and right_values is not None:
        return not any(json_equal(a, b) for a in left_values for b in right_values)
    if left_types == right_types == frozenset(("object",)):
        return _tagged_apart(left, right)
    return False


def _tagged_apart(left: dict[str, Any], right: dict[str, Any]) -> bool:
    """Two objects that both require a property whose schemas are disjoint."""
    shared = set(left.get("required", ())) & set(right.get("required", ()))
    left_props, right_props = left.get("properties", {}), right.get("properties", {})
    return any(
        key in left_props and key in right_props and _disjoint(left_props[key], right_props[key])
        for key in shared
    )
