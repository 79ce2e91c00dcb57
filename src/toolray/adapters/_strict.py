"""OpenAI strict mode: whether a parameter schema can be sent with ``strict: true``, and how.

Strict mode (Structured Outputs) constrains the model's arguments to the schema exactly,
but only for a subset of JSON Schema: every object lists *all* its properties in
``required`` and sets ``additionalProperties: false``, and every value has a ``type`` (or is
an ``anyOf`` of typed branches). The transformation keeps what the schema accepts:

- the parameters' root is closed: toolray parameter roots are open only by convention (the
  DSL never declares ``additionalProperties`` on the root), and a model has no business
  sending arguments the schema does not name;
- ``oneOf`` is sent as ``anyOf``, which strict mode supports; toolray's unions are meant to
  be disjoint, so the two accept the same values;
- anything else that is not strict-compatible (an optional property, an open nested object,
  a value of any type) makes the schema non-strict, and the obstacle is reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ("strict_parameters",)


class _NotStrict(Exception):
    pass


def strict_parameters(parameters: Any) -> tuple[dict[str, Any] | None, str]:
    """The strict form of ``parameters``, or ``(None, the first obstacle)``.

    Example:
        >>> strict_parameters({"type": "object", "properties": {"a": {"type": "string"}},
        ...                    "required": ["a"]})
        ({'type': 'object', 'properties': {'a': {'type': 'string'}}, 'required': ['a'], \
'additionalProperties': False}, '')
        >>> strict_parameters({"type": "object", "properties": {"a": {"type": "string"}}})[1]
        'parameters.properties.a is optional (strict mode requires every property)'
    """
    try:
        return _node(parameters, "parameters", root=True), ""
    except _NotStrict as obstacle:
        return None, str(obstacle)


def _node(node: Any, path: str, *, root: bool = False) -> dict[str, Any]:
    if not isinstance(node, Mapping):
        raise _NotStrict(f"{path} is not a schema object")
    out = dict(node)
    if "oneOf" in out:
        branches = out.pop("oneOf")
        out["anyOf"] = [_node(b, f"{path}.oneOf[{i}]") for i, b in enumerate(branches)]
        return out
    kind = out.get("type")
    if kind is None:
        raise _NotStrict(f"{path} accepts any JSON value (strict mode requires a type)")
    if kind == "object":
        return _object(out, path, root)
    if kind == "array":
        if "items" not in out:
            raise _NotStrict(f"{path} has items of any type (strict mode requires a type)")
        out["items"] = _node(out["items"], f"{path}.items")
    return out


def _object(out: dict[str, Any], path: str, root: bool) -> dict[str, Any]:
    extra = out.get("additionalProperties", None if root else True)
    if extra not in (None, False):
        raise _NotStrict(
            f"{path} is an open object (strict mode requires additionalProperties false)"
        )
    properties = out.get("properties", {})
    required = set(out.get("required", ()))
    for key in properties:
        if key not in required:
            raise _NotStrict(
                f"{path}.properties.{key} is optional (strict mode requires every property)"
            )
    out["properties"] = {
        key: _node(child, f"{path}.properties.{key}") for key, child in properties.items()
    }
    out["required"] = list(properties)
    out["additionalProperties"] = False
    return out
