"""Where an integration's tools come from and where its calls run: a registry or a runtime.

``source`` is a ``ToolRegistry`` or a ``RayRuntime``. A runtime is used through its
``registry`` (the Ray layer's ``RemoteRegistry``: the same reads, answered by the registry
actor, and batches run on the scope's executor actor), so the core never imports the Ray
layer: anything with those methods, or with a ``registry`` that has them, is a source.

Each framework asks two things of a source: the tools a scope presents (:func:`read_tools`,
with whether each may overlap its siblings) and one batch of calls run through the scope's
whole pipeline (:func:`run_calls`).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from toolray import (
    RESERVED_TOOL_NAME,
    AbortController,
    ExecutionMode,
    ToolBatchInput,
    ToolBatchResult,
    ToolCall,
    ToolDefinition,
    ToolPromptSection,
    ToolRegistry,
)

__all__ = (
    "ToolInfo",
    "ToolSource",
    "check_scope",
    "read_instructions",
    "read_tools",
    "read_tools_now",
    "registry_of",
    "run_calls",
)


@runtime_checkable
class ToolSource(Protocol):
    """What an integration needs of a registry: ``ToolRegistry`` or ``rt.registry``."""

    def schemas(self, scope: str | None = None) -> list[dict[str, Any]]:
        """One ``{"name", "description", "parameters"}`` per tool the scope presents."""
        ...

    def definitions(self, scope: str | None = None) -> list[ToolDefinition]:
        """The scope's visible definitions (their classifiers tell safe calls apart)."""
        ...

    def known_names(self, scope: str | None = None) -> list[str]:
        """The names of the scope's prompt contribution (``["run_code"]`` under Code Mode)."""
        ...

    def prompt_sections(self, scope: str | None = None) -> list[ToolPromptSection]:
        """The Code Mode system-prompt sections of the scope (``[]`` when native)."""
        ...

    async def execute_batch(self, batch: ToolBatchInput) -> ToolBatchResult:
        """Run a batch through the scope's pipeline: one result per call, in order."""
        ...


def registry_of(source: object, where: str) -> ToolSource:
    """The registry behind ``source``: a ``ToolRegistry`` itself, or a runtime's ``registry``."""
    if isinstance(source, ToolSource):
        return source
    registry = getattr(source, "registry", None)
    if isinstance(registry, ToolSource):
        return registry
    raise TypeError(f"{where}: source must be a ToolRegistry or a RayRuntime, not {_kind(source)}")


def check_scope(scope: object, where: str) -> str | None:
    """``scope`` as given when it is a scope key (``str``) or ``None`` (the global scope)."""
    if scope is not None and not isinstance(scope, str):
        raise TypeError(f"{where}: scope must be a str or None, not {_kind(scope)}")
    return scope


def _kind(value: object) -> str:
    return type(value).__name__


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInfo:
    """One tool as a framework presents it, and how toolray classifies its calls."""

    name: str
    description: str
    parameters: dict[str, Any]
    classify: Callable[[Any], bool] | None = None

    @property
    def sequential(self) -> bool:
        """Whether the framework should run this tool's calls alone (a barrier).

        A tool is concurrent only when its classifier answers exactly ``True`` before any
        argument is known (``concurrency_safe=True``); every other tool — no classifier,
        ``False``, or a verdict that needs the arguments — is sequential, as toolray's own
        classification fails closed. Each call is classified again by :meth:`mode`.
        """
        if self.classify is None:
            return True
        probe = inspect.unwrap(self.classify)  # the author's predicate, past the arg check
        try:
            return probe({}) is not True
        except Exception:
            return True

    def mode(self, arguments: Any) -> ExecutionMode:
        """The call's mode, by toolray's rule: ``"parallel"`` only for an exact ``True``."""
        if self.classify is None or not isinstance(arguments, dict):
            return "exclusive"
        try:
            verdict = self.classify(arguments)
        except Exception:
            return "exclusive"
        return "parallel" if verdict is True else "exclusive"


def _presented(registry: ToolSource, scope: str | None) -> list[dict[str, Any]]:
    """The schemas the model is shown: all visible tools, or only ``run_code`` under ``code``.

    ``schemas(scope)`` lists every visible tool in every mode; a scope whose effective mode
    is ``code`` contributes ``run_code`` alone to the model (its ``known_names``), and a
    direct call to another tool would be refused.
    """
    schemas = registry.schemas(scope)
    if registry.known_names(scope) == [RESERVED_TOOL_NAME]:
        return [schema for schema in schemas if schema["name"] == RESERVED_TOOL_NAME]
    return schemas


def _tool_infos(registry: ToolSource, scope: str | None) -> list[ToolInfo]:
    try:
        classifiers = {d.name: d.is_concurrency_safe for d in registry.definitions(scope)}
    except Exception:  # a definition this process cannot load: every call runs alone
        classifiers = {}
    return [
        ToolInfo(
            name=schema["name"],
            description=schema.get("description") or "",
            parameters=dict(schema["parameters"]),
            classify=classifiers.get(schema["name"]),
        )
        for schema in _presented(registry, scope)
    ]


async def read_tools(registry: ToolSource, scope: str | None) -> list[ToolInfo]:
    """The tools ``scope`` presents now, in view order (restricted tools are not listed).

    A remote registry answers with blocking actor calls, which run on a thread so the
    framework's event loop keeps serving other tasks.
    """
    if isinstance(registry, ToolRegistry):
        return _tool_infos(registry, scope)
    return await asyncio.to_thread(_tool_infos, registry, scope)


def read_tools_now(registry: ToolSource, scope: str | None) -> list[ToolInfo]:
    """:func:`read_tools` for synchronous callers."""
    return _tool_infos(registry, scope)


async def read_instructions(registry: ToolSource, scope: str | None) -> str | None:
    """The scope's Code Mode prompt sections as one text, or ``None`` for a native scope."""
    if isinstance(registry, ToolRegistry):
        sections = registry.prompt_sections(scope)
    else:
        sections = await asyncio.to_thread(registry.prompt_sections, scope)
    texts = [section.text for section in sorted(sections, key=lambda s: s.order) if section.text]
    return "\n\n".join(texts) or None


async def run_calls(
    registry: ToolSource, scope: str | None, calls: list[ToolCall]
) -> ToolBatchResult:
    """Run ``calls`` as one toolray batch of ``scope``: one result per call, in order.

    Cancelling the awaiting task (a framework giving up on its calls) stops the batch as
    toolray does: in-process its bodies are cancelled, on Ray the remote batch is aborted.
    """
    batch = ToolBatchInput(calls, AbortController().signal, scope=scope)
    return await registry.execute_batch(batch)
