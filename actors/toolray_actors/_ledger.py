"""Which batches an executor actor started, readable after the actor's death.

A batch leaves the driver with no reservation ahead of it (one message: ``run_small_wire``,
``run_batch_wire``, or with the batches of its tick, ``run_batches_wire``). When the actor
dies before the batch's end, the driver must know whether the batch could have had an
effect: if it never started, it is sent again to a new actor (the caller sees nothing); if
it might have, its calls end ``EXECUTOR_LOST``. Ray's death error does not say which, so
the executor says it, in a small file on its node that outlives it:

- every driver numbers its batches (:func:`next_ticket`, rising in this process) and joins
  the actor's ledger when it first finds the actor ready (:meth:`Ledger.join`: a slot of 40
  bytes, its id and the highest ticket started, 0);
- the actor writes a batch's ticket into the driver's slot when the batch's first call
  starts (:class:`FirstCall`, the batch's own observer: before any call's hooks, guards,
  approval or body; before a custom executor runs the batch), one ``pwrite`` into the page
  cache (~2 µs): a ticket above the slot's value never started, nothing of it ran (a batch
  that started out of order makes an earlier one look started: it then ends
  ``EXECUTOR_LOST``, never twice);
- the actor holds an exclusive ``flock`` on the file for its life; :func:`highest` takes a
  shared lock first, so it reads only once the process is gone (a death Ray reported
  while the process still ran would otherwise race the read).

Anything unclear — no file, no slot, the lock not free in time, another node that cannot be
asked — counts as started: the call ends ``EXECUTOR_LOST``, as it would have before. A
ledger whose actor has been gone a minute is removed by an executor starting on the node
(:func:`sweep`).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from toolray.lowlevel import BatchStart, CallEnd, CallStart, Observer

__all__ = (
    "DRIVER",
    "FirstCall",
    "Ledger",
    "highest",
    "joined",
    "ledger_dir",
    "next_ticket",
    "stamp_of",
    "stamped",
    "sweep",
)

DRIVER = uuid.uuid4().hex
"""This process as a driver: the id of its slot in every ledger it joins (32 characters)."""

_tickets = itertools.count(1)

_ID = 32
_SLOT = _ID + 8
_MAX_SLOTS = 4096
"""Drivers one actor keeps a slot for (a 160 KiB file at most); later ones reserve instead."""

_STALE_S = 60.0


def next_ticket() -> int:
    """A number for a batch, above every one this process gave before."""
    return next(_tickets)


def ledger_dir() -> Path:
    """Where this node's ledgers live (one directory per user, under the temp directory)."""
    return Path(tempfile.gettempdir()) / f"toolray-ledgers-{os.getuid()}"


class Ledger:
    """The executor's side: the file it writes, locked for its life."""

    def __init__(self, actor_id: str) -> None:
        folder = ledger_dir()
        folder.mkdir(mode=0o700, exist_ok=True)
        self.path = folder / f"{actor_id}.ledger"
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._slots: dict[str, int] = {}
        self._top: dict[str, int] = {}

    @classmethod
    def open(cls, actor_id: str) -> Ledger | None:
        """The actor's ledger, or ``None`` where none can be kept (its drivers reserve)."""
        if not actor_id:
            return None
        try:
            ledger = cls(actor_id)
        except OSError:
            return None
        with contextlib.suppress(OSError):  # its own ledger is locked: never swept
            if _sweep_due(time.time()):
                sweep()
        return ledger

    def join(self, driver: str) -> bool:
        """Give ``driver`` a slot (idempotent); ``False`` if it cannot have one."""
        if driver in self._slots:
            return True
        if len(driver) != _ID or not driver.isascii() or len(self._slots) >= _MAX_SLOTS:
            return False
        slot = len(self._slots)
        os.pwrite(self._fd, driver.encode() + bytes(8), slot * _SLOT)
        self._slots[driver] = slot
        self._top[driver] = 0
        return True

    def started(self, driver: str, ticket: int) -> None:
        """``driver``'s batch ``ticket`` starts now (before anything of it runs)."""
        slot = self._slots.get(driver)
        if slot is not None and ticket > self._top[driver]:
            os.pwrite(self._fd, ticket.to_bytes(8, "little"), slot * _SLOT + _ID)
            self._top[driver] = ticket

    def close(self) -> None:
        """Stop keeping it (the actor exits); the file stays for drivers to read."""
        with contextlib.suppress(OSError):
            os.close(self._fd)


class FirstCall:
    """A batch's own observer: ``first()`` once, as its first call starts; else ``inner``'s.

    Observers hear of a call before its pre-execute stage, so ``first`` runs before anything
    of the call that others can see. ``inner`` is the batch's span recorder, if traced.
    """

    def __init__(self, first: Callable[[], None], inner: Observer | None = None) -> None:
        self._first: Callable[[], None] | None = first
        self._inner = inner

    @property
    def counts_only(self) -> bool:
        """Like a counter, it does not mind when calls start: a batch may still be chained."""
        return self._inner is None or bool(getattr(self._inner, "counts_only", False))

    def now(self) -> None:
        """Run ``first`` if it has not run (the batch goes where no observer hears it)."""
        first, self._first = self._first, None
        if first is not None:
            first()

    def batch_started(self, batch: BatchStart) -> object:
        return self._inner.batch_started(batch) if self._inner is not None else None

    def batch_ended(self, batch: object, error: BaseException | None) -> None:
        if self._inner is not None:
            self._inner.batch_ended(batch, error)

    def call_started(self, call: CallStart, parent: object) -> object:
        self.now()
        return self._inner.call_started(call, parent) if self._inner is not None else None

    def call_ended(self, call: object, end: CallEnd) -> None:
        if self._inner is not None:
            self._inner.call_ended(call, end)


def stamped(blob: bytes, driver: str, ticket: int) -> bytes:
    """A wire blob (a pickle) with ``driver``'s ``ticket`` after it (0: none).

    One Ray argument instead of three (each costs ~40 µs across): ``pickle.loads`` ignores
    what follows the pickle's end, and :func:`stamp_of` reads it back.
    """
    return blob + driver.encode().ljust(_ID, b"\0")[:_ID] + ticket.to_bytes(8, "little")


def stamp_of(blob: bytes) -> tuple[str, int] | None:
    """``(driver, ticket)`` that :func:`stamped` put after ``blob``'s pickle (``None``: 0)."""
    ticket = int.from_bytes(blob[-8:], "little")
    if not ticket:
        return None
    return blob[-_SLOT:-8].decode("ascii", "replace"), ticket


def joined(ledger: Ledger | None, driver: str) -> str | None:
    """Where ``driver``'s slot in ``ledger`` is kept (``None``: it has none, so it reserves)."""
    if ledger is None or not driver or not ledger.join(driver):
        return None
    return str(ledger.path)


def highest(path: str, driver: str, wait_s: float) -> int | None:
    """The highest ticket of ``driver`` the dead actor started; ``None`` if unknown.

    Blocks up to ``wait_s`` for the actor's process to be gone (its lock free). Raises
    ``FileNotFoundError`` if the ledger is not on this node's disk.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise
    except OSError:
        return None
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return None
                time.sleep(0.005)
        data = os.pread(fd, _SLOT * _MAX_SLOTS, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    wanted = driver.encode()
    for start in range(0, len(data) - _SLOT + 1, _SLOT):
        if data[start : start + _ID] == wanted:
            return int.from_bytes(data[start + _ID : start + _SLOT], "little")
    return None


def sweep(now: float | None = None) -> int:
    """Remove this node's ledgers whose actor has been gone a minute; how many.

    A ledger whose lock is free (its actor gone) gets a ``.gone`` mark the first time a sweep
    finds it; both go once the mark is a minute old. A driver reads a ledger within seconds
    of the death (after that Ray has told it the actor is dead, and it sends nothing there).
    """
    now = time.time() if now is None else now
    removed = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir(ledger_dir()):
            if not entry.name.endswith(".ledger"):
                continue
            with contextlib.suppress(OSError):
                removed += _sweep_one(Path(entry.path), now)
    return removed


def _sweep_due(now: float) -> bool:
    """At most one sweep a minute per node (every executor that starts asks)."""
    stamp = ledger_dir() / "swept"
    try:
        if now - stamp.stat().st_mtime < _STALE_S:
            return False
    except FileNotFoundError:
        stamp.touch()
    os.utime(stamp, (now, now))
    return True


def _sweep_one(path: Path, now: float) -> int:
    fd = os.open(path, os.O_RDONLY)
    mark = path.with_name(path.name + ".gone")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # its actor lives (a mark made as it was starting goes)
        mark.unlink(missing_ok=True)
        return 0
    finally:
        os.close(fd)
    try:
        if now - mark.stat().st_mtime < _STALE_S:
            return 0
    except FileNotFoundError:
        mark.touch()
        os.utime(mark, (now, now))
        return 0
    path.unlink()
    mark.unlink()
    return 1
