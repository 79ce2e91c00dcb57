"""The one edge where Ray is applied: actor classes, options, get/wait/cancel/kill.

Actor classes elsewhere are plain typed classes; here they become Ray actors with the
options DESIGN.md asks for: ``num_cpus=0`` for every runtime actor, ``max_task_retries=0``
(a retried call would re-run a body's side effects), named actors in a namespace with
``get_if_exists`` so several drivers share them, and the worker's ``control`` lane.
"""

from __future__ import annotations

import contextlib
from typing import Any

import ray

from ._worker import ToolWorker

__all__ = (
    "cancel",
    "create_executor",
    "create_pool",
    "create_registry",
    "create_worker",
    "executor_name",
    "get_named",
    "kill",
    "kill_self",
    "pool_name",
    "registry_name",
)

REGISTRY = "toolray:registry"


def registry_name() -> str:
    """The registry actor's name."""
    return REGISTRY


def executor_name(scope: str | None) -> str:
    """The executor actor's name for ``scope`` (``None`` is the global scope)."""
    return f"toolray:executor:{scope}" if scope is not None else "toolray:executor:<global>"


def pool_name(pool: str) -> str:
    """The pool manager's name."""
    return f"toolray:pool:{pool}"


@ray.remote(num_cpus=0, concurrency_groups={"control": 4})
class _WorkerActor(ToolWorker):
    @ray.method(concurrency_group="control")
    async def abort(self, token: str, reason: Any = None) -> bool:
        return await super().abort(token, reason)

    @ray.method(concurrency_group="control")
    async def interrupt(self, token: str) -> str:
        return await super().interrupt(token)

    @ray.method(concurrency_group="control")
    async def status(self) -> Any:
        return await super().status()

    @ray.method(concurrency_group="control")
    async def health(self) -> int:
        return await super().health()


def create_worker(options: dict[str, Any], threads: int) -> Any:
    """Start one worker actor (async; control lane; no retries)."""
    opts = {"num_cpus": 0, "max_restarts": 0, "max_task_retries": 0, **options}
    opts.setdefault("max_concurrency", max(threads, 8) + 8)
    return _WorkerActor.options(**opts).remote(threads)


def _here() -> Any:
    """Pin control actors to the caller's node (Ray ignores a soft preference for them)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node = ray.get_runtime_context().get_node_id()
    return NodeAffinitySchedulingStrategy(node_id=node, soft=False)


def _named(cls: Any, name: str, namespace: str, detached: bool, **extra: Any) -> Any:
    # Control actors (registry, executors, pool managers) stay with the driver's node, so
    # losing a worker node costs its calls (WORKER_LOST), not the scheduler.
    options: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "get_if_exists": True,
        "num_cpus": 0,
        "max_task_retries": 0,
        "scheduling_strategy": _here(),
        **extra,
    }
    if detached:
        options["lifetime"] = "detached"
    return ray.remote(cls).options(**options)


def create_registry(cls: Any, namespace: str, detached: bool, *args: Any) -> Any:
    """The registry actor (restarted from its persisted snapshot if it dies)."""
    return _named(cls, REGISTRY, namespace, detached, max_restarts=-1, max_concurrency=256).remote(
        *args
    )


def create_executor(cls: Any, scope: str | None, namespace: str, detached: bool, *args: Any) -> Any:
    """The executor actor of one scope (async; never restarted mid-batch)."""
    name = executor_name(scope)
    return _named(cls, name, namespace, detached, max_restarts=0, max_concurrency=1000).remote(
        *args
    )


def create_pool(cls: Any, pool: str, namespace: str, detached: bool, *args: Any) -> Any:
    """The pool manager of one placement."""
    name = pool_name(pool)
    return _named(cls, name, namespace, detached, max_restarts=-1, max_concurrency=256).remote(
        *args
    )


def get_named(name: str, namespace: str) -> Any | None:
    """A named actor's handle, or ``None``."""
    try:
        return ray.get_actor(name, namespace=namespace)
    except ValueError:
        return None


def kill(handle: Any, *, no_restart: bool = True) -> None:
    """Kill an actor process (idempotent)."""
    with contextlib.suppress(Exception):  # already gone
        ray.kill(handle, no_restart=no_restart)


def cancel(ref: Any) -> None:
    """Cancel a remote call (raises CancelledError at an async body's next await)."""
    with contextlib.suppress(Exception):  # already finished
        ray.cancel(ref, recursive=True)


def kill_self() -> None:
    """Kill the calling actor (used by an idle executor to reap itself)."""
    ray.kill(ray.get_runtime_context().current_actor, no_restart=True)
