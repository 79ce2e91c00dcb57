"""The child's containment in Python: resource limits, the import guard, JSON checks.

Loaded by ``_child.py`` from the same directory, standard library only. None of this is a
boundary on its own (Python code can always reach ``os`` through object introspection):
the boundary is the kernel's — namespaces, Landlock and the syscall filter, beside this
file — and these are the limits and the first line a well-behaved program meets.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import math
import os
import resource
import signal
from collections.abc import Callable
from typing import Any

EXIT_HOST_GONE = 85
EXIT_MEMORY = 86
EXIT_CPU = 87
EXIT_EXPIRED = 88
MAX_OPEN_FILES = 32
MAX_TASKS = 64
"""``RLIMIT_NPROC``: the process and its threads (set inside its user namespace, where only
the child's own tasks count; the syscall filter refuses new processes anyway)."""
REMOVED_BUILTINS = ("open", "input", "breakpoint", "help", "exit", "quit")

_reserve: bytearray | None = bytearray(1 << 20)
_memory_bytes: int | None = None
_real_import = builtins.__import__


class ModuleNotAllowedError(ImportError):
    """An import outside the runtime's ``allowed_imports``."""


def preload(modules: list[str]) -> None:
    """Import the allowed modules now, before the limits and the guard are in place."""
    for name in modules:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def release_reserve() -> None:
    """Free the memory kept back so a ``MemoryError`` can still be reported."""
    global _reserve
    _reserve = None


def memory_message() -> str:
    release_reserve()
    limit = "" if _memory_bytes is None else f" ({_memory_bytes // (1024 * 1024)} MiB)"
    return f"MemoryError: the program ran out of memory{limit}"


def confine(*, memory_bytes: int | None, cpu_s: float | None, file_bytes: int) -> None:
    """Apply the resource limits to this process and forbid subprocesses in asyncio."""
    global _memory_bytes
    _memory_bytes = memory_bytes
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_NOFILE, MAX_OPEN_FILES)
    _limit(resource.RLIMIT_NPROC, MAX_TASKS)
    _limit(resource.RLIMIT_FSIZE, file_bytes)
    _limit(resource.RLIMIT_MEMLOCK, 0)
    _limit(resource.RLIMIT_MSGQUEUE, 0)
    if cpu_s is not None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        soft = math.ceil(usage.ru_utime + usage.ru_stime + cpu_s)
        _limit(resource.RLIMIT_CPU, soft, soft + 1)
        # As pid 1 of its namespace the process would ignore SIGXCPU's default action.
        signal.signal(signal.SIGXCPU, _cpu_exhausted)
    if memory_bytes is not None:
        _limit(resource.RLIMIT_AS, memory_bytes)
    _forbid_subprocesses()


def _cpu_exhausted(signum: int, frame: object) -> None:
    os._exit(EXIT_CPU)


def _limit(which: int, soft: int, hard: int | None = None) -> None:
    _, old_hard = resource.getrlimit(which)
    hard = soft if hard is None else hard
    if old_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, old_hard), min(hard, old_hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(which, (soft, hard))


def _no_subprocess(*args: object, **kwargs: object) -> Any:
    raise PermissionError("subprocesses are not available to run_code programs")


def _forbid_subprocesses() -> None:
    import asyncio.base_events
    import asyncio.subprocess

    for owner in (asyncio, asyncio.subprocess):
        setattr(owner, "create_subprocess_exec", _no_subprocess)  # noqa: B010
        setattr(owner, "create_subprocess_shell", _no_subprocess)  # noqa: B010
    asyncio.base_events.BaseEventLoop.subprocess_exec = _no_subprocess  # type: ignore[method-assign]
    asyncio.base_events.BaseEventLoop.subprocess_shell = _no_subprocess  # type: ignore[method-assign]


# -- builtins and the import guard ---------------------------------------------------------
def program_builtins(
    print_fn: Callable[..., None], allowed: frozenset[str], namespace: dict[str, Any]
) -> dict[str, Any]:
    """The program's builtins: no ``open``/``input``, ``print`` captured, imports guarded."""
    names = ", ".join(sorted(allowed))

    def guarded_import(
        name: str,
        globals: Any = None,  # the signature of __import__
        locals: Any = None,
        fromlist: Any = (),
        level: int = 0,
    ) -> Any:
        # Only the program's own imports are checked; the allowed modules import their
        # internals (``decimal`` imports ``_decimal``) through the same hook.
        if globals is None or globals is namespace:
            top = name.partition(".")[0]
            if level != 0 or top not in allowed:
                shown = name if level == 0 else "." * level + name
                raise ModuleNotAllowedError(f'module "{shown}" is not allowed (allowed: {names})')
        return _real_import(name, globals, locals, fromlist, level)

    table = dict(vars(builtins))
    for name in REMOVED_BUILTINS:
        table.pop(name, None)
    table["print"] = print_fn
    table["__import__"] = guarded_import
    builtins.__import__ = guarded_import  # also behind len.__self__.__import__
    return table


# -- lossless JSON (the core's rule: finite floats other than -0.0, exact containers) -------
_SCALARS = (str, int, bool, type(None))


def _float_problem(value: float) -> str | None:
    if value != value:
        return "NaN is not a JSON number"
    if value in (math.inf, -math.inf):
        return "an infinity is not a JSON number"
    if value == 0.0 and math.copysign(1.0, value) < 0:
        return "-0.0 is not lossless JSON"
    return None


def _problem(value: Any, on_path: set[int]) -> str | None:
    kind = type(value)
    if kind in _SCALARS:
        return None
    if kind is float:
        return _float_problem(value)
    if kind is tuple:
        return "a tuple is not a JSON array"
    if kind is not dict and kind is not list:
        return f"{kind.__name__} is not a JSON value"
    return "circular reference" if id(value) in on_path else None


_PLAIN = frozenset(_SCALARS)
_FAST_DEPTH = 16


def _plainly_json(value: Any, depth: int) -> bool:
    """Whether ``value`` is surely lossless: small and shallow, its leaves plain scalars.

    ``False`` leaves the verdict (and the path of a problem) to the full walk.
    """
    kind = type(value)
    if kind in _PLAIN or (kind is float and _float_problem(value) is None):
        return True
    if depth > _FAST_DEPTH:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not _plainly_json(item, depth + 1):
                return False
        return True
    return kind is list and all(_plainly_json(item, depth + 1) for item in value)


def non_json(value: Any, root: str) -> str | None:
    """``"<path>: <problem>"`` for the first non-lossless place in ``value``, else ``None``."""
    if _plainly_json(value, 0):  # the common case, without building a path per value
        return None
    problem = _problem(value, set())
    if problem is not None:
        return f"{root}: {problem}"
    stack: list[Any] = [(value, root)]
    on_path: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, int):
            on_path.discard(item)
            continue
        container, path = item
        if type(container) not in (dict, list):
            continue
        on_path.add(id(container))
        stack.append(id(container))
        pairs = container.items() if type(container) is dict else enumerate(container)
        for key, child in pairs:
            if type(container) is dict and type(key) is not str:
                return f"{path}: key {key!r} is not a string"
            where = f"{path}.{key}" if type(container) is dict else f"{path}[{key}]"
            problem = _problem(child, on_path)
            if problem is not None:
                return f"{where}: {problem}"
            if type(child) in (dict, list):
                stack.append((child, where))
    return None
