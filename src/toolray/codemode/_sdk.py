"""The Code Mode SDK text: typed Python stubs of the tools a program can call (R-SCH-15).

Each tool becomes ``async def name(param: type = default, …) -> Output:`` with its
description as the docstring; object parameters and outputs become ``TypedDict`` classes,
enums ``Literal``s. Tools are sorted by name and nothing varies between two renderings of
the same tools, so the text is byte-identical while the tool set is unchanged (a stable
prompt prefix). The stubs are a reading aid only: at run time a program has the tools as
plain async functions that take keyword arguments (or one ``dict``) and return JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ._sdk_ts import render_typescript_sdk
from ._sdk_types import PyTypes, docstring, is_python_name, pascal, py_literal

__all__ = (
    "SDK_RENDERERS",
    "SdkTool",
    "parameter_names",
    "render_python_sdk",
)


@dataclass(frozen=True, slots=True)
class SdkTool:
    """One tool of the SDK projection (R-SCH-14): its schema and a detached output schema."""

    name: str
    description: str | None
    parameters: Any
    output: Any


_INSTRUCTIONS: Final = """\
## Writing code for run_code

`run_code` takes two required arguments: `code` — a Python program (top-level `await` \
works) — and `description`, a short summary of what the program does. Inside the program \
every tool declared below is an async function, both a global and an attribute of the \
module `tools`: `await tools.search(query="x")` and `await search(query="x")` are the same \
call. The declarations are STATIC STUBS describing argument and return types — in \
particular the `TypedDict` classes do NOT exist at run time, so pass plain keyword \
arguments (or one `dict`) and read results as plain `dict`/`list` JSON values. Inside the \
program:

- Every call returns the tool's canonical JSON value (its return type below). Tool \
arguments must be lossless JSON. Parameters shown with `= ...` are optional: leave them \
out rather than passing `None`.
- A FAILED tool call raises `ToolCallError`, whose `tool_name` names the failed tool and \
whose message is human-readable — wrap calls in `try`/`except ToolCallError` to handle a \
failure and continue.
- Independent read-only calls MAY overlap under `asyncio.gather` (concurrency-safe calls \
run together; other calls run alone, in submission order). Sequence dependent work with \
`await`.
- Answer with `print(...)` and/or a last expression: every `print()` becomes one line of \
output, and the value of the program's last expression statement (it must be JSON) is its \
result. ONLY what you print and that value come back — intermediate tool results never \
enter the conversation, so extract just what you need."""


def _sorted_params(parameters: Any) -> tuple[list[str], set[str]] | None:
    """Keyword order (required first, each in declaration order) and the required names.

    ``None`` when the parameters cannot be written as keyword parameters (not an object
    with properties, or a property that is not a Python name).
    """
    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        return None
    props = parameters.get("properties")
    if not isinstance(props, dict):
        return None
    if not all(isinstance(key, str) and is_python_name(key) for key in props):
        return None
    required = parameters.get("required")
    needed = {k for k in required if k in props} if isinstance(required, list) else set()
    order = [k for k in props if k in needed] + [k for k in props if k not in needed]
    return order, needed


def parameter_names(parameters: Any) -> list[str] | None:
    """The positional order of a tool's parameters, as its stub declares them (or ``None``)."""
    found = _sorted_params(parameters)
    return None if found is None else found[0]


def _default(schema: Any) -> str:
    default = schema.get("default") if isinstance(schema, dict) else None
    literal = py_literal(default) if default is not None else None
    return literal if literal is not None else "..."


def _args_doc(parameters: dict[str, Any], order: Sequence[str]) -> list[str]:
    lines = []
    props = parameters.get("properties") or {}
    for key in order:
        text = props[key].get("description") if isinstance(props[key], dict) else None
        if isinstance(text, str) and text.strip():
            lines.append(f"{key}: {' '.join(text.split())}")
    return lines


def _stub(tool: SdkTool, types: PyTypes) -> str:
    base = pascal(tool.name)
    returns = types.type_of(tool.output, f"{base}Result")
    found = _sorted_params(tool.parameters)
    doc_args: list[str] = []
    if found is not None:
        order, needed = found
        props = tool.parameters["properties"]
        params = []
        for key in order:
            annotation = types.type_of(props[key], base + pascal(key))
            tail = "" if key in needed else f" = {_default(props[key])}"
            params.append(f"{key}: {annotation}{tail}")
        signature = ", ".join(params)
        doc_args = _args_doc(tool.parameters, order)
    else:
        schema = tool.parameters if isinstance(tool.parameters, dict) else {}
        signature = f"args: {types.type_of(schema, f'{base}Args')}, /"
    name = tool.name if is_python_name(tool.name) else f"_{pascal(tool.name).lower()}"
    lines = []
    if name != tool.name:
        spelled = repr(tool.name)
        lines.append(f"# {spelled} is not a Python name: call it as `getattr(tools, {spelled})`")
    lines.append(f"async def {name}({signature}) -> {returns}:")
    text = (tool.description or "").strip()
    if doc_args:
        text = (text + "\n\n" if text else "") + "Args:\n" + "\n".join(f"    {a}" for a in doc_args)
    lines.append(docstring(text, "    ") if text else "    ...")
    return "\n".join(lines)


def render_python_sdk(tools: Iterable[SdkTool], *, allowed_imports: Iterable[str] = ()) -> str:
    """The ``tools:sdk`` text for a Python runtime: instructions, then the stubs."""
    types = PyTypes()
    stubs = [_stub(tool, types) for tool in sorted(tools, key=lambda t: t.name)]
    imports = sorted(types.typing | {"Any"})
    head = f"from typing import {', '.join(imports)}"
    blocks = [head, *types.classes, *stubs]
    text = _INSTRUCTIONS
    allowed = sorted(allowed_imports)
    if allowed:
        text += f"\n- A program may import only these modules: {', '.join(allowed)}."
    body = "\n\n\n".join(blocks)
    return f"{text}\n\nThe available tools:\n\n```python\n{body}\n```"


SDK_RENDERERS: Final[dict[str, Callable[..., str]]] = {
    "typescript": render_typescript_sdk,
    "python": render_python_sdk,
}
"""Runtime language → SDK renderer (``tools:sdk``)."""
