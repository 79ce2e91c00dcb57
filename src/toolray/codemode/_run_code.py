"""The reserved ``run_code`` Code Mode transport: its schema flavours, output and rendering.

One definition per registry (every scope sees the same object, R-COND-07). Its model-facing
``description`` and ``parameters`` are read from the mounted runtime's language each time
they are read (R-SCH-17): Python wording for ``"python"``, the TypeScript wording when no
runtime is mounted, and an error for a language with no flavour. Argument validation keys
off the language-independent schema. The body (the sub-call bridge) sits above the
pipeline and is handed in by the registry.

The output value is ``{"logs": [str, …], "result"?: json}`` and renders as the logs joined
by newlines, then the result: a string as it is, other JSON pretty-printed with two-space
indentation whose total depth is capped at ten characters (deeper levels compacted), so
the text stays linear in the value's size (C-CODE-15). The walk is iterative.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from toolray._definition import RESERVED_TOOL_NAME, ToolDefinition, ToolOutput
from toolray.errors import ToolArgsError
from toolray.presentation import GenericCallView
from toolray.schema import compile_validator

__all__ = (
    "EMPTY_OUTPUT",
    "FLAVOR_LANGUAGES",
    "RunCodeDefinition",
    "RunCodeFlavor",
    "check_run_code_arguments",
    "flavor_for",
    "render_json",
    "render_run_code",
)

EMPTY_OUTPUT: Final = "(run_code completed with no output)"

_DESCRIPTION_PARAMETER: Final = (
    "Clear, concise description of what this program does in active voice, 5-10 words "
    '(shown in the UI). Examples: "Count TODO markers across packages"; "Read failing test '
    'and its fixture"; "Rename config key in every config file".'
)


def _parameters(code_description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": code_description},
            "description": {"type": "string", "description": _DESCRIPTION_PARAMETER},
        },
        "required": ["code", "description"],
    }


@dataclass(frozen=True, slots=True)
class RunCodeFlavor:
    """One language's model-facing ``run_code`` texts."""

    description: str
    parameters: dict[str, Any]


_TYPESCRIPT: Final = RunCodeFlavor(
    "Execute a TypeScript program against the available tools. Takes two required "
    "arguments: `code`, the BODY of an async function (erasable syntax only; top-level "
    "`await` and `return` work), and `description`, a short summary of what the program "
    "does. Call tools as `await tools.name(args)` per the declarations in the system "
    "prompt. Only what you print or return is program output — curate it. Image-bearing "
    "subtool results are attached after the run.",
    _parameters("The program: the body of an async TypeScript function."),
)

_PYTHON: Final = RunCodeFlavor(
    "Execute a Python program against the available tools. Takes two required arguments: "
    "`code`, a Python program (top-level `await` works), and `description`, a short summary "
    "of what the program does. Call tools as `await tools.name(...)` per the declarations "
    "in the system prompt. Use `print(...)` and/or end the program with an expression: "
    "each printed line and the value of that last expression (the result) are the only "
    "output — curate it. Image-bearing subtool results are attached after the run.",
    _parameters(
        "The program: Python source with top-level `await`; the value of its last "
        "expression statement is the result."
    ),
)

_FLAVORS: Final[dict[str, RunCodeFlavor]] = {"typescript": _TYPESCRIPT, "python": _PYTHON}
FLAVOR_LANGUAGES: Final = tuple(_FLAVORS)
"""The languages ``run_code`` has wording for."""


def flavor_for(language: str | None) -> RunCodeFlavor:
    """The flavour of ``language`` (``None``: no runtime, the TypeScript fallback)."""
    if language is None:
        return _TYPESCRIPT
    flavor = _FLAVORS.get(language) if isinstance(language, str) else None
    if flavor is None:
        known = ", ".join(json.dumps(name) for name in _FLAVORS)
        raise RuntimeError(
            "toolray: no run_code schema flavor registered for runtime language "
            f"{json.dumps(language) if isinstance(language, str) else repr(language)} "
            f"(known: {known})"
        )
    return flavor


_check = compile_validator(_parameters(""), "")


def check_run_code_arguments(args: Any) -> None:
    """Raise ``ToolArgsError`` unless ``args`` has string ``code`` and ``description``."""
    violations = _check(args)
    if violations:
        raise ToolArgsError(violations)


# ---------------------------------------------------------------------- rendering
_INDENT: Final = "  "
_MAX_INDENT: Final = 10


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    return json.dumps(value, ensure_ascii=False)


def render_json(value: Any) -> str:
    """``value`` as two-space pretty JSON, compact past ten characters of indentation."""
    chunks: list[str] = []
    # tasks: a str is emitted as is; a tuple is (value, depth, compact)
    tasks: list[str | tuple[Any, int, bool]] = [(value, 0, False)]
    while tasks:
        task = tasks.pop()
        if isinstance(task, str):
            chunks.append(task)
            continue
        current, depth, compact = task
        if not isinstance(current, dict | list):
            chunks.append(_scalar(current))
            continue
        is_list = isinstance(current, list)
        chunks.append("[" if is_list else "{")
        if not current:
            chunks.append("]" if is_list else "}")
            continue
        compact = compact or (depth + 1) * len(_INDENT) > _MAX_INDENT
        close = "]" if is_list else "}"
        tasks.append(close if compact else f"\n{_INDENT * depth}{close}")
        items: list[tuple[Any, Any]] = (
            list(enumerate(current)) if isinstance(current, list) else list(current.items())
        )
        inner = _INDENT * (depth + 1)
        for index in range(len(items) - 1, -1, -1):
            key, item = items[index]
            tasks.append((item, depth + 1, compact))
            label = "" if is_list else _scalar(key) + (":" if compact else ": ")
            if compact:
                tasks.append(("" if index == 0 else ",") + label)
            else:
                tasks.append(("\n" if index == 0 else ",\n") + inner + label)
    return "".join(chunks)


def render_run_code(args: Any, value: Any) -> list[dict[str, Any]]:
    """C-CODE-15: the logs, then the result (a string raw, other JSON pretty)."""
    logs = value.get("logs", ()) if isinstance(value, dict) else ()
    parts = ["\n".join(logs)] if logs else []
    if isinstance(value, dict) and "result" in value:
        result = value["result"]
        parts.append(result if isinstance(result, str) else render_json(result))
    text = "\n".join(part for part in parts if part)
    return [{"type": "text", "text": text or EMPTY_OUTPUT}]


def _present_call(args: Any) -> GenericCallView | None:
    if not isinstance(args, dict) or not isinstance(args.get("description"), str):
        return None
    return GenericCallView(title=args["description"], kind="execute", raw_input=args.get("code"))


_OUTPUT: Final = ToolOutput(
    schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {"logs": {"type": "array", "items": {"type": "string"}}, "result": {}},
        "required": ["logs"],
    },
    render=render_run_code,
)

_SLOTS: Final = {
    f.name: ToolDefinition.__dict__[f.name] for f in dataclasses.fields(ToolDefinition)
}


class RunCodeDefinition(ToolDefinition):
    """The ``run_code`` definition of one registry; its texts follow the runtime language.

    ``language()`` is read whenever ``description`` or ``parameters`` is: ``None`` (no
    runtime) gives the TypeScript wording, an unknown language raises ``RuntimeError``.
    """

    __slots__ = ("_language",)
    _language: Callable[[], str | None]

    def __init__(
        self, *, execute: Callable[[Any, Any], Any], language: Callable[[], str | None]
    ) -> None:
        object.__setattr__(self, "_language", language)
        values = dict.fromkeys(_SLOTS)
        values.update(name=RESERVED_TOOL_NAME, output=_OUTPUT, execute=execute)
        values["present_call"] = _present_call
        values["idempotent"] = False
        for name, slot in _SLOTS.items():
            if name not in ("description", "parameters"):
                slot.__set__(self, values[name])

    @property
    def description(self) -> str:
        """The runtime language's ``run_code`` description."""
        return flavor_for(self._language()).description

    @property
    def parameters(self) -> dict[str, Any]:
        """``{"code", "description"}`` with the runtime language's wording."""
        return flavor_for(self._language()).parameters

    def __repr__(self) -> str:
        return "<RunCodeDefinition run_code>"

    def __reduce__(self) -> tuple[Any, ...]:
        # A copy for another process (a Ray driver reading ``get("run_code")``): the same
        # texts, fixed at the language of now; its body belongs to the registry it came from.
        return (_shipped, (self._language(),))


def _constant(language: str | None) -> str | None:
    return language


def _elsewhere(args: Any, ctx: Any) -> Any:
    raise RuntimeError("this run_code definition is a copy: run_code runs in its registry")


def _shipped(language: str | None) -> RunCodeDefinition:
    return RunCodeDefinition(execute=_elsewhere, language=functools.partial(_constant, language))
