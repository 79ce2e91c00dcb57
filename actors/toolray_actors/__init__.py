"""toolray_actors: the Ray layer of toolray.

A registry actor per namespace (shared by every driver, kept alive by their leases),
executor actors running the core pipeline and scheduler (one per agent scope, or sharded),
and pools of worker actors running the tool bodies, with the cancellation ladder
(forwarded abort → interrupt → kill and replace).

The configuration names (``RuntimeConfig``, ``load_config``, ``ConfigError``…) import without
Ray; every other name needs it (``pip install "toolray[ray]"``) and is imported on first use,
so the ``toolray`` command can say so in one line instead of a traceback.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from toolray.errors import ToolrayError

from ._config import CodeConfig as CodeConfig
from ._config import ConfigError as ConfigError
from ._config import ExecutorsConfig as ExecutorsConfig
from ._config import PoolConfig as PoolConfig
from ._config import RateLimitConfig as RateLimitConfig
from ._config import RayInitConfig as RayInitConfig
from ._config import RuntimeConfig as RuntimeConfig
from ._config import load_config as load_config

if TYPE_CHECKING:
    from ._errors import RuntimeUnavailableError as RuntimeUnavailableError
    from ._stats import ActorStats as ActorStats
    from ._stats import PoolStats as PoolStats
    from ._stats import RuntimeStats as RuntimeStats
    from ._stats import ToolStats as ToolStats
    from .driver._executor_handle import ExecutorHandle as ExecutorHandle
    from .driver._ray_init import StartError as StartError
    from .driver._remote_registry import RemoteRegistry as RemoteRegistry
    from .driver._remote_registry import RemoteScope as RemoteScope
    from .driver._runtime import RayRuntime as RayRuntime
    from .execution._executor_actor import ExecutorStats as ExecutorStats
    from .execution._worker import ToolInterrupted as ToolInterrupted

__all__ = (
    "ActorStats",
    "CodeConfig",
    "ConfigError",
    "ExecutorHandle",
    "ExecutorStats",
    "ExecutorsConfig",
    "PoolConfig",
    "PoolStats",
    "RateLimitConfig",
    "RayInitConfig",
    "RayMissingError",
    "RayRuntime",
    "RemoteRegistry",
    "RemoteScope",
    "RuntimeConfig",
    "RuntimeStats",
    "RuntimeUnavailableError",
    "StartError",
    "ToolInterrupted",
    "ToolStats",
    "load_config",
)

_NEEDS_RAY = {
    "ActorStats": "._stats",
    "ExecutorHandle": ".driver._executor_handle",
    "ExecutorStats": ".execution._executor_actor",
    "PoolStats": "._stats",
    "RayRuntime": ".driver._runtime",
    "RemoteRegistry": ".driver._remote_registry",
    "RemoteScope": ".driver._remote_registry",
    "RuntimeStats": "._stats",
    "RuntimeUnavailableError": "._errors",
    "StartError": ".driver._ray_init",
    "ToolInterrupted": ".execution._worker",
    "ToolStats": "._stats",
}


class RayMissingError(ToolrayError, ImportError):
    """Ray is not installed: the message names the extra that installs it."""


def require_ray() -> None:
    """Raise ``RayMissingError`` (one line naming the extra) when Ray cannot be imported."""
    try:
        import ray  # noqa: F401
    except ImportError as err:
        raise RayMissingError(
            f'this needs Ray, which is not installed ({err}): pip install "toolray[ray]"'
        ) from None


def __getattr__(name: str) -> Any:
    module = _NEEDS_RAY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    require_ray()
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
