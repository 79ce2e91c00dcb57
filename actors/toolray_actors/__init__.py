"""toolray_actors: the Ray layer of toolray.

A registry actor per namespace, an executor actor per agent scope running the core
pipeline and scheduler, and pools of worker actors running the tool bodies, with the
cancellation ladder (forwarded abort → ``ray.cancel`` → kill and replace).
"""

from __future__ import annotations

from ._client import ExecutorHandle as ExecutorHandle
from ._client import RemoteRegistry as RemoteRegistry
from ._client import RemoteScope as RemoteScope
from ._config import ConfigError as ConfigError
from ._config import PoolConfig as PoolConfig
from ._config import RayInitConfig as RayInitConfig
from ._config import RuntimeConfig as RuntimeConfig
from ._config import load_config as load_config
from ._executor_actor import ExecutorStats as ExecutorStats
from ._runtime import RayRuntime as RayRuntime
from ._runtime import RuntimeStats as RuntimeStats
from ._runtime import StartError as StartError
from ._worker import ToolInterrupted as ToolInterrupted

__all__ = (
    "ConfigError",
    "ExecutorHandle",
    "ExecutorStats",
    "PoolConfig",
    "RayInitConfig",
    "RayRuntime",
    "RemoteRegistry",
    "RemoteScope",
    "RuntimeConfig",
    "RuntimeStats",
    "StartError",
    "ToolInterrupted",
    "load_config",
)
