"""JSON Schema → Python type expressions, with ``TypedDict`` classes for object shapes.

The walk is iterative (an explicit stack), so a schema nested 5,000 levels deep renders
without recursion; unions are flattened and de-duplicated, which also keeps such a schema's
text short. A schema this cannot express precisely degrades to ``Any``: the types are a
reading aid for the model, never enforced.
"""

from __future__ import annotations

import json
import keyword
import re
from typing import Any, Final

__all__ = ("PyTypes", "is_python_name", "pascal", "py_literal")

_SCALARS: Final = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
}


def is_python_name(name: str) -> bool:
    """Whether ``name`` can be written as a Python identifier (keywords excluded)."""
    return name.isidentifier() and not keyword.iskeyword(name)


def pascal(text: str) -> str:
    """``search_web`` → ``SearchWeb``; anything else becomes letters and digits only."""
    words = re.findall(r"[A-Za-z0-9]+", text)
    name = "".join(w[:1].upper() + w[1:] for w in words) or "Value"
    return name if not name[0].isdigit() else f"T{name}"


def py_literal(value: Any) -> str | None:
    """A JSON scalar as a Python literal (``None`` for anything else)."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return None


def _members(part: str) -> list[str]:
    """The top-level members of a union expression (``list[int | str] | None``: two)."""
    out, depth, start, quoted, escaped = [], 0, 0, False, False
    for i, ch in enumerate(part):
        if quoted:
            quoted = escaped or ch != '"'
            escaped = not escaped and ch == "\\"
        elif ch == '"':
            quoted = True
        elif ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        elif ch == "|" and depth == 0:
            out.append(part[start:i].strip())
            start = i + 1
    out.append(part[start:].strip())
    return out


def _union(parts: list[str]) -> str:
    members: dict[str, None] = {}
    for part in parts:
        members.update(dict.fromkeys(_members(part)))
    if "Any" in members:
        return "Any"
    return " | ".join(members) if members else "Any"


class PyTypes:
    """Renders type expressions; collects the ``TypedDict`` classes they refer to."""

    def __init__(self) -> None:
        self.classes: list[str] = []
        self.typing: set[str] = set()
        self._names: set[str] = set()

    def class_name(self, hint: str) -> str:
        """``hint``, or ``hint2``, ``hint3``… when taken."""
        name, n = hint, 1
        while name in self._names:
            n += 1
            name = f"{hint}{n}"
        self._names.add(name)
        return name

    def type_of(self, schema: Any, hint: str) -> str:
        """The Python type of ``schema``; object shapes become classes named from ``hint``."""
        results: list[str] = []
        stack: list[tuple[Any, ...]] = [("visit", schema, hint)]
        while stack:
            op = stack.pop()
            if op[0] == "visit":
                node, where = op[1], op[2]
                leaf = self._leaf(node)
                if leaf is not None:
                    results.append(leaf)
                    continue
                children = self._children(node, where)
                stack.append(("combine", node, where, len(children)))
                stack.extend(("visit", child, at) for child, at in reversed(children))
            else:
                node, where, count = op[1], op[2], op[3]
                parts = results[len(results) - count :]
                del results[len(results) - count :]
                results.append(self._combine(node, where, parts))
        return results[0]

    # ------------------------------------------------------------------ the walk
    def _leaf(self, node: Any) -> str | None:
        if not isinstance(node, dict):
            return "Any"
        if "enum" in node or "const" in node:
            values = node["enum"] if "enum" in node else [node["const"]]
            literals = [py_literal(v) for v in values] if isinstance(values, list) else [None]
            if not literals or any(lit is None for lit in literals):
                return "Any"
            self.typing.add("Literal")
            return f"Literal[{', '.join(lit for lit in literals if lit is not None)}]"
        if isinstance(node.get("oneOf"), list) and node["oneOf"]:
            return None
        kind = node.get("type")
        if isinstance(kind, list):
            return None if kind else "Any"
        if kind in _SCALARS:
            return _SCALARS[kind]
        if kind == "array":
            return None if isinstance(node.get("items"), dict) else "list[Any]"
        if kind == "object":
            props = node.get("properties")
            extra = node.get("additionalProperties")
            if (isinstance(props, dict) and props) or isinstance(extra, dict):
                return None
            return "dict[str, Any]"
        return "Any"

    def _children(self, node: dict[str, Any], where: str) -> list[tuple[Any, str]]:
        if isinstance(node.get("oneOf"), list) and node["oneOf"]:
            return [(branch, where) for branch in node["oneOf"]]
        kind = node.get("type")
        if isinstance(kind, list):
            return [({**node, "type": k}, where) for k in kind]
        if kind == "array":
            return [(node["items"], f"{where}Item")]
        props = node.get("properties")
        if isinstance(props, dict) and props:
            return [(sub, where + pascal(str(key))) for key, sub in props.items()]
        return [(node["additionalProperties"], f"{where}Value")]

    def _combine(self, node: dict[str, Any], where: str, parts: list[str]) -> str:
        if (isinstance(node.get("oneOf"), list) and node["oneOf"]) or isinstance(
            node.get("type"), list
        ):
            return _union(parts)
        if node.get("type") == "array":
            return f"list[{parts[0]}]"
        props = node.get("properties")
        if isinstance(props, dict) and props:
            return self.typed_dict(node, where, dict(zip(props, parts, strict=True)))
        return f"dict[str, {parts[0]}]"

    def typed_dict(self, node: dict[str, Any], hint: str, fields: dict[str, str]) -> str:
        """Declare a ``TypedDict`` for an object node whose property types are ``fields``.

        Its name is the node's ``title`` when it has one (a pydantic model's name), else
        ``hint``.
        """
        title = node.get("title")
        name = self.class_name(pascal(title) if isinstance(title, str) and title else hint)
        required = node.get("required")
        needed = set(required) if isinstance(required, list) else set()
        self.typing.add("TypedDict")
        if len(needed) < len(fields):
            self.typing.add("NotRequired")

        def annotated(key: str) -> str:
            return fields[key] if key in needed else f"NotRequired[{fields[key]}]"

        props: dict[str, Any] = node.get("properties") or {}
        if not all(is_python_name(key) for key in fields):
            entries = ", ".join(
                f"{json.dumps(k, ensure_ascii=False)}: {annotated(k)}" for k in fields
            )
            self.classes.append(f'{name} = TypedDict("{name}", {{{entries}}})')
            return name
        lines = [f"class {name}(TypedDict):"]
        description = node.get("description")
        if isinstance(description, str) and description.strip():
            lines.append(docstring(description, "    "))
        for key in fields:
            lines.append(f"    {key}: {annotated(key)}")
            sub = props.get(key)
            text = sub.get("description") if isinstance(sub, dict) else None
            if isinstance(text, str) and text.strip():
                lines.append(docstring(text, "    "))
        self.classes.append("\n".join(lines))
        return name


def docstring(text: str, indent: str) -> str:
    """``text`` as a docstring at ``indent`` (escaped so it always closes where it should)."""
    body = text.strip().replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if body.endswith('"'):
        body = body[:-1] + '\\"'
    lines = body.splitlines() or [""]
    if len(lines) == 1:
        return f'{indent}"""{lines[0]}"""'
    rest = "\n".join(f"{indent}{line}" if line.strip() else "" for line in lines[1:])
    return f'{indent}"""{lines[0]}\n{rest}\n{indent}"""'
