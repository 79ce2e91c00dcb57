"""Where Ray comes from: the process's Ray, a cluster Ray finds, or a fresh local one.

With no address, ``connect_ray`` behaves like ``ray.init()``: a Ray already initialised in
this process (a notebook's ``ray.init()``) is used as it is; else the cluster Ray finds
(``RAY_ADDRESS``, or the last ``ray start`` on this machine) is attached to, without the
config's local-start options; else a local instance starts with them. ``"local"`` always
starts a fresh embedded instance. Only a local start chooses an auth mode (token, which is
what silences Ray 2.59+'s "enabled by default" warning); a cluster we did not start keeps
its own.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

import ray

from toolray.errors import ToolrayError
from toolray_actors._config import RuntimeConfig

__all__ = ("NoClusterError", "StartError", "connect_ray", "probe")


class StartError(ToolrayError, RuntimeError):
    """Ray could not be started or reached (the message says how to fix it)."""


class NoClusterError(StartError):
    """``address="auto"`` found no running cluster to attach to."""


def probe(address: str) -> None:
    """Fail fast, in one line, when a ``host:port`` address refuses connections.

    Ray itself would retry for a minute before saying so.
    """
    _, _, target = address.rpartition("://")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", "local" or a form Ray resolves itself
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            return
    except OSError as err:
        raise StartError(f"cannot reach the Ray cluster at {address!r}: {err}") from None


def _found_cluster() -> str | None:
    """The address ``ray.init()`` would attach to, or ``None`` (it would start one).

    As Ray documents it: ``RAY_ADDRESS`` if set (``"local"`` starts one), else the cluster
    of the last ``ray start`` on this machine (its address in ``ray_current_cluster`` in
    Ray's temporary directory).
    """
    env = os.environ.get("RAY_ADDRESS", "")
    if env and env != "auto":
        return None if env == "local" else env
    try:
        found = (_ray_temp_dir() / "ray_current_cluster").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return found or None


def _ray_temp_dir() -> Path:
    """Ray's temporary directory: ``$RAY_TMPDIR``, else ``$TMPDIR`` or ``/tmp``, then ``ray``."""
    if "RAY_TMPDIR" in os.environ:
        base = os.environ["RAY_TMPDIR"]
    elif sys.platform.startswith("linux") and "TMPDIR" in os.environ:
        base = os.environ["TMPDIR"]
    elif sys.platform.startswith(("linux", "darwin")):
        base = "/tmp"
    else:
        base = tempfile.gettempdir()
    return Path(base) / "ray"


def connect_ray(cfg: RuntimeConfig) -> bool:
    """Make sure this process is connected to Ray; ``True`` if this call initialised it."""
    if cfg.address not in (None, "auto", "local"):
        probe(cfg.address)  # a refused host:port fails in one line, before anything else
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    kwargs: dict[str, Any] = {
        "namespace": cfg.namespace,
        "log_to_driver": cfg.ray.log_to_driver,
    }
    if cfg.ray.runtime_env is not None:
        kwargs["runtime_env"] = dict(cfg.ray.runtime_env)
    address = cfg.address
    if address in (None, "auto"):
        found = _found_cluster()
        if found is None and address == "auto":
            raise NoClusterError(
                "address='auto' found no running Ray cluster (start one with `ray start "
                "--head`, set RAY_ADDRESS, or use address='local')"
            )
        address = found
    if address is not None and address != "local":
        probe(address)
        try:
            ray.init(address=address, **kwargs)
        except Exception as err:
            raise StartError(f"cannot reach the Ray cluster at {address!r}: {err}") from None
        return True
    _start_local(cfg, kwargs)
    return True


def _start_local(cfg: RuntimeConfig, kwargs: dict[str, Any]) -> None:
    # Authentication: Ray (2.59+) starts a local cluster in token mode unless RAY_AUTH_MODE
    # says otherwise; toolray leaves that choice to Ray and to the user.
    # Workers import the driver's modules (tools defined in a script or a test module).
    existing = os.environ.get("PYTHONPATH", "")
    paths = [str(Path.cwd()), *existing.split(os.pathsep)]
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in dict.fromkeys(paths) if p)
    opts = cfg.ray
    local: dict[str, Any] = {
        "include_dashboard": opts.include_dashboard,
        "dashboard_host": opts.dashboard_host,
        "dashboard_port": opts.dashboard_port,
        "num_cpus": opts.num_cpus,
        "num_gpus": opts.num_gpus,
        "resources": dict(opts.resources) or None,
        "object_store_memory": (
            None if opts.object_store_memory_mb is None else opts.object_store_memory_mb * 2**20
        ),
    }
    kwargs.update((key, value) for key, value in local.items() if value is not None)
    try:
        ray.init(address="local", **kwargs)
    except Exception as err:
        raise StartError(f"cannot start a local Ray instance: {err}") from None
