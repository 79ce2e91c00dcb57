"""Synchronisation for tests: gates, a sequencer and a recording tool."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, final

from toolray._content import text_block
from toolray._definition import ToolDefinition, ToolOutput, define_tool
from toolray._latch import Latch

__all__ = ("Gate", "RecordingTool", "Sequencer")


@final
class Gate:
    """A one-shot gate: bodies block until the test opens it (from any thread or loop)."""

    __slots__ = ("_latch",)

    def __init__(self) -> None:
        self._latch = Latch()

    @property
    def is_open(self) -> bool:
        """Whether the gate is open."""
        return self._latch.is_set

    def open(self) -> None:
        """Open the gate (idempotent)."""
        self._latch.set()

    async def wait(self) -> None:
        """Wait until the gate opens."""
        await self._latch.wait()

    def wait_sync(self, timeout: float | None = None) -> bool:
        """Block this thread until the gate opens (or ``timeout`` seconds pass)."""
        return self._latch.wait_sync(timeout)


@final
class Sequencer:
    """Run sections in a fixed order across tasks: ``async with seq(2): ...`` waits for 0, 1.

    Example:
        >>> import asyncio
        >>> seq, order = Sequencer(), []
        >>> async def step(i):
        ...     async with seq(i):
        ...         order.append(i)
        >>> async def main():
        ...     await asyncio.gather(step(1), step(0), step(2))
        >>> asyncio.run(main()); order
        [0, 1, 2]
    """

    def __init__(self) -> None:
        self._gates: dict[int, Gate] = {}
        self._next = 0

    def _gate(self, position: int) -> Gate:
        return self._gates.setdefault(position, Gate())

    def __call__(self, position: int) -> _Turn:
        return _Turn(self, position)


class _Turn:
    def __init__(self, seq: Sequencer, position: int) -> None:
        self._seq, self._position = seq, position

    async def __aenter__(self) -> None:
        if self._position > 0:
            await self._seq._gate(self._position - 1).wait()

    async def __aexit__(self, *exc: object) -> None:
        self._seq._gate(self._position).open()


@dataclass
class RecordingTool:
    """A tool that records start/end order and the highest concurrency it saw.

    ``gates[call_key]`` (if present) holds the body until opened; ``fail`` makes it raise.
    The body is async unless ``sync=True`` (then it runs in a thread and blocks on the gate).
    """

    name: str = "rec"
    safe: bool = True
    sync: bool = False
    gates: dict[str, Gate] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)
    running: int = 0
    max_running: int = 0
    started: dict[str, Gate] = field(default_factory=dict)
    fail: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def started_gate(self, key: str) -> Gate:
        """A gate that opens when the body for ``key`` starts."""
        return self.started.setdefault(key, Gate())

    def _enter(self, key: str) -> None:
        with self._lock:
            self.events.append(f"start:{key}")
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        self.started_gate(key).open()

    def _leave(self, key: str) -> None:
        with self._lock:
            self.events.append(f"end:{key}")
            self.running -= 1
        if key in self.fail:
            raise RuntimeError(f"{self.name} failed for {key}")

    @property
    def starts(self) -> list[str]:
        """Keys in start order."""
        return [e[6:] for e in self.events if e.startswith("start:")]

    @property
    def ends(self) -> list[str]:
        """Keys in end order."""
        return [e[4:] for e in self.events if e.startswith("end:")]

    @property
    def max_concurrency(self) -> int:
        """The highest number of bodies seen running at once."""
        return self.max_running

    def definition(self, **overrides: Any) -> ToolDefinition:
        """The tool definition (``{"key": str}`` arguments; the value echoes the key)."""
        classify: Callable[[Any], bool] = lambda args: self.safe  # noqa: E731

        async def run_async(args: Any, ctx: Any) -> str:
            key = args["key"]
            self._enter(key)
            try:
                gate = self.gates.get(key)
                if gate is not None:
                    await gate.wait()
                await asyncio.sleep(0)
            finally:
                self._leave(key)
            return str(key)

        def run_sync(args: Any, ctx: Any) -> str:
            key = args["key"]
            self._enter(key)
            try:
                gate = self.gates.get(key)
                if gate is not None:
                    gate.wait_sync()
            finally:
                self._leave(key)
            return str(key)

        options: dict[str, Any] = {
            "name": self.name,
            "description": f"recording tool {self.name}",
            "parameters": {"key": {"type": "string", "required": True}},
            "output": ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
            "execute": run_sync if self.sync else run_async,
            "is_concurrency_safe": classify,
        }
        options.update(overrides)
        return define_tool(**options)
