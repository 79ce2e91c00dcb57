"""The Code Mode SDK text for a TypeScript runtime: ``declare const tools: {…}``.

The same projection as the Python renderer, in TypeScript declaration syntax: each tool is
``name: (args: {…}) => Promise<Output>`` under a JSDoc comment holding its description.
Object shapes are written inline, unions flattened; the walk is iterative.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Final

__all__ = ("render_typescript_sdk", "ts_type")

_SCALARS: Final = {
    "string": "string",
    "integer": "number",
    "number": "number",
    "boolean": "boolean",
    "null": "null",
}
_IDENTIFIER: Final = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")

_INSTRUCTIONS: Final = """\
## Writing code for run_code

`run_code` takes two required arguments: `code` — the BODY of an async TypeScript \
function (top-level `await` and `return` work) — and `description`, a short summary of \
what the program does. Inside the program:

- Call tools as `await tools.name(args)` per the declaration below; each call resolves to \
the tool's canonical JSON value. Tool arguments must be lossless JSON.
- A FAILED tool call rejects with `ToolCallError` (`toolName` names the tool).
- Independent read-only calls MAY overlap under `Promise.all`; other calls run alone, in \
submission order.
- ONLY what you print and return comes back — extract just what you need."""


def _key(name: str) -> str:
    return name if _IDENTIFIER.match(name) else json.dumps(name, ensure_ascii=False)


def _union(parts: list[str]) -> str:
    members = dict.fromkeys(p for part in parts for p in part.split(" | "))
    return "JsonValue" if "JsonValue" in members else " | ".join(members) or "JsonValue"


def _leaf(node: Any) -> str | None:
    if not isinstance(node, dict):
        return "JsonValue"
    if "enum" in node or "const" in node:
        values = node["enum"] if "enum" in node else [node["const"]]
        if not isinstance(values, list) or not values:
            return "JsonValue"
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in values)
    if isinstance(node.get("oneOf"), list) and node["oneOf"]:
        return None
    kind = node.get("type")
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "array":
        return None if isinstance(node.get("items"), dict) else "JsonValue[]"
    if kind == "object":
        props = node.get("properties")
        if (isinstance(props, dict) and props) or isinstance(
            node.get("additionalProperties"), dict
        ):
            return None
        return "Record<string, JsonValue>"
    return "JsonValue"


def _children(node: dict[str, Any]) -> list[Any]:
    if isinstance(node.get("oneOf"), list) and node["oneOf"]:
        return list(node["oneOf"])
    if node.get("type") == "array":
        return [node["items"]]
    props = node.get("properties")
    if isinstance(props, dict) and props:
        return list(props.values())
    return [node["additionalProperties"]]


def _combine(node: dict[str, Any], parts: list[str]) -> str:
    if isinstance(node.get("oneOf"), list) and node["oneOf"]:
        return _union(parts)
    if node.get("type") == "array":
        return f"({parts[0]})[]" if " | " in parts[0] else f"{parts[0]}[]"
    props = node.get("properties")
    if isinstance(props, dict) and props:
        required = node.get("required")
        needed = set(required) if isinstance(required, list) else set()
        fields = [
            f"{_key(k)}{'' if k in needed else '?'}: {t}" for k, t in zip(props, parts, strict=True)
        ]
        return "{ " + "; ".join(fields) + " }"
    return f"Record<string, {parts[0]}>"


def ts_type(schema: Any) -> str:
    """The TypeScript type of ``schema`` (object shapes inline)."""
    results: list[str] = []
    stack: list[tuple[Any, ...]] = [("visit", schema)]
    while stack:
        op = stack.pop()
        if op[0] == "visit":
            leaf = _leaf(op[1])
            if leaf is not None:
                results.append(leaf)
                continue
            children = _children(op[1])
            stack.append(("combine", op[1], len(children)))
            stack.extend(("visit", child) for child in reversed(children))
        else:
            count = op[2]
            parts = results[len(results) - count :]
            del results[len(results) - count :]
            results.append(_combine(op[1], parts))
    return results[0]


def render_typescript_sdk(tools: Iterable[Any], *, allowed_imports: Iterable[str] = ()) -> str:
    """The ``tools:sdk`` text for a TypeScript runtime."""
    lines = ["type JsonValue = null | boolean | number | string | JsonValue[] | "
             "{ [key: string]: JsonValue };", "", "declare const tools: {"]  # fmt: skip
    for tool in sorted(tools, key=lambda t: t.name):
        description = (tool.description or "").strip().replace("*/", "*\\/")
        if description:
            lines.append("  /** " + "\n   * ".join(description.splitlines()) + " */")
        lines.append(
            f"  {_key(tool.name)}: (args: {ts_type(tool.parameters)}) => "
            f"Promise<{ts_type(tool.output)}>;"
        )
    lines.append("};")
    body = "\n".join(lines)
    return f"{_INSTRUCTIONS}\n\nThe available tools:\n\n```typescript\n{body}\n```"
