"""Raw Ray doing the same work as a toolray batch: the baseline of ``toolray bench``.

``GroupShape`` says which calls of a batch are exclusive barriers; ``stages_of`` turns that
into the stages toolray's scheduler makes (runs of safe calls, single barriers). One async
driver actor (executor-like) fans bare calls out to plain async worker actors:
the same stages (parallel groups, exclusive barriers), the same concurrency cap, the same
least-loaded pick and the same bodies, timing each call from submit to result. Nothing
else: no registry, validation, pipeline, ordered commit, results or cancellation ladder.

The bodies live here too, so the toolray tools of the benchmark run exactly this code:
``noop`` and ``sleep`` are coroutines (awaited on the worker's loop), ``cpu`` is a plain
function (run in the worker's thread pool), as a toolray worker runs them.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypedDict

import cloudpickle

from toolray import ToolDefinition, ToolOutput, define_tool, text_block

__all__ = (
    "BODIES",
    "GroupShape",
    "RawBaseline",
    "RawStage",
    "bench_tool",
    "cpu_body",
    "noop_body",
    "sleep_body",
    "stages_of",
)

BODIES = ("noop", "sleep", "cpu")


@dataclass(frozen=True, slots=True)
class RawStage:
    """A raw-Ray stage: ``calls`` calls together (``parallel``, up to the cap) or one at a time.

    Not :class:`toolray.lowlevel.Stage` (the planner's): the baseline only needs a count per stage.
    """

    parallel: bool
    calls: int


@dataclass(frozen=True, slots=True)
class GroupShape:
    """``safe`` parallel calls then ``exclusive`` barrier calls, repeated (``safe=None``: all)."""

    label: str
    safe: int | None
    exclusive: int = 0

    @classmethod
    def parse(cls, text: str) -> GroupShape:
        """``safe`` · ``exclusive`` · ``mixed:S+X`` (groups of S safe calls and X exclusive)."""
        text = text.strip()
        if text == "safe":
            return cls("safe", None)
        if text == "exclusive":
            return cls("exclusive", 0, 1)
        head, _, tail = text.partition(":")
        safe, plus, excl = tail.partition("+")
        if head != "mixed" or not plus or not (safe.isdigit() and excl.isdigit()):
            raise ValueError(f"bad group shape {text!r}: use safe, exclusive or mixed:S+X")
        if int(safe) + int(excl) == 0:
            raise ValueError(f"bad group shape {text!r}: a group needs at least one call")
        return cls(text, int(safe), int(excl))

    def exclusive_flags(self, calls: int) -> list[bool]:
        """For each call in model order: is it an exclusive barrier?"""
        if self.safe is None:
            return [False] * calls
        period = self.safe + self.exclusive
        return [i % period >= self.safe for i in range(calls)]

    def group_size(self, calls: int) -> int:
        """How many calls may run together (before the cap)."""
        return calls if self.safe is None else max(self.safe, 1)


def stages_of(flags: list[bool]) -> list[RawStage]:
    """The stages the scheduler makes of these calls: runs of safe calls, single barriers."""
    stages: list[RawStage] = []
    for exclusive in flags:
        last = stages.pop() if stages else None
        if last is not None and not exclusive and last.parallel:
            stages.append(RawStage(True, last.calls + 1))
            continue
        if last is not None:
            stages.append(last)
        stages.append(RawStage(not exclusive, 1))
    return stages


# ---------------------------------------------------------------------- the work
class BenchArgs(TypedDict, total=False):
    """A bench call's arguments."""

    ms: float
    exclusive: bool


async def noop_body(args: BenchArgs, ctx: object) -> str:
    """Does nothing."""
    return "ok"


async def sleep_body(args: BenchArgs, ctx: object) -> str:
    """Awaits ``ms`` milliseconds."""
    await asyncio.sleep(float(args.get("ms", 0)) / 1000)
    return "ok"


def cpu_body(args: BenchArgs, ctx: object) -> str:
    """Spins the CPU for ``ms`` milliseconds (a pure-Python loop)."""
    end = time.perf_counter() + float(args.get("ms", 0)) / 1000
    spins = 0
    while time.perf_counter() < end:
        spins += 1
    return "ok"


_EXECUTE = {"noop": noop_body, "sleep": sleep_body, "cpu": cpu_body}


def _safe(args: BenchArgs) -> bool:
    return not args.get("exclusive", False)


def bench_tool(body: str) -> ToolDefinition:
    """The toolray tool ``bench_<body>`` (``exclusive: true`` makes a call a barrier).

    Its code travels by value, as a user's tool module would: a call process that loads it
    imports neither this package nor Ray.
    """
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    return define_tool(
        name=f"bench_{body}",
        description=f"toolray bench body: {body}",
        parameters={"ms": {"type": "number"}, "exclusive": {"type": "boolean"}},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        execute=_EXECUTE[body],
        is_concurrency_safe=_safe,
    )


# ---------------------------------------------------------------------- the actors
class _RawWorker:
    """A bare worker: runs one body per call, coroutines on its loop, the rest in threads."""

    def __init__(self, threads: int) -> None:
        self._pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="raw-body")

    async def run(self, body: str, args: BenchArgs) -> str:
        fn: Any = _EXECUTE[body]
        if asyncio.iscoroutinefunction(fn):
            return str(await fn(args, None))
        loop = asyncio.get_running_loop()
        return str(await loop.run_in_executor(self._pool, fn, args, None))

    async def bare(self) -> str:
        """Nothing at all: the floor of a Ray actor call."""
        return "ok"

    async def ping(self) -> bool:
        return True

    async def pid(self) -> int:
        return os.getpid()


class _Slot:
    __slots__ = ("handle", "in_flight")

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.in_flight = 0


class _RawDriver:
    """The executor-like actor: runs stages of bare calls with a cap, timing each call."""

    def __init__(self, workers: list[Any]) -> None:
        self._slots = [_Slot(h) for h in workers]

    async def ready(self) -> int:
        await asyncio.gather(*(s.handle.ping.remote() for s in self._slots))
        return len(self._slots)

    async def _one(
        self, gate: asyncio.Semaphore, body: str, args: BenchArgs, out: list[float]
    ) -> None:
        async with gate:
            slot = min(self._slots, key=lambda s: s.in_flight)
            slot.in_flight += 1
            start = time.perf_counter()
            try:
                await slot.handle.run.remote(body, args)
            finally:
                slot.in_flight -= 1
            out.append(time.perf_counter() - start)

    async def relay(self, body: str, args: BenchArgs) -> str:
        """One call of ``body`` on the first worker, relayed (a two-hop round trip)."""
        first = next(iter(self._slots))
        return str(await first.handle.run.remote(body, args))

    async def bare(self) -> str:
        """One argument-less call to the first worker, relayed (the bare two-hop floor)."""
        first = next(iter(self._slots))
        return str(await first.handle.bare.remote())

    async def pid(self) -> int:
        return os.getpid()

    async def run(
        self, stages: list[RawStage], cap: int, body: str, args: BenchArgs
    ) -> list[float]:
        """Run every stage in order; returns each call's latency in seconds."""
        gate = asyncio.Semaphore(cap)
        latencies: list[float] = []
        for stage in stages:
            if stage.parallel:
                jobs = (self._one(gate, body, args, latencies) for _ in range(stage.calls))
                await asyncio.gather(*jobs)
            else:
                for _ in range(stage.calls):
                    await self._one(gate, body, args, latencies)
        return latencies


@functools.cache
def _actor_classes() -> tuple[Any, Any]:
    import ray  # only when measuring: the command line parses its options without Ray

    remote = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)
    return remote(_RawWorker), remote(_RawDriver)


class RawBaseline:
    """``workers`` bare worker actors and one driver actor; ``close()`` kills them all.

    Example:
        >>> raw = RawBaseline(workers=2, threads=64)          # doctest: +SKIP
        >>> lat = await raw.run([RawStage(True, 100)], 10, "noop", {})  # doctest: +SKIP
        >>> raw.close()                                       # doctest: +SKIP
    """

    def __init__(self, *, workers: int, threads: int) -> None:
        # The same per-worker concurrency as a toolray worker (see _handles.create_worker).
        worker, driver = _actor_classes()
        options = {"max_concurrency": max(threads, 8) + 8}
        self.workers = [worker.options(**options).remote(threads) for _ in range(workers)]
        self.driver = driver.options(max_concurrency=1000).remote(self.workers)

    async def ready(self) -> None:
        """Wait until the driver and every worker answer."""
        await self.driver.ready.remote()

    async def run(
        self, stages: list[RawStage], cap: int, body: str, args: BenchArgs
    ) -> list[float]:
        """One batch's worth of bare calls; per-call latencies in seconds."""
        return list(await self.driver.run.remote(stages, cap, body, args))

    async def relay(self, body: str, args: BenchArgs) -> str:
        """One call of ``body`` via the driver actor to a worker: this process → actor → actor."""
        return str(await self.driver.relay.remote(body, args))

    async def bare_relay(self) -> str:
        """The same two hops with no argument and no body: the floor of a two-hop call."""
        return str(await self.driver.bare.remote())

    def close(self) -> None:
        """Kill the driver and the workers."""
        import ray

        for handle in (self.driver, *self.workers):
            try:
                ray.kill(handle, no_restart=True)
            except Exception:  # already gone
                continue
