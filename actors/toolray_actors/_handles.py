"""The one edge where Ray is applied: actor classes, options, names, kill.

Actor classes elsewhere are plain typed classes; here they become Ray actors with the
options the runtime needs: ``num_cpus=0`` for every runtime actor, ``max_task_retries=0``
(a retried call would re-run a body's side effects), named actors in a namespace with
``get_if_exists`` so several drivers share them, and the worker's ``control`` lane.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

import ray

from ._ledger import highest
from ._placement import WorkerSettings
from ._remote import Handle, lookup
from ._stats import ActorStats, WorkerStatus
from ._wire import AbortOrder
from .control._bucket_actor import BucketActor
from .execution._worker import ToolWorker, body_limit

__all__ = (
    "HEAD_RESOURCE",
    "bucket_name",
    "control_options",
    "create_bucket",
    "create_executor",
    "create_mcp_sessions",
    "create_pool",
    "create_registry",
    "create_worker",
    "executor_name",
    "get_named",
    "kill",
    "kill_self",
    "mcp_sessions_name",
    "named_actors",
    "pool_name",
    "read_ledger_on",
    "registry_name",
    "resources_offered",
    "shard_name",
)

REGISTRY = "toolray:registry"


def registry_name() -> str:
    """The registry actor's name."""
    return REGISTRY


def executor_name(scope: str | None) -> str:
    """The per-scope executor actor's name for ``scope`` (``None`` is the global scope)."""
    return f"toolray:executor:{scope}" if scope is not None else "toolray:executor:<global>"


def shard_name(index: int) -> str:
    """The name of executor shard ``index`` (sharded mode hosts many scopes per actor)."""
    return f"toolray:executor:shard-{index}"


def pool_name(pool: str) -> str:
    """The pool manager's name."""
    return f"toolray:pool:{pool}"


def bucket_name(tool: str) -> str:
    """The name of the actor holding ``tool``'s token bucket."""
    return f"toolray:bucket:{tool}"


# Ray's own stubs type ``ray.remote`` / ``ray.method`` for plain functions only; at this one
# edge they are used untyped, and everything past it is typed by our own classes.
_remote: Any = ray.remote
_method: Any = ray.method


_F = TypeVar("_F", bound=Callable[..., Any])


def _control(fn: _F) -> _F:
    """Run ``fn`` on the worker's ``control`` lane (it answers while a body runs)."""
    return cast("_F", _method(concurrency_group="control")(fn))


class _WorkerClass(ToolWorker):
    def __init__(self, threads: int, settings: WorkerSettings | None = None) -> None:
        # A body in a call process is not a Ray worker: if it uses Ray, it joins this
        # cluster as a driver (never starts a cluster of its own); the node it runs on
        # is TOOLRAY_NODE_ID.
        context = ray.get_runtime_context()
        env = {"RAY_ADDRESS": context.gcs_address, "TOOLRAY_NODE_ID": context.get_node_id()}
        super().__init__(threads, settings, env=env)

    @_control
    async def abort(
        self,
        token: str,
        reason: object = None,
        interrupt_after: float | None = None,
        kill_after: float | None = None,
    ) -> bool:
        return await super().abort(token, reason, interrupt_after, kill_after)

    @_control
    async def abort_many(self, items: list[AbortOrder]) -> int:
        return await super().abort_many(items)

    @_control
    async def interrupt(self, token: str) -> str:
        return await super().interrupt(token)

    @_control
    async def kill_call(self, token: str) -> bool:
        return await super().kill_call(token)

    @_control
    async def status(self) -> WorkerStatus:
        return await super().status()

    @_control
    async def health(self) -> int:
        return await super().health()

    @_control
    async def until_death(self) -> None:
        await super().until_death()

    @_control
    async def drain(self) -> int:
        return await super().drain()

    @_control
    async def actor_stats(self) -> ActorStats:
        return await super().actor_stats()


_WorkerActor: Any = _remote(num_cpus=0, concurrency_groups={"control": 5})(_WorkerClass)


def create_worker(options: dict[str, object], settings: WorkerSettings) -> Handle:
    """Start one worker actor (async; control lane; no retries)."""
    opts: dict[str, object] = {"num_cpus": 0, "max_restarts": 0, "max_task_retries": 0, **options}
    opts.setdefault("max_concurrency", body_limit(settings.threads))
    worker: Handle = _WorkerActor.options(**opts).remote(settings.threads, settings)
    return worker


HEAD_RESOURCE = "node:__internal_head__"


@functools.cache
def _actor_class(cls: type) -> Any:
    return _remote(cls)


def control_options(control_resource: str | None) -> dict[str, object]:
    """Where control actors live: the head node, or nodes offering ``control_resource``.

    Never the driver's node: a driver on a worker node that leaves the cluster must not
    take the namespace with it. Control actors are detached, so no driver owns them; the
    registry's leases decide when a non-detached namespace ends.
    """
    resource = control_resource or HEAD_RESOURCE
    return {"num_cpus": 0, "resources": {resource: 0.001}, "lifetime": "detached"}


class _Startable(Protocol):
    """An actor class with its options applied: ``remote(*args)`` starts (or finds) it."""

    def remote(self, *args: object) -> Handle: ...


def _named(
    cls: type, name: str, namespace: str, control: dict[str, object], **extra: int
) -> _Startable:
    options: dict[str, object] = {
        "name": name,
        "namespace": namespace,
        "get_if_exists": True,
        "max_task_retries": 0,
        **control,
        **extra,
    }
    started: _Startable = _actor_class(cls).options(**options)
    return started


def create_registry(cls: type, namespace: str, control: dict[str, object], *args: object) -> Handle:
    """The registry actor (restarted from its persisted state if it dies)."""
    return _named(cls, REGISTRY, namespace, control, max_restarts=-1, max_concurrency=256).remote(
        *args
    )


def create_executor(
    cls: type,
    name: str,
    namespace: str,
    control: dict[str, object],
    *args: object,
    max_concurrency: int = 1000,
) -> Handle:
    """An executor actor (async; never restarted mid-batch: a handle recreates it).

    ``max_concurrency`` bounds its concurrent method calls: a shard hosting many scopes
    serves one streaming ``run_batch`` per running batch, so it gets more.
    """
    return _named(
        cls, name, namespace, control, max_restarts=0, max_concurrency=max_concurrency
    ).remote(*args)


def create_pool(
    cls: type, pool: str, namespace: str, control: dict[str, object], *args: object
) -> Handle:
    """The pool manager of one placement."""
    name = pool_name(pool)
    return _named(cls, name, namespace, control, max_restarts=-1, max_concurrency=256).remote(*args)


class _BucketClass(BucketActor):
    def __init__(self, tool: str) -> None:
        # Ray runs __init__ again after a crash: a restarted bucket starts empty
        restarted = bool(ray.get_runtime_context().was_current_actor_reconstructed)
        super().__init__(tool, restarted)


def create_bucket(tool: str, namespace: str, control: dict[str, object]) -> Handle:
    """The namespace's token-bucket actor of ``tool`` (restarted if it dies)."""
    return _named(
        _BucketClass, bucket_name(tool), namespace, control, max_restarts=-1, max_concurrency=64
    ).remote(tool)


def mcp_sessions_name(app: str) -> str:
    """The name of the session table the replicas of MCP app ``app`` share."""
    return f"toolray:mcp-sessions:{app}"


def create_mcp_sessions(app: str, namespace: str, control: dict[str, object]) -> Handle:
    """The session table of MCP app ``app`` (the core's ``LocalSessions``, as an async actor).

    Restarted empty if it dies: its sessions are then unknown (``404``) and clients open
    new ones.
    """
    from toolray.adapters.mcp import LocalSessions  # the mcp extra: imported only here

    name = mcp_sessions_name(app)
    return _named(
        LocalSessions, name, namespace, control, max_restarts=-1, max_concurrency=1000
    ).remote()


def named_actors(namespace: str, prefix: str = "toolray:") -> list[str]:
    """Names of the live named actors of ``namespace`` starting with ``prefix``."""
    found = ray.util.list_named_actors(all_namespaces=True)
    return sorted(
        a["name"]
        for a in found
        if a.get("namespace") == namespace and str(a.get("name", "")).startswith(prefix)
    )


def get_named(name: str, namespace: str) -> Handle | None:
    """A named actor's handle, or ``None``."""
    return lookup(name, namespace)


def resources_offered(options: dict[str, Any]) -> bool:
    """Whether some live node has (in total) the resources actor ``options`` ask for.

    Blocking (``ray.nodes()``); a pool manager asks it off its loop.
    """
    wanted = dict(options.get("resources") or {})
    for key, name in (("num_cpus", "CPU"), ("num_gpus", "GPU")):
        if options.get(key):
            wanted[name] = wanted.get(name, 0) + float(options[key])
    if not wanted:
        return True
    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    for node in nodes:
        offered = node.get("Resources", {}) if node.get("Alive") else {}
        if all(offered.get(name, 0) >= amount for name, amount in wanted.items()):
            return True
    return False


def kill(handle: Handle, *, no_restart: bool = True) -> None:
    """Kill an actor process (idempotent)."""
    with contextlib.suppress(Exception):  # already gone
        ray.kill(handle, no_restart=no_restart)


def kill_self() -> None:
    """Kill the calling actor (used by an idle executor to reap itself)."""
    ray.kill(ray.get_runtime_context().current_actor, no_restart=True)


_read_ledger = ray.remote(num_cpus=0, max_retries=0)(highest)


def read_ledger_on(node: str, path: str, driver: str, wait_s: float) -> ray.ObjectRef[int | None]:
    """:func:`toolray_actors._ledger.highest` run on ``node`` (where the ledger is)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    strategy = NodeAffinitySchedulingStrategy(node, soft=False)
    ref: ray.ObjectRef[int | None] = _read_ledger.options(scheduling_strategy=strategy).remote(
        path, driver, wait_s
    )
    return ref
