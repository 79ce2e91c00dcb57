"""The registry's persisted state in Ray's internal KV (it lives in the GCS).

One key per live contribution (``toolray:<ns>:op:<id>``) and one small ``meta`` key, so a
write costs one small put instead of re-pickling every contribution; a disposed scope's
operations leave the store with it. ``tombstone`` marks a namespace that was torn down, so
other drivers learn why their calls fail instead of silently recreating an empty one.
"""

from __future__ import annotations

import asyncio
import json
import pickle
from typing import TYPE_CHECKING, NotRequired, Protocol, TypedDict

if TYPE_CHECKING:
    from toolray_actors._mirror import Op

    from ._leases import Lease

__all__ = ("Meta", "RegistryInfo", "Store")


class Meta(TypedDict):
    """The namespace's small record: ids, the change sequence, executors, leases."""

    next_id: int
    seq: int
    executors: list[str]
    restarts: NotRequired[int]
    leases: NotRequired[list[Lease]]
    detached: bool
    changes: NotRequired[int]


class RegistryInfo(TypedDict):
    """The registry actor's counters (``RemoteRegistry.info()``)."""

    contributions: int
    seq: int
    executors: list[str]
    restarts: int
    leases: int
    scopes: int
    changes: int
    pid: int


class _KV(Protocol):
    """Ray's internal KV (``ray.experimental.internal_kv``), as the store uses it."""

    def _internal_kv_get(self, key: bytes) -> bytes | None: ...
    def _internal_kv_list(self, prefix: bytes) -> list[bytes]: ...
    def _internal_kv_put(self, key: bytes, value: bytes, overwrite: bool = ...) -> bool: ...
    def _internal_kv_del(self, key: bytes, *, del_by_prefix: bool = ...) -> int: ...


def _kv() -> _KV:
    from ray.experimental import internal_kv

    kv: _KV = internal_kv
    return kv


class Store:
    """Blocking KV calls, each also offered as a coroutine that runs in a thread."""

    def __init__(self, namespace: str) -> None:
        self.prefix = f"toolray:{namespace}:"

    def _key(self, suffix: str) -> bytes:
        return (self.prefix + suffix).encode()

    @staticmethod
    def _op_suffix(op_id: int) -> str:
        return f"op:{op_id:012d}"

    # ------------------------------------------------------------------ blocking
    def load(self) -> tuple[Meta | None, list[Op]]:
        """``(meta, ops in id order)``; ``meta`` is ``None`` for a new namespace."""
        kv = _kv()
        raw = kv._internal_kv_get(self._key("meta"))
        meta: Meta | None = pickle.loads(raw) if raw else None
        keys = sorted(kv._internal_kv_list(self._key("op:")))
        ops: list[Op] = []
        for key in keys:
            blob = kv._internal_kv_get(key)
            if blob:
                ops.append(pickle.loads(blob))
        return meta, ops

    def put_meta(self, meta: Meta) -> None:
        """Replace the meta record (sequence, ids, executors, leases, restarts)."""
        _kv()._internal_kv_put(self._key("meta"), pickle.dumps(meta), overwrite=True)

    def put_op(self, op: Op) -> None:
        """Persist one contribution."""
        _kv()._internal_kv_put(self._key(self._op_suffix(op.id)), pickle.dumps(op), overwrite=True)

    def del_op(self, op_id: int) -> None:
        """Forget one contribution."""
        _kv()._internal_kv_del(self._key(self._op_suffix(op_id)))

    def forget(self) -> None:
        """Forget everything of the namespace (its meta and every contribution)."""
        kv = _kv()
        kv._internal_kv_del(self._key("op:"), del_by_prefix=True)
        kv._internal_kv_del(self._key("env:"), del_by_prefix=True)
        kv._internal_kv_del(self._key("meta"))

    def tombstone(self, why: str) -> None:
        """Say why the namespace ended (read by drivers whose calls then fail)."""
        _kv()._internal_kv_put(self._key("tombstone"), why.encode(), overwrite=True)

    def read_tombstone(self) -> str | None:
        """Why the namespace ended, or ``None``."""
        raw = _kv()._internal_kv_get(self._key("tombstone"))
        return raw.decode() if raw else None

    def clear_tombstone(self) -> None:
        """A new start revives the namespace."""
        _kv()._internal_kv_del(self._key("tombstone"))

    def put_instance(self, executor: str, scope: str | None, name: str, where: bytes) -> None:
        """Executor actor ``executor`` holds ``scope``'s instance of ``name`` (``where``)."""
        _kv()._internal_kv_put(self._instance(executor, scope, name), where, overwrite=True)

    def del_instance(self, executor: str, scope: str | None, name: str) -> None:
        """It holds it no longer (closed)."""
        _kv()._internal_kv_del(self._instance(executor, scope, name))

    def instances(self, executor: str) -> list[tuple[str | None, str, bytes]]:
        """``(scope, name, where)`` of every instance ``executor``'s last incarnation held."""
        kv = _kv()
        prefix = self._key(f"env:{executor}:")
        found = []
        for key in kv._internal_kv_list(prefix):
            scope, name = json.loads(key[len(prefix) :])
            found.append((scope, str(name), kv._internal_kv_get(key) or b""))
        return found

    def _instance(self, executor: str, scope: str | None, name: str) -> bytes:
        return self._key(f"env:{executor}:{json.dumps([scope, name])}")

    # ------------------------------------------------------------------ async
    async def a_put_meta(self, meta: Meta) -> None:
        """:meth:`put_meta` off the actor's loop."""
        await asyncio.to_thread(self.put_meta, meta)

    async def a_put_op(self, op: Op) -> None:
        """:meth:`put_op` off the actor's loop."""
        await asyncio.to_thread(self.put_op, op)

    async def a_del_op(self, op_id: int) -> None:
        """:meth:`del_op` off the actor's loop."""
        await asyncio.to_thread(self.del_op, op_id)
