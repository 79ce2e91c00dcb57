"""A worker's environment instances, whichever its isolation (a ``ToolWorker`` component).

``ToolWorker`` holds it for its ``env_*`` methods and for the calls that name an instance.

A call of an environment's tool carries its instance's id in its identity
(``ident["instance"]``): with ``isolation="call"`` it runs in that instance's process
(:class:`~._env_host.ProcessInstances`), with ``"shared"`` in this worker, the state taken
from :class:`~._env_shared.SharedInstances`. The cancellation ladder reaches such a call
here first: with ``"call"``, its last step kills the instance's process (the instance is
lost with it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from toolray.isolation import AbortCall, CallOutcome, InterruptCall

from ._children import CallProcesses
from ._env_host import Nested, ProcessInstances
from ._env_shared import SharedInstances

__all__ = ("WorkerEnvironments", "instance_of")

Run = Callable[[str, str, bytes | None, object, Mapping[str, object]], Awaitable[CallOutcome]]


def instance_of(ident: Mapping[str, object]) -> str | None:
    """The instance a call's identity names (``None``: a call of no environment)."""
    iid = ident.get("instance")
    return str(iid) if iid is not None else None


_NO_SANDBOX = (
    'environments do not run on an isolation="sandbox" pool: place the environment on a'
    ' pool with isolation "call" (its instance in a process of its own) or "shared"'
)


class WorkerEnvironments:
    """The instances of one worker: in processes of their own, or in its memory."""

    def __init__(self, processes: ProcessInstances | None, refusal: str = "") -> None:
        self.processes = processes
        self.shared = SharedInstances() if processes is None else None
        self.refusal = refusal
        """Why this worker opens no instance (``""``: it opens them)."""

    @classmethod
    def of(cls, procs: CallProcesses | None, memory_mb: int, nested: Nested) -> WorkerEnvironments:
        """For a worker with call processes ``procs`` (``None``: shared isolation)."""
        if procs is None:
            return cls(None)
        if procs.code.sandbox is not None:
            return cls(None, _NO_SANDBOX)
        return cls(ProcessInstances(procs.code, memory_mb=memory_mb, nested=nested))

    def __len__(self) -> int:
        return len(self._held())

    def _held(self) -> ProcessInstances | SharedInstances:
        held = self.processes if self.processes is not None else self.shared
        assert held is not None
        return held

    def counts(self) -> tuple[int, int, int]:
        """``(live, opened so far, lost so far)``."""
        held = self._held()
        return len(held), held.opened, held.lost

    def pids(self) -> tuple[int, ...]:
        """The instances' processes (``"call"`` isolation)."""
        return self.processes.pids() if self.processes is not None else ()

    def environment_of(self, ident: Mapping[str, object]) -> object:
        """What a shared-isolation body of this call sees as ``ctx.environment``."""
        iid = instance_of(ident)
        if iid is None or self.shared is None:
            return None
        return self.shared.state_of(iid)

    async def run(
        self,
        iid: str,
        token: str,
        key: str,
        blob: bytes | None,
        arguments: object,
        ident: Mapping[str, object],
        shared: Run,
    ) -> CallOutcome:
        """One call of instance ``iid`` (``shared`` runs a body in this worker)."""
        if self.processes is not None:
            return await self.processes.run(iid, token, key, blob, arguments, ident)
        assert self.shared is not None
        if not self.shared.has(iid):
            return CallOutcome(status="lost", detail="the worker holds no such instance")
        return await shared(token, key, blob, arguments, ident)

    # ------------------------------------------------------------------ the instances' verbs
    async def open(
        self, iid: str, key: str, blob: bytes, config: object, snapshot: bytes | None
    ) -> int:
        """Open (or restore) an instance here; the pid holding it."""
        if self.refusal:
            raise ValueError(self.refusal)
        held = self._held()
        return await held.open(iid, key, blob, config, snapshot)

    async def operate(self, iid: str, op: str, data: bytes | None) -> bytes | None:
        """``snapshot`` / ``run`` / ``park`` / ``close`` on an instance here."""
        held = self._held()
        return await held.operate(iid, op, data)

    async def fork(self, iid: str, new_iid: str, how: str) -> int:
        """A copy of an instance here; the pid holding it."""
        held = self._held()
        return await held.fork(iid, new_iid, how)

    async def discard(self, iid: str) -> None:
        """Free what is left of an instance."""
        held = self._held()
        await held.discard(iid)

    # ------------------------------------------------------------------ control lane
    def abort(
        self, token: str, reason: object, interrupt_after: float | None, kill_after: float | None
    ) -> bool | None:
        """The ladder for a call of an instance's process (``None``: not one of them)."""
        procs = self.processes
        if procs is None or not procs.owns(token):
            return None
        found = procs.abort(token, AbortCall(token=token, reason=reason))
        if kill_after is not None:
            loop = asyncio.get_running_loop()
            if interrupt_after is not None:
                loop.call_later(interrupt_after, procs.abort, token, InterruptCall(token=token))
            loop.call_later(kill_after, procs.kill, token)
        return found

    def interrupt(self, token: str) -> str | None:
        """Interrupt such a call (``None``: not one of them)."""
        procs = self.processes
        if procs is None or not procs.owns(token):
            return None
        return "forwarded" if procs.abort(token, InterruptCall(token=token)) else "gone"

    def kill(self, token: str) -> bool | None:
        """Kill such a call's instance process (``None``: not one of them)."""
        procs = self.processes
        if procs is None or not procs.owns(token):
            return None
        return procs.kill(token)

    def close(self) -> None:
        """The worker is going: so are its instances."""
        if self.processes is not None:
            self.processes.close()
        elif self.shared is not None:
            self.shared.close()
