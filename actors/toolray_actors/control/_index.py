"""The registry actor's index of live contributions: what its writes look up in O(1)."""

from __future__ import annotations

from toolray_actors._mirror import Op

__all__ = ("Contributions", "OpIndex")


_REGISTERED = ("register", "environment")


def _named(op: Op) -> tuple[str | None, str | None]:
    """Where a named registration sits: a tool's name, or an environment's (apart)."""
    return (op.key, op.name if op.kind == "register" else f"\0environment:{op.name}")


class OpIndex:
    """Lookups the writes need in O(1): live registrations, scope ops, ops per layer."""

    def __init__(self) -> None:
        self.registrations: dict[tuple[str | None, str | None], int] = {}
        self.scopes: set[str] = set()
        self.by_key: dict[str | None, set[int]] = {}

    def add(self, op: Op) -> None:
        if op.kind in _REGISTERED:
            self.registrations[_named(op)] = op.id
        elif op.kind == "scope" and op.key is not None:
            self.scopes.add(op.key)
        self.by_key.setdefault(op.key, set()).add(op.id)

    def remove(self, op: Op) -> None:
        if op.kind in _REGISTERED and self.registrations.get(_named(op)) == op.id:
            del self.registrations[_named(op)]
        elif op.kind == "scope" and op.key is not None:
            self.scopes.discard(op.key)
        ids = self.by_key.get(op.key)
        if ids is not None:
            ids.discard(op.id)
            if not ids:
                del self.by_key[op.key]


class Contributions:
    """The live contributions by id, and their index."""

    def __init__(self) -> None:
        self.ops: dict[int, Op] = {}
        self.index = OpIndex()

    def live_registration(self, op: Op) -> Op | None:
        """The live registration of ``op``'s name in ``op``'s layer, if any."""
        op_id = self.index.registrations.get(_named(op))
        return self.ops.get(op_id) if op_id is not None else None

    def record(self, op: Op) -> None:
        """Add (or update) ``op``."""
        self.ops[op.id] = op
        self.index.add(op)

    def forget(self, op_id: int) -> Op | None:
        """Remove the contribution ``op_id``; it, or ``None``."""
        op = self.ops.pop(op_id, None)
        if op is not None:
            self.index.remove(op)
        return op
