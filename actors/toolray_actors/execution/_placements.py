"""The worker pools and rate buckets one executor actor sends to, each started on first use.

A call's placement (``None``: the default pool; a named pool; resources) maps to one pool
plan and so one :class:`PoolClient`; a frozen placement is looked up once. A rate-limited
tool's bucket actor is found (or created) the first time the tool is limited here.
"""

from __future__ import annotations

import contextlib
from typing import Any

from toolray_actors._config import RuntimeConfig
from toolray_actors._handles import control_options, create_bucket
from toolray_actors._placement import pool_plan

from ._metrics import PoolMetrics
from ._pool import start_pool
from ._pool_client import PoolClient

__all__ = ("Placements",)


class Placements:
    """An executor actor's pools (by plan key) and rate buckets (by tool)."""

    def __init__(self, namespace: str, config: RuntimeConfig) -> None:
        self.namespace = namespace
        self.config = config
        self.pools: dict[str, PoolClient] = {}
        self.buckets: dict[str, Any] = {}
        self.metrics = PoolMetrics()
        self._placed: dict[object, PoolClient] = {}

    def bucket_for(self, tool: str) -> Any:
        """The bucket actor of ``tool``."""
        handle = self.buckets.get(tool)
        if handle is None:
            control = control_options(self.config.control_resource)
            handle = self.buckets[tool] = create_bucket(tool, self.namespace, control)
        return handle

    def forget_code(self, key: str) -> None:
        """Definition ``key`` went (its scope was disposed): the pools forget sending it.

        Every worker slot remembers the definitions it was sent; a scope's own tools come
        and go with it, so what went has to be forgotten, or the sets grow without bound.
        """
        for client in self.pools.values():
            client.forget_code(key)

    def killed(self, pool: PoolClient) -> None:
        """The ladder killed in ``pool``: its metric (tagged with the pool's key)."""
        self.metrics.killed(next((k for k, c in self.pools.items() if c is pool), ""))

    def pool_for(self, placement: Any) -> PoolClient:
        """The pool a call placed at ``placement`` runs in."""
        try:  # a frozen value: looked up once (no context manager per call: a hot path)
            return self._placed[placement]
        except (KeyError, TypeError):
            pass
        plan = pool_plan(placement, self.config)
        client = self.pools.get(plan.key)
        if client is None:
            control = control_options(self.config.control_resource)
            client = self.pools[plan.key] = start_pool(plan, self.namespace, control)
        with contextlib.suppress(TypeError):  # unhashable (a resources dict): not kept
            self._placed[placement] = client
        return client
