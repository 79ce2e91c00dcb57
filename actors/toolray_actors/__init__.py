"""toolray_actors: the Ray layer of toolray.

A registry actor per namespace (shared by every driver, kept alive by their leases),
executor actors running the core pipeline and scheduler (one per agent scope, or sharded),
and pools of worker actors running the tool bodies, with the cancellation ladder
(forwarded abort → interrupt → kill and replace).
"""

from __future__ import annotations

from ._config import CodeConfig as CodeConfig
from ._config import ConfigError as ConfigError
from ._config import ExecutorsConfig as ExecutorsConfig
from ._config import PoolConfig as PoolConfig
from ._config import RayInitConfig as RayInitConfig
from ._config import RuntimeConfig as RuntimeConfig
from ._config import load_config as load_config
from ._errors import RuntimeUnavailableError as RuntimeUnavailableError
from ._executor_actor import ExecutorStats as ExecutorStats
from ._executor_handle import ExecutorHandle as ExecutorHandle
from ._ray_init import StartError as StartError
from ._remote_registry import RemoteRegistry as RemoteRegistry
from ._remote_registry import RemoteScope as RemoteScope
from ._runtime import RayRuntime as RayRuntime
from ._stats import ActorStats as ActorStats
from ._stats import RuntimeStats as RuntimeStats
from ._worker import ToolInterrupted as ToolInterrupted

__all__ = (
    "ActorStats",
    "CodeConfig",
    "ConfigError",
    "ExecutorHandle",
    "ExecutorStats",
    "ExecutorsConfig",
    "PoolConfig",
    "RayInitConfig",
    "RayRuntime",
    "RemoteRegistry",
    "RemoteScope",
    "RuntimeConfig",
    "RuntimeStats",
    "RuntimeUnavailableError",
    "StartError",
    "ToolInterrupted",
    "load_config",
)
