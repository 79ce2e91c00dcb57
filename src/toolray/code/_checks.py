"""The checks of ``PythonRuntime``'s arguments: clear errors for bad settings and calls."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping

from ._confinement import MODES
from ._types import Binding

__all__ = ("check_call", "check_settings", "read_path_list")


def check_settings(
    *,
    timeout_s: float | None,
    cpu_s: float | None,
    memory_mb: int | None,
    scratch_mb: int,
    allowed_imports: Iterable[str],
    confinement: str,
    python: str,
    warm: int,
    warm_ttl_s: float,
    max_outstanding_calls: int,
    max_run_bytes: int,
) -> frozenset[str]:
    """Raise ``TypeError`` / ``ValueError`` for a bad setting; the allowed modules as a set."""
    _check_positive("timeout_s", timeout_s)
    _check_positive("cpu_s", cpu_s)
    _check_positive("warm_ttl_s", warm_ttl_s, optional=False)
    if memory_mb is not None and (type(memory_mb) is not int or memory_mb < 16):
        raise ValueError(f"memory_mb must be an integer of at least 16, got {memory_mb!r}")
    _check_count("scratch_mb", scratch_mb, 1)
    _check_count("warm", warm, 0)
    _check_count("max_outstanding_calls", max_outstanding_calls, 1)
    _check_count("max_run_bytes", max_run_bytes, 1024)
    if confinement not in MODES:
        raise ValueError(f'confinement must be "auto", "strict" or "off", got {confinement!r}')
    if not isinstance(python, str) or not python or "\0" in python:
        raise ValueError(f"python must be a path to an interpreter, got {python!r}")
    allowed = frozenset(allowed_imports)
    if not all(isinstance(name, str) and name.isidentifier() for name in allowed):
        raise ValueError("allowed_imports must hold top-level module names")
    return allowed


def read_path_list(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """``read_paths`` as absolute, existing, resolved paths (``ValueError`` otherwise)."""
    if isinstance(paths, str | bytes):
        raise TypeError("read_paths must be an iterable of paths, not one path")
    found = []
    for path in paths:
        text = os.fspath(path)
        if not isinstance(text, str) or not os.path.isabs(text) or "\0" in text:
            raise ValueError(f"read_paths must hold absolute paths, got {path!r}")
        if not os.path.exists(text):
            raise ValueError(f"read_paths: {text} does not exist")
        found.append(os.path.realpath(text))
    return found


def _check_count(name: str, value: object, least: int) -> None:
    if type(value) is not int or value < least:
        raise ValueError(f"{name} must be an integer of at least {least}, got {value!r}")


def _check_positive(name: str, value: float | None, *, optional: bool = True) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number{' or None' if optional else ''}, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def check_call(program: object, bindings: Mapping[str, Binding]) -> None:
    """``TypeError`` for a program that is no string or a binding that is not callable."""
    if not isinstance(program, str):
        raise TypeError(f"program must be a string, got {type(program).__name__}")
    for name, binding in bindings.items():
        if not isinstance(name, str) or not callable(binding):
            raise TypeError(f"binding {name!r} must be a callable under a string name")
