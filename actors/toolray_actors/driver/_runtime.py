"""``RayRuntime``: attach to (or start) Ray, hold a lease on a namespace, hand out clients.

Example:
    >>> with RayRuntime.start(address="local") as rt:       # doctest: +SKIP
    ...     rt.registry.register(my_tool)
    ...     result = rt.executor("agent-7").execute_batch_sync(batch)

Many drivers share one namespace. Each runtime holds a lease: ``shutdown()`` releases it
and stops only what no other live runtime holds; the last lease of a non-detached namespace
(or the death of every holder's driver) ends the namespace's actors. ``teardown()`` ends
them for everyone and forgets the persisted state.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from types import TracebackType
from typing import Any

import ray
import ray.exceptions as rex

from toolray import Placement
from toolray.code import Confinement
from toolray.isolation import sandbox_config, sandbox_confinement
from toolray_actors._config import RuntimeConfig, load_config
from toolray_actors._errors import RuntimeUnavailableError, is_actor_death, translate
from toolray_actors._handles import control_options, create_registry
from toolray_actors._placement import pool_plan
from toolray_actors._remote import anchor, get, job_id, send
from toolray_actors._stats import RuntimeStats
from toolray_actors.control._registry_actor import RegistryActor
from toolray_actors.execution._pool import start_pool

from ._connection import Connection
from ._executor_handle import ExecutorHandle
from ._portal import Portal
from ._ray_init import StartError, connect_ray
from ._remote_registry import RemoteRegistry, RemoteScope
from ._stats_collect import collect_stats

__all__ = ("RayRuntime", "RuntimeStats", "StartError")


def _config(config: RuntimeConfig | str | os.PathLike[str] | None) -> RuntimeConfig:
    if isinstance(config, RuntimeConfig):
        return config
    return load_config(config)


class RayRuntime:
    """The Ray layer's entry point: one per driver; the drivers of a namespace share it."""

    def __init__(
        self,
        config: RuntimeConfig,
        conn: Connection,
        initialized_ray: bool,
        lease_id: str,
        anchor: object = None,
    ) -> None:
        self.config = config
        self._conn = conn
        self._initialized_ray = initialized_ray
        self._lease_id = lease_id
        self._anchor = anchor  # the lease's object: owned here, so lost when this driver is
        self._executors: dict[str | None, ExecutorHandle] = {}
        self._closed = False
        self.registry = RemoteRegistry(conn, self.executor)

    # ------------------------------------------------------------------ start
    @classmethod
    def start(
        cls,
        config: RuntimeConfig | str | os.PathLike[str] | None = None,
        *,
        address: str | None = None,
    ) -> RayRuntime:
        """Attach to Ray (or start it), then hold a lease on the config's namespace.

        ``config`` is a ``RuntimeConfig``, the name of a shipped config (``"local"``,
        ``"cluster"``, ``"ci"``) or the path of a TOML file (see ``load_config``); without
        one, ``$TOOLRAY_CONFIG``, else the defaults.

        With no address this behaves like ``ray.init()``: a Ray already initialised in this
        process, else the cluster Ray finds (``RAY_ADDRESS``, or one started with
        ``ray start`` on this machine), else a fresh local instance. ``address="local"``
        always starts a fresh embedded instance.
        """
        cfg = _config(config)
        if address is not None:
            cfg = cfg.model_copy(update={"address": address})
        initialized = connect_ray(cfg)
        try:
            return cls._attach(cfg, initialized)
        except BaseException:
            if initialized:
                ray.shutdown()
            raise

    @classmethod
    def _attach(cls, cfg: RuntimeConfig, initialized: bool) -> RayRuntime:
        _check_control_resource(cfg)
        per_scope = cfg.executors.mode == "per_scope"

        def create() -> Any:
            return create_registry(
                RegistryActor,
                cfg.namespace,
                control_options(cfg.control_resource),
                cfg.namespace,
                cfg.detached,
                per_scope,
                cfg.model_dump(mode="json"),
            )

        lease_id = uuid.uuid4().hex
        job = job_id()
        held = anchor()  # lost when this driver is: the registry's sign that it died
        # (sent as ``[held]``: Ray passes a ref nested in a list as the ref, not its value)
        where = (os.getpid(), socket.gethostname())
        deadline = time.monotonic() + 60
        while True:
            actor = create()
            try:
                get(send(actor, RegistryActor.acquire_lease, lease_id, job, *where, [held]))
                break
            except rex.RayError as err:
                # Two drivers racing on creation, or a namespace that is just ending.
                retry = is_actor_death(err) or isinstance(
                    translate(err, ""), RuntimeUnavailableError
                )
                if not retry or time.monotonic() > deadline:
                    raise StartError(
                        f"the toolray registry of namespace {cfg.namespace!r} could not start: "
                        f"{translate(err, 'the registry actor')}"
                    ) from None
                time.sleep(0.3)
        # The default pool starts now, beside the first executor rather than after it: the
        # first batch of a new namespace waits for one actor start instead of three in a row.
        start_pool(pool_plan(None, cfg), cfg.namespace, control_options(cfg.control_resource))
        conn = Connection(cfg, actor, create, Portal())
        return cls(cfg, conn, initialized, lease_id, held)

    # ------------------------------------------------------------------ clients
    def scope(self, key: str, parent: str | None = None) -> RemoteScope:
        """The remote scoped context of ``key`` (created on first use)."""
        return self.registry.scope(key, parent=parent)

    def executor(self, scope: str | None) -> ExecutorHandle:
        """The handle on ``scope``'s executor actor (the actor starts on first use)."""
        handle = self._executors.get(scope)
        if handle is None:
            handle = self._executors[scope] = ExecutorHandle(self._conn, scope)
        return handle

    def confinement(self, placement: Placement | None = None) -> Confinement:
        """The layers a call's sandbox gets (``isolation="sandbox"``), on this node.

        One sandbox is started here, asked and ended (a fraction of a second), with the
        paths and network of ``placement`` (none by default); ``mode`` is the default
        pool's ``confinement`` — ``"strict"`` refuses calls where a layer is missing.

        Example:
            >>> rt.confinement().missing  # doctest: +SKIP
            ()
        """
        config = sandbox_config(
            read_paths=getattr(placement, "read_paths", ()),
            write_paths=getattr(placement, "write_paths", ()),
            network=bool(getattr(placement, "network", False)),
        )
        return sandbox_confinement(config, self.config.pool.confinement)

    def stats(self) -> RuntimeStats:
        """A snapshot of every live actor of the namespace, and the runtime's counters."""
        self._conn.call(RegistryActor.ping)  # a namespace that ended says why
        return self._conn.portal.run(collect_stats(self._conn))

    # ------------------------------------------------------------------ lifetime
    def shutdown(self) -> None:
        """Release this runtime's lease; stop Ray only if this runtime started it.

        Other drivers of the namespace keep working. The last lease of a non-detached
        namespace ends its actors. Idempotent, quiet.
        """
        if self._closed:
            return
        self._closed = True
        self.registry.close()  # change listeners stop before the loop that runs them
        try:
            if ray.is_initialized() and not self._conn.closed:
                self._conn.call(RegistryActor.release_lease, self._lease_id)
        except Exception:  # the namespace is already gone (teardown, cluster down)
            pass
        self._conn.closed = True
        self._conn.portal.close()
        if self._initialized_ray and ray.is_initialized():
            ray.shutdown()

    def teardown(self) -> None:
        """Stop every actor of the namespace for everyone, forget its state, shut down."""
        if self._closed:
            return
        with contextlib.suppress(RuntimeUnavailableError):
            self._conn.call(RegistryActor.teardown)
        self._conn.closed = True
        self.shutdown()

    def __enter__(self) -> RayRuntime:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<RayRuntime namespace={self.config.namespace!r} {state}>"


def _check_control_resource(cfg: RuntimeConfig) -> None:
    name = cfg.control_resource
    if name is None:
        return
    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    if not any(n.get("Alive") and name in n.get("Resources", {}) for n in nodes):
        raise StartError(
            f"no live node offers the control resource {name!r} (control_resource in the "
            "config): start a node with --resources or clear the setting"
        )
