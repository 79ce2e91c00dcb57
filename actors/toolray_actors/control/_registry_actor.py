"""``RegistryActor``: the authoritative registry of a namespace, and its lifetime.

It validates every write by applying it to its own core ``ToolRegistry`` (so errors and
messages are the core's), records the contribution as an :class:`Op`, persists it (one KV
key per contribution, see ``_store``), and returns only after every executor actor has
applied the change to its mirror — a call that starts after a write returns sees it
(writes are serialized: executors receive changes in sequence order).

Registration is idempotent: an identical definition (same fingerprint) under a live name
in the same layer adds a holder instead of failing, and the registration stays until every
holder has disposed it. It owns the namespace's leases (``_leases``): when the last lease
of a non-detached namespace ends, it stops every actor of the namespace and exits.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import replace
from typing import Any

from toolray import RegistryStatistics, ToolPromptSection
from toolray_actors._collector import pace_collector
from toolray_actors._config import RuntimeConfig
from toolray_actors._errors import RuntimeUnavailableError
from toolray_actors._executor_wire import ExecutorStats
from toolray_actors._handles import executor_name, get_named, kill_self
from toolray_actors._mirror import Mirror, Op
from toolray_actors._remote import freeze, owner_alive, thaw
from toolray_actors._stats import ActorStats, actor_stats
from toolray_actors._toolset import RemoteToolSet
from toolray_actors._wire import (
    Added,
    DefinitionBlob,
    ExecutionSnapshot,
    RegistryChange,
    Removed,
    ScopeDisposed,
    Swapped,
)
from toolray_actors.execution._code_pool import CodePool, code_registry

from ._ending import stop_namespace
from ._fanout import Fanout
from ._index import Contributions
from ._leases import WATCH_EVERY_S, LeaseTable
from ._registry_reads import RegistryReader
from ._retired import Retired
from ._store import Meta, RegistryInfo, Store

__all__ = ("RegistryActor",)

_log = logging.getLogger("toolray")


class RegistryActor:
    """The namespace's registry state, fanned out to executors; ``reads`` answers its reads."""

    def __init__(
        self,
        namespace: str,
        detached: bool = False,
        per_scope: bool = True,
        config: dict[str, Any] | None = None,
    ) -> None:
        pace_collector()
        self.namespace = namespace
        self.detached = detached
        self.per_scope = per_scope
        self.store = Store(namespace)
        cfg = RuntimeConfig.model_validate(config or {})
        self.mirror = Mirror(code_registry(cfg, CodePool(cfg.code)))  # the executors' mode and cap
        self.contributions = Contributions()
        self.next_id = 1
        self.restarts = 0
        self.leases = LeaseTable(thaw=thaw)
        self.fanout = Fanout(namespace)
        self._lock = asyncio.Lock()
        self._watcher: asyncio.Task[None] | None = None
        self._ending = False
        self.reads = RegistryReader(self.mirror)
        self.exited = Retired()  # what exited executors counted (not persisted)
        self._restore()
        self.reads.count_changes()
        if self.leases.leases:  # restarted: keep judging the restored leases (a loop runs here)
            self._watch()

    # ------------------------------------------------------------------ persistence
    def _meta(self) -> Meta:
        return {
            "next_id": self.next_id,
            "seq": self.fanout.seq,
            "executors": sorted(self.fanout.executors),
            "restarts": self.restarts,
            "leases": self.leases.snapshot(),
            "detached": self.detached,
            "changes": self.reads.changes,
        }

    def _restore(self) -> None:
        """Replay the persisted state (the change count included)."""
        meta, ops = self.store.load()
        if meta is None:
            return
        for op in ops:
            try:
                self.mirror.apply(op)
                self.contributions.record(op)
            except Exception:
                _log.debug("toolray: could not restore contribution %s", op.id, exc_info=True)
        self.next_id = meta["next_id"]
        self.fanout.seq = meta["seq"] + 1  # executors resync on the gap
        self.restarts = meta.get("restarts", 0) + 1
        self.leases = LeaseTable(list(meta.get("leases", [])), thaw)
        for name in meta["executors"]:
            handle = get_named(name, self.namespace)
            if handle is not None:
                self.fanout.executors[name] = handle
        self.reads.changes = int(meta.get("changes", 0))
        self.store.put_meta(self._meta())

    async def _save_meta(self) -> None:
        await self.store.a_put_meta(self._meta())

    async def _publish(self, delta: RegistryChange) -> int:
        """Queue a change for every executor (under the lock); await ``fanout.wait`` after."""
        seq = self.fanout.publish(delta)
        await self._save_meta()
        return seq

    # ------------------------------------------------------------------ leases
    def _watch(self) -> None:
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.ensure_future(self._watch_leases())

    async def acquire_lease(
        self, lease_id: str, job_id: str, pid: int, host: str, anchor: list[object] | None = None
    ) -> int:
        """Hold the namespace for one runtime (``anchor``: ``[an object its driver owns]``)."""
        if self._ending:
            raise RuntimeUnavailableError(f"namespace {self.namespace!r} is ending")
        self._watch()
        async with self._lock:
            held = self.leases.acquire(lease_id, job_id, pid, host, freeze(anchor))
            await self._save_meta()
        await asyncio.to_thread(self.store.clear_tombstone)
        return held

    async def release_lease(self, lease_id: str) -> bool:
        """Let go; ``True`` if that ended a non-detached namespace (everything stops)."""
        async with self._lock:
            left = self.leases.release(lease_id)
            await self._save_meta()
        if left == 0 and not self.detached:
            await self._end("its last runtime shut down", forget=True)
            return True
        return False

    async def _watch_leases(self) -> None:
        while not self._ending:
            await asyncio.sleep(WATCH_EVERY_S)
            if not (dead := await self.leases.dead(owner_alive, WATCH_EVERY_S)):
                continue
            async with self._lock:
                self.leases.drop(dead)
                await self._save_meta()
            if not self.leases.leases and not self.detached:
                await self._end("every driver holding it exited", forget=True)
                return

    async def teardown(self) -> bool:
        """Stop every actor of the namespace for everyone and forget its state."""
        await self._end("it was torn down (rt.teardown())", forget=True)
        return True

    async def _end(self, why: str, *, forget: bool) -> None:
        self._ending = True
        async with self._lock:
            await stop_namespace(self.namespace)
            self.fanout.executors.clear()
            if forget:
                await asyncio.to_thread(self.store.forget)
                await asyncio.to_thread(self.store.tombstone, why)
        # Exit after this reply has left (the caller must not see our death).
        asyncio.get_running_loop().call_later(0.2, kill_self)

    # ------------------------------------------------------------------ writes
    async def apply(self, op: Op) -> int:
        """Validate and record one contribution; returns its id (idempotent registration)."""
        op_id, seq = await self._apply(op)
        await self.fanout.wait(seq)
        return op_id

    async def _apply(self, op: Op) -> tuple[int, int]:
        async with self._lock:
            if op.kind in ("register", "environment"):
                live = self.contributions.live_registration(op)
                if live is not None and op.replace:
                    return await self._swap(live, op)
                if live is not None and live.fingerprint == op.fingerprint:
                    held = replace(live, holders=live.holders + 1)
                    self.contributions.ops[live.id] = held
                    await self.store.a_put_op(held)
                    return live.id, self.fanout.seq  # its change may still be on its way
            op = replace(op, id=self.next_id, replace=False)
            try:
                self.mirror.apply(op)  # raises the core's error, leaving nothing behind
            except ValueError as err:
                if op.kind == "register" and "already registered" in str(err):
                    raise ValueError(f"{err}; pass replace=True to swap it") from None
                raise
            self.next_id += 1
            self.contributions.record(op)
            await self.store.a_put_op(op)
            return op.id, await self._publish(Added(op))

    async def _swap(self, live: Op, op: Op) -> tuple[int, int]:
        new = replace(op, id=self.next_id, replace=False)
        self.mirror.swap(live.id, new)
        self.next_id += 1
        self.contributions.forget(live.id)
        self.contributions.record(new)
        await self.store.a_del_op(live.id)
        await self.store.a_put_op(new)
        return new.id, await self._publish(Swapped(live.id, new))

    async def ensure_scope(self, key: str, parent: str | None) -> str | None:
        """Create a scope (and its chain) if new; its parent (a conflicting one: ValueError)."""
        async with self._lock:
            reg = self.mirror.registry
            known = self.mirror.has_scope(key)
            reg.scope(key, parent=parent)
            seq = self.fanout.seq  # a known scope's change may still be on its way
            for k in () if known else reg.chain(key):  # new ancestors get scope ops too
                if k in self.contributions.index.scopes:
                    continue
                op = Op(id=self.next_id, kind="scope", key=k, parent=self.mirror.parent_of(k))
                self.next_id += 1
                self.contributions.record(op)
                await self.store.a_put_op(op)
                seq = await self._publish(Added(op))
            found = self.mirror.parent_of(key)
        await self.fanout.wait(seq)  # the last change: the earlier ones went out before it
        return found

    async def dispose(self, op_id: int) -> bool:
        """Drop one holder of a contribution; ``False`` if it was already gone."""
        async with self._lock:
            op = self.contributions.ops.get(op_id)
            if op is None:
                return False
            if op.holders > 1:
                held = replace(op, holders=op.holders - 1)
                self.contributions.ops[op_id] = held
                await self.store.a_put_op(held)
                return True
            self.contributions.forget(op_id)
            self.mirror.remove(op_id)
            await self.store.a_del_op(op_id)
            seq = await self._publish(Removed(op_id))
        await self.fanout.wait(seq)
        return True

    async def dispose_scope(self, key: str) -> int:
        """Lift everything contributed through ``key`` and forget the scope itself."""
        async with self._lock:
            owned = sorted(self.contributions.index.by_key.get(key, ()))
            for op_id in owned:
                self.contributions.forget(op_id)
                await self.store.a_del_op(op_id)
            self.mirror.dispose_scope(key, owned)
            seq = await self._publish(ScopeDisposed(key, tuple(owned)))
        await self.fanout.wait(seq)
        if self.per_scope:  # a disposed scope's own executor exits (what it counted stays)
            await self.exited.end(executor_name(key), self.fanout.executors, self.namespace)
        return len(owned)

    # ------------------------------------------------------------------ executors
    async def attach_executor(self, name: str) -> tuple[int, list[Op]]:
        """Register an executor for invalidations; returns the full state to mirror."""
        async with self._lock:
            handle = get_named(name, self.namespace)
            if handle is not None:
                self.fanout.executors[name] = handle
                await self._save_meta()
            return self.fanout.seq, list(self.contributions.ops.values())

    async def detach_executor(self, name: str) -> None:
        """Stop sending invalidations to ``name``."""
        async with self._lock:
            self.fanout.executors.pop(name, None)
            await self._save_meta()

    async def retire_executor(self, last: ExecutorStats) -> None:
        """An executor exiting on its own: keep what it counted (totals never go back)."""
        self.exited.add(last)

    async def retired(self) -> ExecutorStats:
        """What every exited executor of the namespace counted, as one record."""
        return self.exited.total

    async def snapshot(self) -> tuple[int, list[Op]]:
        """The sequence number and every live contribution, in order.

        Lock-free on purpose: an executor resyncing inside ``apply_changes`` calls it while a
        write holds the lock and awaits that very executor.
        """
        return self.fanout.seq, list(self.contributions.ops.values())

    # ------------------------------------------------------------------ reads and counters
    async def prompt_sections(self, scope: str | None) -> list[ToolPromptSection]:
        """Code Mode's prompt sections for the scope (R-SCH-15)."""
        return self.mirror.registry.prompt_sections(scope)

    async def info(self) -> RegistryInfo:
        """Counters: contributions, sequence, executors, restarts, leases."""
        return {
            "contributions": len(self.contributions.ops),
            "seq": self.fanout.seq,
            "executors": sorted(self.fanout.executors),
            "restarts": self.restarts,
            "leases": len(self.leases.leases),
            "scopes": self.mirror.scope_count(),
            "changes": self.reads.changes,
            "pid": os.getpid(),
        }

    async def actor_stats(self) -> ActorStats:
        """This actor's identity and footprint (``scopes``: the scopes it knows)."""
        return actor_stats("registry", "toolray:registry", self.mirror.scope_count())

    async def ping(self) -> bool:
        """Liveness (and starts the lease watchdog)."""
        self._watch()
        return True

    # ------------------------------------------------------------------ reads (``reads``'s)
    async def change_count(self) -> int:
        """How many changes the registry has committed (it survives restarts)."""
        return await self.reads.change_count()

    async def wait_changes(self, seen: int, timeout_s: float) -> int:
        """The change count, once it differs from ``seen`` (or after ``timeout_s``)."""
        return await self.reads.wait_changes(seen, timeout_s)

    async def read_get(
        self, name: str, scope: str | None, tool_set: RemoteToolSet | None = None
    ) -> DefinitionBlob:
        """``get(name, scope, tool_set)``: the definition's blob, or ``None``."""
        return await self.reads.read_get(name, scope, tool_set)

    async def read_executable(
        self, name: str, scope: str | None, tool_set: RemoteToolSet | None = None
    ) -> DefinitionBlob:
        """``executable(name, scope, tool_set)``: the definition's blob, or ``None``."""
        return await self.reads.read_executable(name, scope, tool_set)

    async def read_definitions(
        self, scope: str | None, tool_set: RemoteToolSet | None = None
    ) -> list[DefinitionBlob]:
        """``definitions(scope, tool_set)``: blobs in view order."""
        return await self.reads.read_definitions(scope, tool_set)

    async def tool_set_view(self, tool_set: RemoteToolSet) -> list[tuple[str, DefinitionBlob]]:
        """``tool_set.view(tool_set.scope)``: ``(name, blob)`` in view order."""
        return await self.reads.tool_set_view(tool_set)

    async def schemas(
        self, scope: str | None, tool_set: RemoteToolSet | None = None
    ) -> list[dict[str, Any]]:
        """``schemas(scope, tool_set)`` of the authoritative registry."""
        return await self.reads.schemas(scope, tool_set)

    async def names(self, scope: str | None, tool_set: RemoteToolSet | None = None) -> list[str]:
        """Visible capability names, in view order."""
        return await self.reads.names(scope, tool_set)

    async def known_names(self, scope: str | None) -> list[str]:
        """R-SCH-11 known names for the scope."""
        return await self.reads.known_names(scope)

    async def execution_mode(
        self,
        name: str,
        arguments: object,
        scope: str | None,
        tool_set: RemoteToolSet | None,
        nested: bool,
    ) -> str:
        """``execution_mode`` of one call, classified by the registered definition here."""
        return await self.reads.execution_mode(name, arguments, scope, tool_set, nested)

    async def check_guards(self, snapshot: ExecutionSnapshot) -> str | None:
        """``check_guards`` over an execution rebuilt from ``snapshot`` (guards run here)."""
        return await self.reads.check_guards(snapshot)

    async def statistics(self) -> RegistryStatistics:
        """The authoritative registry's ``RegistryStatistics``."""
        return await self.reads.statistics()
