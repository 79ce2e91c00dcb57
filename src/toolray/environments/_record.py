"""One registry's instance records, the table that holds them, and the errors they end in."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolray._json import snapshot_json, thaw_json
from toolray.errors import EnvironmentFailedError, EnvironmentLostError, NotJsonError

from ._backend import InstanceRef, Parked
from ._definition import EnvironmentDefinition, EnvironmentState, EnvironmentStatus
from ._turns import Turnstile

__all__ = (
    "ForkOut",
    "Instance",
    "InstanceCounts",
    "Table",
    "failed_error",
    "guarded",
    "json_config",
    "lost_error",
    "new_iid",
)

_serials = itertools.count(1)
_PROCESS = uuid.uuid4().hex[:12]
"""This process's part of every instance id it makes (ids meet on shared workers)."""

_ECHO = 200
"""Every echo of an environment's own text is cut to this many characters."""


def _cut(text: str) -> str:
    return text if len(text) <= _ECHO else text[: _ECHO - 1] + "…"


def failed_error(name: str, doing: str, err: BaseException) -> EnvironmentFailedError:
    """``ENVIRONMENT_FAILED``: the environment's own ``doing`` raised ``err``."""
    if isinstance(err, EnvironmentFailedError):
        return err
    cause = _cut(str(err) or type(err).__name__)
    return EnvironmentFailedError(f'environment "{name}": {doing} failed: {cause}')


def lost_error(name: str, why: str) -> EnvironmentLostError:
    """``ENVIRONMENT_LOST`` with the reason, saying that only ``open()`` brings it back."""
    return EnvironmentLostError(
        f'environment "{name}" was lost ({_cut(why)}); it stays lost until it is opened again'
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ForkOut:
    """A fork's copy: snapshot bytes or a live instance, its definition and its new id."""

    definition: EnvironmentDefinition
    value: Any
    iid: str


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceCounts:
    """A registry's (or an executor's) instances by state, and its lifecycle events so far."""

    open: int = 0
    parked: int = 0
    lost: int = 0
    opens: int = 0
    parks: int = 0
    restores: int = 0
    forks: int = 0
    losses: int = 0


@dataclass(eq=False, slots=True)
class Instance:
    """One (scope, name): its turns, its state, where it lives and what it has done."""

    scope: str | None
    name: str
    turns: Turnstile = field(default_factory=Turnstile)
    state: EnvironmentState = "closed"
    definition: EnvironmentDefinition | None = None
    placed: Any = None
    parked: Parked | None = None
    iid: str = ""
    calls: int = 0
    opened_at: float | None = None
    last_call_at: float | None = None
    idle_since: float = 0.0
    size: int | None = None
    lost_why: str = ""
    unparkable: bool = False

    def opened(self, definition: EnvironmentDefinition, placed: Any, now: float) -> None:
        """It is a new instance of ``definition``, living at ``placed`` (``now``: its clock)."""
        self.definition, self.placed, self.parked = definition, placed, None
        self.state, self.lost_why, self.unparkable = "open", "", False
        self.calls, self.size = 0, None
        self.opened_at, self.last_call_at = time.time(), None
        self.idle_since = now

    def used(self, now: float, *, call: bool) -> None:
        """A call (or another use) ended: it is idle from ``now`` (its clock)."""
        if call:
            self.calls += 1
            self.last_call_at = time.time()
        self.idle_since = now

    def ref(self) -> InstanceRef:
        """Its identity as a backend sees it."""
        return InstanceRef(scope=self.scope, name=self.name, iid=self.iid)

    def park_due(self) -> float | None:
        """When it parks if it stays idle (``None``: it never parks as it is)."""
        definition = self.definition
        if self.state != "open" or self.unparkable or definition is None:
            return None
        after = definition.park_after_s
        return None if after is None else self.idle_since + after

    def status(self, where: Callable[[Any], tuple[str | None, int | None]]) -> EnvironmentStatus:
        """Its :class:`EnvironmentStatus` (``where`` locates a live one)."""
        node = pid = None
        if self.state == "open" and self.placed is not None:
            node, pid = where(self.placed)
        return EnvironmentStatus(
            name=self.name,
            scope=self.scope,
            state=self.state,
            node=node,
            pid=pid,
            calls=self.calls,
            opened_at=self.opened_at,
            last_call_at=self.last_call_at,
            bytes=self.parked.size if self.parked is not None else self.size,
        )


class Table:
    """The records by (scope, name), shared by every loop and thread of a registry."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[tuple[str | None, str], Instance] = {}

    def get(self, scope: str | None, name: str) -> Instance | None:
        """The record of ``(scope, name)``, if there is one."""
        with self._lock:
            return self._rows.get((scope, name))

    def at(self, scope: str | None, name: str) -> Instance:
        """The record of ``(scope, name)``, made (closed) on first use."""
        with self._lock:
            inst = self._rows.get((scope, name))
            if inst is None:
                inst = self._rows[(scope, name)] = Instance(scope, name)
            return inst

    def forget_if_idle(self, inst: Instance) -> None:
        """Drop a closed record that nothing holds or waits for."""
        with self._lock:
            key = (inst.scope, inst.name)
            if inst.state == "closed" and not inst.turns.busy and self._rows.get(key) is inst:
                del self._rows[key]

    def live(self, scope: Any = ...) -> list[Instance]:
        """Every record not closed (of ``scope`` only, when given)."""
        with self._lock:
            return [
                i
                for (s, _), i in self._rows.items()
                if i.state != "closed" and (scope is ... or s == scope)
            ]

    def next_park_at(self) -> float | None:
        """When the first live instance is due to park, if any may."""
        return min(filter(None, (i.park_due() for i in self.live())), default=None)

    def due(self, now: float) -> list[Instance]:
        """The instances due to park at ``now``."""
        return [i for i in self.live() if (at := i.park_due()) is not None and at <= now]

    def abandon(self, scope: str | None) -> list[Any]:
        """Mark ``scope``'s records closed as they are; the live handles they held."""
        found = []
        for inst in self.live(scope):
            if inst.state == "open":
                found.append(inst.placed)
            inst.state, inst.placed, inst.parked = "closed", None, None
            self.forget_if_idle(inst)
        return found


def new_iid(name: str) -> str:
    """A new instance id, unique across processes (executors share workers)."""
    return f"{name}#{_PROCESS}.{next(_serials)}"


async def guarded(name: str, doing: str, work: Any) -> Any:
    """Await an environment's own code: its failure is ``ENVIRONMENT_FAILED``."""
    try:
        return await work
    except (EnvironmentLostError, EnvironmentFailedError):
        raise
    except Exception as err:
        raise failed_error(name, doing, err) from None


def json_config(name: str, config: Any) -> Any:
    """A config as ``create`` gets it: lossless JSON, as a fresh mutable copy."""
    try:
        return thaw_json(snapshot_json(config, "config"))
    except NotJsonError as err:
        raise TypeError(f'environment "{name}": open() takes a JSON config: {err}') from None
