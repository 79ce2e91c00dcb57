"""Code Mode's system-prompt sections: ``tools:code-only`` and ``tools:sdk`` (R-SCH-15).

Both are contributed where Code Mode is: by a deployment whose mode is not native (for
every scope), and by a scope whose chain declares a non-native ``present_as``. Their texts
follow the viewing scope's effective mode: the code-only rule only under ``code`` (under
``both`` native calls do run, so the rule would be false), the SDK under ``code`` and
``both``. Rendering the SDK needs a code runtime whose language has a renderer; without
one, assembly fails with the R-SCH-13 texts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Protocol

from toolray._definition import RESERVED_TOOL_NAME
from toolray._json import snapshot_json, thaw_json

from ._sdk import SDK_RENDERERS, SdkTool

__all__ = (
    "CODE_ONLY_INSTRUCTION",
    "CODE_ONLY_ORDER",
    "SDK_ORDER",
    "PromptView",
    "ToolPromptSection",
    "missing_runtime",
    "prompt_sections",
    "require_runtime",
)

CODE_ONLY_ORDER: Final = 99
"""After the persona, before the per-tool guidance band (100–199) it qualifies."""
SDK_ORDER: Final = 150
"""Inside the tool-guidance band, after the per-tool guidance."""

CODE_ONLY_INSTRUCTION: Final = (
    f"`{RESERVED_TOOL_NAME}` is the only tool you can call directly — a tool call naming any "
    "other tool fails. Reach every tool the SDK declares below from inside the program."
)


@dataclass(frozen=True, slots=True)
class ToolPromptSection:
    """One system-prompt section: a stable ``id``, its ``order`` and its ``text``.

    An empty ``text`` means the section renders nothing for that scope.
    """

    id: str
    order: int
    text: str


class PromptView(Protocol):
    """What the sections read of a registry."""

    @property
    def mode(self) -> str:
        """The deployment mode."""
        ...

    @property
    def code_runtime(self) -> Any:
        """The mounted code runtime, or ``None``."""
        ...

    def effective_mode(self, scope: str | None) -> str:
        """The scope's presentation mode."""
        ...

    def declared_modes(self, scope: str | None) -> list[str]:
        """The ``present_as`` declarations on the scope's chain."""
        ...

    def definitions(self, scope: str | None = None, tool_set: Any = None) -> list[Any]:
        """The visible capability definitions."""
        ...


def missing_runtime(mode: str) -> str:
    """R-SCH-13: a non-native mode with no code runtime."""
    return (
        f'toolray: mode "{mode}" requires a code runtime — pass one to the registry '
        '(ToolRegistry(code_runtime=toolray.code.PythonRuntime())) or set the mode to "native"'
    )


def require_runtime(view: PromptView, mode: str) -> Any:
    """The mounted runtime, checked for an SDK renderer (``RuntimeError`` otherwise)."""
    runtime = view.code_runtime
    if runtime is None:
        raise RuntimeError(missing_runtime(mode))
    language = getattr(runtime, "language", None)
    if not isinstance(language, str) or language not in SDK_RENDERERS:
        known = ", ".join(json.dumps(name) for name in SDK_RENDERERS)
        shown = json.dumps(language) if isinstance(language, str) else repr(language)
        raise RuntimeError(
            f"toolray: no SDK renderer registered for runtime language {shown} (known: {known})"
        )
    return runtime


def sdk_tools(view: PromptView, scope: str | None) -> list[SdkTool]:
    """The SDK projection (R-SCH-14): visible tools minus ``run_code``, detached."""
    return [
        SdkTool(
            name=d.name,
            description=d.description,
            parameters=thaw_json(snapshot_json(d.parameters)),
            output=thaw_json(snapshot_json(d.output.schema)),
        )
        for d in view.definitions(scope)
        if d.name != RESERVED_TOOL_NAME
    ]


def prompt_sections(view: PromptView, scope: str | None = None) -> list[ToolPromptSection]:
    """The Code Mode sections ``scope`` sees (``[]`` where Code Mode is nowhere on it)."""
    declared = [m for m in view.declared_modes(scope) if m != "native"]
    if view.mode == "native" and not declared:
        return []
    mode = view.effective_mode(scope)
    sdk = ""
    if mode != "native":
        runtime = require_runtime(view, mode)
        render = SDK_RENDERERS[runtime.language]
        allowed = getattr(runtime, "allowed_imports", ())
        sdk = render(sdk_tools(view, scope), allowed_imports=allowed)
    code_only = CODE_ONLY_INSTRUCTION if mode == "code" else ""
    return [
        ToolPromptSection("tools:code-only", CODE_ONLY_ORDER, code_only),
        ToolPromptSection("tools:sdk", SDK_ORDER, sdk),
    ]
