"""Shared helpers for the Code Mode runtime tests: bindings, child-process bookkeeping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psutil

from toolray import AbortController, AbortSignal, JsonValue
from toolray.code import BindingError, CodeRunOutcome, PythonRuntime
from toolray.errors import CodeRunFailedError


def child_pids() -> set[int]:
    """Pids of this process's code-runtime children (zombies included: they still exist).

    Only processes below this process's own Code Mode templates count: a session's Ray
    cluster is a descendant too, and its workers come and go (a worker dying is a zombie
    whose command line is gone) whatever a test does.
    """
    found = set()
    for template in psutil.Process().children():
        try:
            if not any(part.endswith("_zygote.py") for part in template.cmdline()):
                continue
            below = template.children(recursive=True)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue  # a template that is gone has no children left to count
        for proc in below:
            try:
                if any(part.endswith("_child.py") for part in proc.cmdline()):
                    found.add(proc.pid)
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                found.add(proc.pid)
    return found


async def warm_pids(runtime: PythonRuntime) -> set[int]:
    """Start a fresh runtime's warm child; its pid (the child the next run will use)."""
    before = child_pids()
    await runtime.wait_warm()
    used = child_pids() - before
    assert len(used) == 1
    return used


class Recorder:
    """Bindings that record each call's arguments in arrival order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def bindings(self) -> dict[str, Any]:
        async def echo(args: Mapping[str, JsonValue]) -> JsonValue:
            self.calls.append(("echo", dict(args)))
            return {"echo": dict(args)}

        async def fail(args: Mapping[str, JsonValue]) -> JsonValue:
            self.calls.append(("fail", dict(args)))
            raise BindingError(f"failed with {len(args)} args")

        return {"echo": echo, "fail": fail}


async def run(
    runtime: PythonRuntime,
    program: str,
    bindings: Mapping[str, Any] | None = None,
    signal: AbortSignal | None = None,
) -> CodeRunOutcome:
    return await runtime.run(
        program, bindings if bindings is not None else {}, signal or AbortController().signal
    )


async def failure(runtime: PythonRuntime, program: str, **kw: Any) -> CodeRunFailedError:
    try:
        await run(runtime, program, **kw)
    except CodeRunFailedError as err:
        return err
    raise AssertionError("the run did not fail")


def kind_of(err: CodeRunFailedError) -> str:
    kind = getattr(err, "kind", None)
    assert isinstance(kind, str)
    assert err.message.startswith(f"code run failed ({kind}): ")
    return kind
