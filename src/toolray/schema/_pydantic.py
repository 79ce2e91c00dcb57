"""pydantic's JSON Schema, converted into the enforced subset (the ``@tool`` side of R-JS).

pydantic describes a type with the full JSON-Schema vocabulary; the registry enforces a
small subset (``type/oneOf/properties/required/additionalProperties/items/enum/const`` plus
the annotations ``description/title/default/examples``). :func:`to_subset` bridges the two
without changing what a schema accepts, with the converter of standard schemas in its
pydantic dialect (:func:`~toolray.schema._convert.convert_pydantic`):

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
- an ``additionalProperties: {}`` (any value) is ``true``, a typed one is a violation; an
  annotation (``default``…) that is not JSON is dropped.

Everything else is kept as pydantic declares it (closed objects stay closed, open objects
stay open), and whatever is still outside the subset (``minimum``, ``pattern``, ``format``,
``prefixItems``…) is reported by the subset walk.
"""

from __future__ import annotations

from typing import Any

from toolray.errors import JsonSchemaError

from . import assert_supported_json_schema
from ._convert import convert_pydantic

__all__ = ("output_json_schema", "parameters_json_schema", "to_subset")


def to_subset(schema: dict[str, Any], defs: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Convert one pydantic JSON Schema node (resolving against ``defs``) into the subset.

    Returns the converted schema and every violation (conversion first, then the subset
    walk), with paths rooted at ``schema``.

    Example:
        >>> to_subset({"anyOf": [{"type": "integer"}, {"type": "null"}]}, {})
        ({'oneOf': [{'type': 'integer'}, {'type': 'null'}]}, [])
    """
    converted, violations = convert_pydantic(schema, defs)
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
