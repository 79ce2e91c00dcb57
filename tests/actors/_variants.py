"""Another namespace on the session cluster: the session's configuration, some keys changed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def variant_runtime(ray_runtime: Any, suffix: str, **overrides: Any) -> Iterator[Any]:
    """Yield a runtime on namespace ``<session namespace>-<suffix>`` with ``overrides``;
    shut it down afterwards (``yield from`` it in a fixture)."""
    from toolray_actors import RayRuntime, RuntimeConfig

    data = ray_runtime.config.model_dump()
    data.update(namespace=f"{data['namespace']}-{suffix}", **overrides)
    runtime = RayRuntime.start(RuntimeConfig.model_validate(data))
    yield runtime
    runtime.shutdown()
