"""Contributions as shippable operations, and replaying them onto a core registry.

The registry actor keeps the authoritative core ``ToolRegistry`` and the ordered list of
live contributions (each an ``Op`` with an id and cloudpickled callables). Executor actors
replay the same operations, in the same order, onto a mirror ``ToolRegistry``; replaying
the same sequence through the same core code gives the same views, shadowing and order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from toolray import Disposer, ToolRegistry
from toolray.lowlevel import has_scope, scope_parent

__all__ = ("Mirror", "Op", "dumps_named")


@dataclass(frozen=True, slots=True, kw_only=True)
class Op:
    """One contribution (``kind``: register, environment, restrict, guard, hook, scope…)."""

    id: int
    kind: str
    key: str | None
    blob: bytes | None = None
    when: bytes | None = None
    name: str | None = None
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] | None = None
    mode: str | None = None
    hook: str | None = None
    prepend: bool = False
    parent: str | None = None
    fingerprint: str | None = None
    """For ``register``: the definition's stable digest (identical registrations share)."""
    holders: int = 1
    """For ``register``: how many disposers hold this registration."""
    replace: bool = False
    """For ``register``: swap a different live registration of the name."""


def _op_id(key: str) -> int:
    """The contribution id in a worker cache key (``def:<id>``)."""
    _, _, op_id = key.partition(":")
    return int(op_id)


def dumps_named(obj: Any, what: str) -> bytes:
    """Cloudpickle ``obj``, or a clear ``TypeError`` naming ``what``."""
    try:
        return bytes(cloudpickle.dumps(obj))
    except Exception as err:
        raise TypeError(f"{what} cannot be pickled for the Ray runtime: {err}") from None


@dataclass(eq=False)
class Mirror:
    """A core registry rebuilt from operations; remembers what to undo for each id."""

    registry: ToolRegistry = field(default_factory=ToolRegistry)
    disposers: dict[int, Disposer] = field(default_factory=dict)
    blobs: dict[int, bytes] = field(default_factory=dict)
    keys: dict[int, str] = field(default_factory=dict)  # id(definition) -> cache key
    owners: dict[int, int] = field(default_factory=dict)  # op id -> id(definition)
    executors: dict[int, Any] = field(default_factory=dict)  # op id -> set_executor() object
    on_forget: Callable[[str], None] | None = None
    """Told the cache key of a definition whose contribution went (no call names it again)."""

    def apply(self, op: Op, *, replace: bool = False) -> None:
        """Replay one contribution (raises what the core raises)."""
        reg = self.registry
        if op.kind == "scope":
            assert op.key is not None
            reg.scope(op.key, parent=op.parent)
            return
        ctx: Any = reg if op.key is None else reg.scope(op.key)
        disposer: Disposer
        if op.kind == "register":
            assert op.blob is not None
            definition = cloudpickle.loads(op.blob)
            when = cloudpickle.loads(op.when) if op.when is not None else None
            disposer = ctx.register(definition, when=when, replace=replace)
            self.blobs[op.id] = op.blob
            self.keys[id(definition)] = f"def:{op.id}"
            self.owners[op.id] = id(definition)
        elif op.kind == "environment":
            assert op.blob is not None
            environment = cloudpickle.loads(op.blob)
            disposer = ctx.register_environment(environment)
            self.blobs[op.id] = op.blob
            self.keys[id(environment)] = f"env:{op.id}"
            self.owners[op.id] = id(environment)
        elif op.kind == "restrict":
            disposer = ctx.restrict(allow=op.allow, deny=op.deny)
        elif op.kind == "guard":
            assert op.blob is not None
            disposer = ctx.guard(cloudpickle.loads(op.blob))
        elif op.kind == "present_as":
            assert op.mode is not None
            disposer = ctx.present_as(op.mode)
        elif op.kind == "executor":
            assert op.blob is not None
            executor = cloudpickle.loads(op.blob)
            disposer = ctx.set_executor(executor)
            self.executors[op.id] = executor
        elif op.kind == "approval":
            assert op.blob is not None
            disposer = reg.set_approval(cloudpickle.loads(op.blob))
        elif op.kind == "hook":
            assert op.blob is not None
            assert op.hook is not None
            fn = cloudpickle.loads(op.blob)
            method = getattr(ctx, f"on_{op.hook}")
            disposer = method(fn) if op.hook == "result" else method(fn, prepend=op.prepend)
        else:
            raise ValueError(f"unknown contribution kind {op.kind!r}")
        self.disposers[op.id] = disposer

    def _forget(self, op_id: int) -> Disposer | None:
        disposer = self.disposers.pop(op_id, None)
        self.blobs.pop(op_id, None)
        self.executors.pop(op_id, None)
        owner = self.owners.pop(op_id, None)
        key = self.keys.pop(owner, None) if owner is not None else None
        if key is not None and self.on_forget is not None:
            self.on_forget(key)
        return disposer

    def remove(self, op_id: int) -> None:
        """Undo one contribution (idempotent)."""
        disposer = self._forget(op_id)
        if disposer is not None:
            disposer()

    def swap(self, old_id: int, op: Op) -> None:
        """Replace registration ``old_id`` by ``op`` in one change event (``replace=True``)."""
        self._forget(old_id)  # the core's replace lifts the old registration itself
        self.apply(op, replace=True)

    def dispose_scope(self, key: str, op_ids: list[int] | tuple[int, ...]) -> None:
        """Forget scope ``key``: its contributions unwind and the core drops the scope."""
        for op_id in sorted(op_ids, reverse=True):
            self.remove(op_id)
        if self.has_scope(key):
            self.registry.scope(key).dispose()

    def has_scope(self, key: str) -> bool:
        """Whether the core registry knows scope ``key``."""
        return has_scope(self.registry, key)

    def parent_of(self, key: str) -> str | None:
        """The parent of scope ``key``."""
        return scope_parent(self.registry, key)

    def scope_count(self) -> int:
        """How many scopes the core registry holds."""
        return self.registry.stats().scopes

    def op_id_of(self, definition: Any) -> int | None:
        """The contribution id of a registered definition (``None`` for ``run_code``)."""
        key = self.keys.get(id(definition))
        return _op_id(key) if key is not None else None

    def is_custom_executor(self, executor: Any) -> bool:
        """Whether ``executor`` came from a ``set_executor()`` contribution."""
        return any(executor is e for e in self.executors.values())

    def key_of(self, definition: Any) -> tuple[str, bytes] | None:
        """The worker cache key and blob of a registered tool's or environment's definition."""
        key = self.keys.get(id(definition))
        if key is None:
            return None
        return key, self.blobs[_op_id(key)]
