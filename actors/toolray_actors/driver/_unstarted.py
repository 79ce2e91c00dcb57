"""The driver's side of the ledger: did a batch start on the actor that died under it?

See ``toolray_actors._ledger``. A ready executor tells each driver where its ledger is
(:class:`LedgerRef`); every batch sent without a reservation carries a :class:`Ticket`;
after the actor's death :func:`never_started` reads the ledger (here, or by a small task on
the actor's node) and answers ``True`` only when the batch provably never started.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

from toolray_actors._handles import read_ledger_on
from toolray_actors._ledger import DRIVER, highest
from toolray_actors._remote import Handle, node_id

__all__ = ("LedgerRef", "Ready", "Ticket", "never_started")

_WAIT_S = 5.0
"""How long a read waits for the dead actor's process to be gone (its ledger's lock free)."""


@dataclass(frozen=True, slots=True)
class LedgerRef:
    """Where a ready executor actor keeps this driver's slot."""

    path: str
    node: str

    @classmethod
    def of(cls, ready: Mapping[str, object]) -> LedgerRef | None:
        """From the actor's ``ready()`` answer; ``None`` if it keeps no ledger for us."""
        path, node = ready.get("ledger"), ready.get("node")
        if isinstance(path, str) and isinstance(node, str):
            return cls(path, node)
        return None


@dataclass(frozen=True, slots=True)
class Ready:
    """An executor actor known ready, with its ledger (``None``: batches reserve first)."""

    actor: Handle
    ledger: LedgerRef | None


@dataclass(frozen=True, slots=True)
class Ticket:
    """A batch's number in its actor's ledger."""

    ledger: LedgerRef
    number: int


async def never_started(ticket: Ticket) -> bool:
    """Whether the batch ``ticket`` provably never started on its (dead) actor."""
    ref = ticket.ledger
    top: int | None
    try:
        top = await asyncio.to_thread(highest, ref.path, DRIVER, _WAIT_S)
    except FileNotFoundError:  # not on this node's disk: asked on the actor's node
        if ref.node == node_id():
            return False
        try:
            top = await asyncio.wait_for(
                read_ledger_on(ref.node, ref.path, DRIVER, _WAIT_S), _WAIT_S + 5.0
            )
        except Exception:  # the node is gone, or did not answer: it may have started
            return False
    return top is not None and top < ticket.number
