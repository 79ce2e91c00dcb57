"""``RayRuntime``: start or attach to Ray, then hand out the registry, scopes and executors.

Example:
    >>> rt = RayRuntime.start()                      # doctest: +SKIP
    >>> rt.registry.register(my_tool)                # doctest: +SKIP
    >>> result = rt.executor("agent-7").execute_batch_sync(batch)  # doctest: +SKIP
    >>> rt.shutdown()                                # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray

from ._client import ExecutorHandle, RemoteRegistry, RemoteScope
from ._config import RuntimeConfig, load_config
from ._handles import create_registry, get_named, kill, pool_name, registry_name
from ._registry_actor import RegistryActor

__all__ = ("RayRuntime", "RuntimeStats", "StartError")


class StartError(RuntimeError):
    """Ray could not be started or reached (the message says how to fix it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeStats:
    """Workers, in-flight calls, kills and restarts across the runtime."""

    workers: int
    spares: int
    in_flight: int
    kills: int
    workers_lost: int
    replacements: int
    registry_restarts: int
    executors: tuple[str, ...]


def _config(config: RuntimeConfig | str | os.PathLike[str] | None) -> RuntimeConfig:
    if isinstance(config, RuntimeConfig):
        return config
    return load_config(config)


class RayRuntime:
    """The Ray layer's entry point (one per driver; several drivers share the actors)."""

    def __init__(self, config: RuntimeConfig, registry_actor: Any, started_ray: bool) -> None:
        self.config = config
        self._registry_actor = registry_actor
        self._started_ray = started_ray
        self._executors: dict[str | None, ExecutorHandle] = {}
        self.registry = RemoteRegistry(registry_actor, self)

    @classmethod
    def start(
        cls,
        config: RuntimeConfig | str | os.PathLike[str] | None = None,
        *,
        address: str | None = None,
    ) -> RayRuntime:
        """``ray.init`` when Ray is not up (quiet, no dashboard), or attach to ``address``."""
        cfg = _config(config)
        started = False
        if address or cfg.address:
            _probe(address or cfg.address or "")  # a refused host:port fails in one line
        if not ray.is_initialized():
            _init_ray(cfg, address or cfg.address)
            started = True
        actor = create_registry(RegistryActor, cfg.namespace, cfg.detached, cfg.namespace)
        ray.get(actor.ping.remote())
        return cls(cfg, actor, started)

    def scope(self, key: str, parent: str | None = None) -> RemoteScope:
        """The remote scoped context of ``key``."""
        return self.registry.scope(key, parent=parent)

    def executor(self, scope: str | None) -> ExecutorHandle:
        """The handle on ``scope``'s executor actor (the actor starts on first use)."""
        handle = self._executors.get(scope)
        if handle is None:
            handle = self._executors[scope] = ExecutorHandle(self, scope)
        return handle

    def stats(self) -> RuntimeStats:
        """A snapshot across the pool, the executors this driver used, and the registry."""
        ns = self.config.namespace
        pools = [get_named(pool_name(k), ns) for k in ("default",)]
        pool_stats = [ray.get(p.stats.remote()) for p in pools if p is not None]
        info = self.registry.info()
        in_flight = kills = lost = 0
        for handle in self._executors.values():
            actor = get_named(handle.name, ns)
            if actor is None:
                continue
            try:
                st = ray.get(actor.statistics.remote(), timeout=10)
            except Exception:
                continue
            in_flight += st.in_flight
            kills += st.kills
            lost += st.workers_lost
        return RuntimeStats(
            workers=sum(p.workers for p in pool_stats),
            spares=sum(p.spares for p in pool_stats),
            in_flight=in_flight,
            kills=kills,
            workers_lost=lost,
            replacements=sum(p.replacements for p in pool_stats),
            registry_restarts=int(info.get("restarts", 0)),
            executors=tuple(info.get("executors", ())),
        )

    def shutdown(self) -> None:
        """Stop this runtime's actors (unless detached) and Ray itself if we started it."""
        if not ray.is_initialized():
            return
        ns = self.config.namespace
        if not self.config.detached:
            names = list(self.registry.info().get("executors", ()))
            for name in names:
                actor = get_named(name, ns)
                if actor is not None:
                    kill(actor)
            pool = get_named(pool_name("default"), ns)
            if pool is not None:
                with contextlib.suppress(Exception):
                    ray.get(pool.shutdown.remote(), timeout=10)
                kill(pool)
            registry = get_named(registry_name(), ns)
            if registry is not None:
                kill(registry)
                _forget_state(ns)
        if self._started_ray:
            ray.shutdown()


def _forget_state(namespace: str) -> None:
    try:
        from ray.experimental import internal_kv

        internal_kv._internal_kv_del(f"toolray:{namespace}:registry".encode())
    except Exception:
        pass


def _probe(address: str) -> None:
    """Fail fast, in one line, when a ``host:port`` address refuses connections.

    Ray itself would retry for a minute before saying so.
    """
    target = address.split("://", 1)[-1]
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", "local" or a form Ray resolves itself
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            return
    except OSError as err:
        raise StartError(f"cannot reach the Ray cluster at {address!r}: {err}") from None


def _init_ray(cfg: RuntimeConfig, address: str | None) -> None:
    # Token authentication stays on: choosing it explicitly is what silences Ray's
    # "enabled by default" warning (RAY-NOTES §2); we never opt out of it.
    if "RAY_AUTH_MODE" not in os.environ:
        os.environ["RAY_AUTH_MODE"] = "token"
        try:  # Ray caches its config at import; refresh it as Ray itself does
            from ray._raylet import Config

            Config.initialize("")
        except Exception:
            pass
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Workers import the driver's modules (tools defined in a script or a test module).
    paths = [p for p in (os.getcwd(), str(Path.cwd())) if p]
    existing = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*paths, *existing.split(os.pathsep)]))
    kwargs: dict[str, Any] = {
        "namespace": cfg.namespace,
        "log_to_driver": cfg.ray.log_to_driver,
        "ignore_reinit_error": True,
    }
    if address:
        try:
            ray.init(address=address, **kwargs)
        except Exception as err:
            raise StartError(f"cannot reach the Ray cluster at {address!r}: {err}") from None
        return
    kwargs["include_dashboard"] = cfg.ray.include_dashboard
    if cfg.ray.num_cpus is not None:
        kwargs["num_cpus"] = cfg.ray.num_cpus
    if cfg.ray.object_store_memory_mb is not None:
        kwargs["object_store_memory"] = cfg.ray.object_store_memory_mb * 2**20
    try:
        ray.init(**kwargs)
    except Exception as err:
        raise StartError(f"cannot start a local Ray instance: {err}") from None
