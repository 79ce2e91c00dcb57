"""The registry's persisted state in Ray's internal KV (it lives in the GCS).

One key per live contribution (``toolray:<ns>:op:<id>``) and one small ``meta`` key, so a
write costs one small put instead of re-pickling every contribution; a disposed scope's
operations leave the store with it. ``tombstone`` marks a namespace that was torn down, so
other drivers learn why their calls fail instead of silently recreating an empty one.
"""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

__all__ = ("Store",)


def _kv() -> Any:
    from ray.experimental import internal_kv

    return internal_kv


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
    def load(self) -> tuple[dict[str, Any] | None, list[Any]]:
        """``(meta, ops in id order)``; ``meta`` is ``None`` for a new namespace."""
        kv = _kv()
        raw = kv._internal_kv_get(self._key("meta"))
        meta = pickle.loads(raw) if raw else None
        keys = sorted(kv._internal_kv_list(self._key("op:")))
        ops = []
        for key in keys:
            blob = kv._internal_kv_get(key)
            if blob:
                ops.append(pickle.loads(blob))
        return meta, ops

    def put_meta(self, meta: dict[str, Any]) -> None:
        """Replace the meta record (sequence, ids, executors, leases, restarts)."""
        _kv()._internal_kv_put(self._key("meta"), pickle.dumps(meta), overwrite=True)

    def put_op(self, op: Any) -> None:
        """Persist one contribution."""
        _kv()._internal_kv_put(self._key(self._op_suffix(op.id)), pickle.dumps(op), overwrite=True)

    def del_op(self, op_id: int) -> None:
        """Forget one contribution."""
        _kv()._internal_kv_del(self._key(self._op_suffix(op_id)))

    def forget(self) -> None:
        """Forget everything of the namespace (its meta and every contribution)."""
        kv = _kv()
        kv._internal_kv_del(self._key("op:"), del_by_prefix=True)
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

    # ------------------------------------------------------------------ async
    async def a_put_meta(self, meta: dict[str, Any]) -> None:
        """:meth:`put_meta` off the actor's loop."""
        await asyncio.to_thread(self.put_meta, meta)

    async def a_put_op(self, op: Any) -> None:
        """:meth:`put_op` off the actor's loop."""
        await asyncio.to_thread(self.put_op, op)

    async def a_del_op(self, op_id: int) -> None:
        """:meth:`del_op` off the actor's loop."""
        await asyncio.to_thread(self.del_op, op_id)
