"""Conditional admission: ``resolve()`` and the step-owned ``ResolvedToolSet``.

``resolve`` evaluates every ``when`` on the scope's chain once, concurrently, observing the
step's signal; a raising condition or a cancellation publishes nothing. The set is a
snapshot of admission: the unconditional and the admitted conditional registrations that
existed at resolve time. Its view is recomputed against the live registry, so a registration
disposed, replaced by the same name or hidden by a new restriction drops out, and nothing
registered later is admitted.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from toolray._activation import ActivationContext
from toolray._definition import ToolDefinition
from toolray.errors import AbortError

from ._layers import Entry
from ._state import RegistryState

__all__ = ("ResolvedToolSet", "resolve_tool_set")


class ResolvedToolSet:
    """One step's admitted registrations for one scope.

    Not meant for subclassing by applications; a runtime that carries a set to another
    process (the Ray layer's ``RemoteToolSet``) subclasses it so that ``resolve()`` returns
    a ``ResolvedToolSet`` everywhere.
    """

    __slots__ = ("_admitted", "_cache", "_disposed", "_scope", "_state")

    def __init__(self, state: RegistryState, scope: str | None, admitted: set[int]) -> None:
        self._state = state
        self._scope = scope
        self._admitted = admitted
        self._disposed = False
        self._cache: tuple[int, dict[str, Entry]] | None = None

    @property
    def scope(self) -> str | None:
        """The scope the set was resolved for (it admits nothing for any other)."""
        return self._scope

    def entries(self, scope: str | None) -> dict[str, Entry]:
        """Admitted entries still visible in their original scope (empty for other scopes)."""
        if self._disposed or scope != self._scope:
            return {}
        state = self._state
        if self._cache is not None and self._cache[0] == state.epoch:
            return self._cache[1]
        admitted = self._admitted
        view = state.build(scope, lambda e: e.serial in admitted)
        self._cache = (state.epoch, view)
        return view

    def admits(self, entry: Entry) -> bool:
        """Whether this set admitted ``entry`` at resolve time (whatever its visibility now)."""
        return not self._disposed and entry.serial in self._admitted

    def entry(self, scope: str | None, name: str) -> Entry | None:
        """The admitted entry for ``name``, if still visible."""
        return self.entries(scope).get(name)

    def view(self, scope: str | None) -> Mapping[str, ToolDefinition]:
        """Admitted definitions still visible in ``scope`` (another scope is never admitted)."""
        return {name: e.definition for name, e in self.entries(scope).items()}

    @property
    def disposed(self) -> bool:
        """Whether admission is closed."""
        return self._disposed

    def dispose(self) -> None:
        """Close admission: the set admits nothing afterwards."""
        self._disposed = True
        self._cache = None

    def __enter__(self) -> ResolvedToolSet:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.dispose()


def _chain_entries(state: RegistryState, scope: str | None) -> list[Entry]:
    entries: list[Entry] = []
    for layer in state.layers_on_chain(scope):
        entries.extend(layer.tools.values())
    return entries


def _raise_aborted(reason: Any) -> None:
    if isinstance(reason, BaseException):
        raise reason
    raise AbortError("tool resolution was aborted")


async def resolve_tool_set(state: RegistryState, context: ActivationContext) -> ResolvedToolSet:
    """Evaluate conditions once for a step; see the module docstring."""
    signal = context.signal
    if signal.aborted:
        _raise_aborted(signal.reason)
    entries = _chain_entries(state, context.scope)
    conditional = [e for e in entries if e.when is not None]
    verdicts: dict[int, Any] = {}
    pending: dict[int, asyncio.Future[Any]] = {}
    for entry in conditional:
        try:
            outcome = entry.when(context)  # type: ignore[misc]
        except Exception as err:
            verdicts[entry.serial] = err
            continue
        if inspect.isawaitable(outcome):
            pending[entry.serial] = asyncio.ensure_future(outcome)
        else:
            verdicts[entry.serial] = outcome
    if pending and not signal.aborted:
        try:
            await _settle(pending, verdicts, signal)
        except asyncio.CancelledError:  # the host cancelled us: stop the conditions too
            await _discard(pending)
            raise
    if signal.aborted:  # aborted during resolution (R-COND-09): publish nothing
        await _discard(pending)
        _raise_aborted(signal.reason)
    for entry in conditional:  # the first failure in registration order wins
        verdict = verdicts[entry.serial]
        if isinstance(verdict, Exception):
            raise verdict
    admitted = {
        e.serial for e in entries if e.alive and (e.when is None or bool(verdicts.get(e.serial)))
    }
    return ResolvedToolSet(state, context.scope, admitted)


async def _settle(
    pending: dict[int, asyncio.Future[Any]], verdicts: dict[int, Any], signal: Any
) -> None:
    aborted = asyncio.ensure_future(signal.wait())
    try:
        waiting = set(pending.values())
        while waiting:
            done, _ = await asyncio.wait(waiting | {aborted}, return_when=asyncio.FIRST_COMPLETED)
            if aborted in done:
                return  # the caller sees the abort and discards what is pending
            waiting -= done
    finally:
        aborted.cancel()
    for serial, fut in pending.items():
        exc = fut.exception()
        verdicts[serial] = exc if exc is not None else fut.result()


async def _discard(pending: dict[int, asyncio.Future[Any]]) -> None:
    """Cancel the conditions still running and wait for them (their outcome is dropped)."""
    for fut in pending.values():
        fut.cancel()
    await asyncio.gather(*pending.values(), return_exceptions=True)
