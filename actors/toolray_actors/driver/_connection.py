"""A driver's connection to one namespace: the registry actor, routing, and the portal.

The client objects (``RemoteRegistry``, ``RemoteScope``, ``ExecutorHandle``) hold this, not
the runtime, so they know nothing of how Ray was started. Every call to the registry goes
through :meth:`Connection.call` (sync) or :meth:`Connection.acall` (async), the error
boundary: a lost registry actor is looked up again (Ray restarts it from the persisted
state), a namespace that was torn down raises ``RuntimeUnavailableError`` saying so, and no
Ray exception type escapes.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Coroutine, Iterator
from typing import Concatenate, ParamSpec, TypeVar

from toolray_actors._config import RuntimeConfig
from toolray_actors._errors import RuntimeUnavailableError
from toolray_actors._handles import executor_name, get_named, registry_name, shard_name
from toolray_actors._remote import Handle, get, retrying, retrying_sync, send
from toolray_actors._toolset import RemoteToolSet
from toolray_actors._wire import DefinitionBlob
from toolray_actors.control._directory import ActorDirectory
from toolray_actors.control._registry_actor import RegistryActor
from toolray_actors.control._store import Store

from ._admission import Admission
from ._portal import Portal
from ._submissions import Submissions
from ._unstarted import Ready

__all__ = ("Connection",)

_P = ParamSpec("_P")
_R = TypeVar("_R")

_RECOVERY_S = 30.0
"""How long a call keeps looking for a registry actor that Ray is restarting (a lost node)."""


def _pauses() -> Iterator[float]:
    """The waits between attempts: growing from 50 ms to 1 s, ending after ``_RECOVERY_S``."""
    deadline = time.monotonic() + _RECOVERY_S
    pause = 0.05
    while time.monotonic() < deadline:
        yield pause
        pause = min(pause * 2, 1.0)


class Connection:
    """What every client object of one runtime shares."""

    def __init__(
        self,
        config: RuntimeConfig,
        registry: Handle,
        create_registry: Callable[[], Handle],
        portal: Portal,
    ) -> None:
        self.config = config
        self.namespace = config.namespace
        self._registry = registry
        self._create_registry = create_registry
        self.portal = portal
        self.closed = False
        self.recoveries = 0
        self.executors: ActorDirectory[Ready] = ActorDirectory()
        """Executor actors known ready, shared by this runtime's handles (a shard's scopes)."""
        self.submissions = Submissions()
        """Batches bound for one executor actor in one tick, sent together."""
        self.admission = Admission(config.executors.max_batches_in_flight)
        """This driver's batches in flight per executor actor, and those waiting (FIFO)."""

    @property
    def what(self) -> str:
        """The registry actor, named for messages."""
        return f"the toolray registry actor of namespace {self.namespace!r}"

    # ------------------------------------------------------------------ routing
    def executor_target(self, scope: str | None) -> tuple[str, str | None]:
        """``(actor name, the scope it is created for)``: per scope, or a stable shard."""
        ex = self.config.executors
        if ex.mode == "per_scope":
            return executor_name(scope), scope
        key = "" if scope is None else scope
        return shard_name(zlib.crc32(key.encode()) % ex.shards), None

    # ------------------------------------------------------------------ the registry
    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeUnavailableError(
                f"this RayRuntime of namespace {self.namespace!r} was shut down; "
                "RayRuntime.start() gives a new one"
            )

    def _recover(self) -> None:
        """The registry actor died: find the one Ray restarted, or create it anew."""
        why = Store(self.namespace).read_tombstone()
        if why is not None:
            raise RuntimeUnavailableError(
                f"the toolray namespace {self.namespace!r} ended: {why}; "
                "RayRuntime.start() creates it anew"
            ) from None
        handle = get_named(registry_name(), self.namespace)
        self._registry = handle if handle is not None else self._create_registry()
        self.recoveries += 1

    def call(
        self,
        method: Callable[Concatenate[RegistryActor, _P], Coroutine[object, object, _R]],
        *args: _P.args,
        **kwargs: _P.kwargs,
    ) -> _R:
        """Call a registry actor's method and wait (any thread, any loop); errors mapped."""
        self._check_open()

        def attempt() -> _R:
            return get(send(self._registry, method, *args, **kwargs))

        return retrying_sync(attempt, self.what, _pauses(), recover=self._recover)

    def tool_set_view(self, tool_set: RemoteToolSet) -> list[tuple[str, DefinitionBlob]]:
        """A remote set's admitted definitions still in view, in view order."""
        return self.call(RegistryActor.tool_set_view, tool_set)

    async def acall(
        self,
        method: Callable[Concatenate[RegistryActor, _P], Coroutine[object, object, _R]],
        *args: _P.args,
        **kwargs: _P.kwargs,
    ) -> _R:
        """:meth:`call` for coroutines."""
        self._check_open()

        async def attempt() -> _R:
            return await send(self._registry, method, *args, **kwargs)

        return await retrying(attempt, self.what, _pauses(), recover=self._recover)
