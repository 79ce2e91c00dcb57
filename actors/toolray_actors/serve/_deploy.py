"""``deploy_mcp``: a namespace's tools over MCP streamable HTTP, as a Ray Serve application.

Each replica is a driver of the namespace (its own ``RayRuntime`` and lease) serving
``mcp_http_app`` over the runtime's ``RemoteRegistry``: every call runs in the scope's
executor actor like any other driver's, so what other drivers register is served too.
Serve's proxy spreads requests over the replicas; a session works whichever replica
answers, because the replicas share one session table (an actor of the namespace) — the
spread costs one table lookup per request that carries a session id, where routing by
session would pin a session to one replica. Stateless apps (the default) with one replica
need no table at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from dataclasses import dataclass
from types import TracebackType
from typing import Literal, final

from starlette.types import Message, Receive, Scope, Send

from toolray import ToolBatchInput, ToolBatchResult, ToolRegistry
from toolray.adapters.mcp import LocalSessions, McpHttpApp, mcp_http_app
from toolray_actors._config import RuntimeConfig
from toolray_actors._handles import control_options, create_mcp_sessions, kill, mcp_sessions_name
from toolray_actors._remote import Handle, get, lookup, send
from toolray_actors.driver._remote_registry import RemoteRegistry
from toolray_actors.driver._runtime import RayRuntime

from ._metrics import McpMetrics
from ._store import RaySessions

__all__ = ("REPLICA_HEADER", "McpDeployment", "McpReplica", "McpServeSpec", "deploy_mcp")

REPLICA_HEADER = "x-toolray-replica"
"""The response header naming the replica that answered (load spread, debugging)."""

_FLUSH_S = 1.0
_SERVE_CONTROLLER = "SERVE_CONTROLLER_ACTOR"
"""The name of Serve's controller actor (in namespace ``serve``): Serve runs if it lives."""


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServeSpec:
    """What each replica needs to build its app (sent to every replica)."""

    config: RuntimeConfig
    auth: object | None
    scope: str | None
    scope_per_session: bool
    stateless: bool
    allowed_hosts: tuple[str, ...] | None
    max_body_bytes: int
    session_idle_s: float
    table: str | None
    """The shared session table's actor name, when the app needs one."""
    name: str


@final
class _OffRequest:
    """The runtime's registry, its batches sent as no Serve request's children.

    Ray makes a call sent while a request runs a child of that request's task (the
    ``async_task_*`` context variables it keeps in an async actor), and Serve cancels a
    request's task, recursively, when its client goes away — which an MCP client does as
    soon as it has read its answer. A batch's message carries every batch the driver sends
    in the same tick, other requests' included: cancelled with one request, it would fail
    them all. Each batch therefore starts in a copy of the caller's context without Ray's
    task variables (OpenTelemetry's context and the rest are kept); its own cancellation is
    toolray's, per batch. Everything else is the registry's own.
    """

    def __init__(self, registry: RemoteRegistry) -> None:
        self._registry = registry

    async def execute_batch(self, batch: ToolBatchInput) -> ToolBatchResult:
        """Run ``batch`` in a task that belongs to no Serve request."""
        loop = asyncio.get_running_loop()
        return await loop.create_task(self._registry.execute_batch(batch), context=_detached())

    def __getattr__(self, name: str) -> object:
        return getattr(self._registry, name)


def _detached() -> contextvars.Context:
    """A copy of the current context without Ray's record of the task running it."""
    fresh = contextvars.Context()
    for var, value in contextvars.copy_context().items():
        if not var.name.startswith("async_task_"):
            fresh.run(var.set, value)
    return fresh


class McpReplica:
    """One replica: a driver of the namespace serving ``mcp_http_app`` (Serve applies ingress)."""

    def __init__(self, spec: McpServeSpec) -> None:
        self._rt = RayRuntime.start(spec.config)  # this process's Ray: a replica attaches
        store = None
        if spec.table is not None:
            handle = lookup(spec.table, spec.config.namespace)
            if handle is None:
                raise RuntimeError(f"the MCP session table {spec.table!r} is not running")
            store = RaySessions(handle)
        self._app = mcp_http_app(
            _OffRequest(self._rt.registry),
            scope=spec.scope,
            auth=spec.auth,
            scope_per_session=spec.scope_per_session,
            stateless=spec.stateless,
            allowed_hosts=list(spec.allowed_hosts) if spec.allowed_hosts is not None else None,
            max_body_bytes=spec.max_body_bytes,
            session_idle_s=spec.session_idle_s,
            sessions=store,
            name=spec.name,
        )
        self._metrics = McpMetrics(self._app.stats)
        self._flusher: asyncio.Task[None] | None = None

    def __serve_build_asgi_app__(self) -> _ServedBy:
        return _ServedBy(self._app, _replica_id(), self._start_flushing)

    def _start_flushing(self) -> None:
        if self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(self._flush_forever())

    async def _flush_forever(self) -> None:
        while True:
            await asyncio.sleep(_FLUSH_S)
            with contextlib.suppress(Exception):  # metrics never stop a server
                self._metrics.flush()

    def __del__(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
        self._rt.shutdown()  # release this replica's lease on the namespace


def _replica_id() -> str:
    from ray import serve

    with contextlib.suppress(Exception):  # outside a replica (a unit test)
        return str(serve.get_replica_context().replica_id.unique_id)
    return ""


@final
class _ServedBy:
    """The app, each response naming its replica; metrics start with the app's lifespan."""

    def __init__(self, app: McpHttpApp, replica: str, started: object) -> None:
        self._app = app
        self._header = (REPLICA_HEADER.encode(), replica.encode())
        self._started = started

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" and callable(self._started):
            self._started()
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def named(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), self._header]}
            await send(message)

        await self._app(scope, receive, named)


@final
class McpDeployment:
    """A running MCP Serve application: its URL; :meth:`shutdown` ends it and its sessions."""

    def __init__(
        self, rt: RayRuntime, name: str, url: str, table: Handle | None, owns_serve: bool
    ) -> None:
        self.name = name
        self.url = url
        self._rt = rt
        self._table = table
        self._owns_serve = owns_serve
        self._closed = False

    def sessions_open(self) -> int:
        """Sessions open on every replica (0 for an app without sessions)."""
        if self._table is None:
            return 0
        return get(send(self._table, LocalSessions.count))

    def shutdown(self) -> None:
        """Delete the Serve application and end its open sessions (their scopes disposed).

        Serve itself stops too when :func:`deploy_mcp` started it and no other application
        remains.
        """
        if self._closed:
            return
        self._closed = True
        from ray import serve

        serve.delete(self.name)
        if self._table is not None:
            for session in get(send(self._table, LocalSessions.expired, -1.0)):
                if session.child and session.scope is not None:
                    self._rt.registry.scope(session.scope).dispose()
            kill(self._table)
        if self._owns_serve and not serve.status().applications:
            serve.shutdown()  # type: ignore[no-untyped-call]

    def __enter__(self) -> McpDeployment:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()


def deploy_mcp(
    rt: RayRuntime,
    *,
    auth: object | None,
    scope: str | None = None,
    scope_per_session: bool = False,
    stateless: bool = True,
    allowed_hosts: list[str] | None = None,
    max_body_bytes: int = 4_194_304,
    session_idle_s: float = 600.0,
    replicas: int | Literal["auto"] = 1,
    host: str = "127.0.0.1",
    port: int = 8000,
    name: str = "toolray-mcp",
) -> McpDeployment:
    """Serve ``rt``'s namespace over MCP streamable HTTP as a Ray Serve application.

    The arguments of ``mcp_http_app`` (``auth`` is required: a ``BearerTokens`` or any
    picklable ``mcp`` ``TokenVerifier``), and: ``replicas`` (a number, or ``"auto"`` for
    Serve's autoscaling), ``host`` / ``port`` of Serve's HTTP proxy, ``name`` of the Serve
    application. The app answers at ``http://<host>:<port>/mcp``.

    Example:
        >>> with RayRuntime.start() as rt:                      # doctest: +SKIP
        ...     rt.registry.register(my_tool)
        ...     with deploy_mcp(rt, auth=BearerTokens.from_file("tokens")) as app:
        ...         print(app.url)
    """
    hosts = list(allowed_hosts) if allowed_hosts is not None else None
    mcp_http_app(  # the app's own checks, here in the caller's process and before Serve
        ToolRegistry(),
        auth=auth,
        allowed_hosts=hosts,
        max_body_bytes=max_body_bytes,
        session_idle_s=session_idle_s,
    )
    if replicas != "auto" and (isinstance(replicas, bool) or not isinstance(replicas, int)):
        raise ValueError(f'replicas is a number or "auto", not {replicas!r}')
    if replicas != "auto" and replicas < 1:
        raise ValueError("replicas is at least 1")
    from ray import serve

    config = rt.config
    table: Handle | None = None
    if scope_per_session or not stateless or replicas != 1:  # sessions or cancels to share
        table = create_mcp_sessions(
            name, config.namespace, control_options(config.control_resource)
        )
    spec = McpServeSpec(
        config=config.model_copy(update={"address": None}),
        auth=auth,
        scope=scope,
        scope_per_session=scope_per_session,
        stateless=stateless,
        allowed_hosts=tuple(hosts) if hosts is not None else None,
        max_body_bytes=max_body_bytes,
        session_idle_s=session_idle_s,
        table=mcp_sessions_name(name) if table is not None else None,
        name=name,
    )
    owns_serve = lookup(_SERVE_CONTROLLER, "serve") is None
    serve.start(http_options={"host": host, "port": port})
    deployment = serve.deployment(
        name=name,
        num_replicas=replicas,
        max_ongoing_requests=1000,
        ray_actor_options={"num_cpus": 0},
    )(serve.ingress()(McpReplica))
    serve.run(deployment.bind(spec), name=name, route_prefix="/", blocking=False)
    shown = f"[{host}]" if ":" in host else host
    return McpDeployment(rt, name, f"http://{shown}:{port}/mcp", table, owns_serve)
