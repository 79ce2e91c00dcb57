"""``toolray bench --scopes N``: N agent scopes submitting a batch each, at once, per mode.

For each executors mode (``per_scope``, and ``sharded`` with ``--shards`` shards) and each
N, a fresh namespace on the same local Ray. First the namespace starts what every scope
shares (its worker pool; in sharded mode every shard), timed apart as "namespace start".
Then N new agent scopes each submit one ``--scope-calls``-call batch (default 5) at the
same moment — per-scope mode starts their N executor actors here, as a farm would when N
agents arrive — and again on the same scopes. Figures: the time to the last result,
calls/s, whether every result is right (each call echoes its own text), and the executor
actors serving the agents with their total RSS (``rt.stats().actors``). The namespace is
torn down before the next one. Then, per mode, the no-op 1,000-call batch against raw
Ray's per-call fan-out (``bench_rows``: same worker actors, side by side).

Example:
    >>> opts = ScopesOptions(scopes=(30,), repetitions=1)         # doctest: +SKIP
    >>> report = run_scopes(base_runtime, opts, say=print)        # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ._rawray import GroupShape

if TYPE_CHECKING:
    from toolray_actors import RayRuntime

__all__ = ("MODES", "ScopesOptions", "echo_tool", "measure_scopes", "run_scopes")

MODES = ("per_scope", "sharded")

Say = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScopesOptions:
    """What ``run_scopes`` measures."""

    scopes: tuple[int, ...]
    modes: tuple[str, ...] = MODES
    shards: int = 2
    scope_calls: int = 5
    per_scope_max: int = 100
    """Per-scope rows above this many scopes are skipped (one ≈ 93 MB actor per scope)."""
    noop_calls: int = 1000
    """Calls of the no-op batch measured against raw Ray per mode (0: skip it)."""
    repetitions: int = 3

    def check(self) -> None:
        """Raise ``ValueError`` for options that cannot be measured."""
        if not self.scopes or min(self.scopes) < 1:
            raise ValueError("--scopes takes positive counts: N or N,M,…")
        if unknown := set(self.modes) - set(MODES):
            raise ValueError(f"unknown executors mode(s) {sorted(unknown)}: use per_scope, sharded")
        if self.shards < 1 or self.scope_calls < 1 or self.repetitions < 1:
            raise ValueError("--shards, --scope-calls and --repetitions must be at least 1")


async def _echo(args: Any, ctx: Any) -> str:
    return str(args.get("text", ""))


def echo_tool() -> Any:
    """``bench_echo``: echoes ``text`` (an async body; each call's result is checked)."""
    from toolray import ToolOutput, define_tool, text_block

    return define_tool(
        name="bench_echo",
        description="toolray bench body: echo text",
        parameters={"text": {"type": "string"}},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        execute=_echo,
        is_concurrency_safe=lambda a: True,
    )


def _sibling(base: RayRuntime, mode: str, shards: int) -> RayRuntime:
    from toolray_actors import RayRuntime, RuntimeConfig

    data = base.config.model_dump()
    data.update(
        namespace=f"{base.config.namespace}-{mode}-{uuid.uuid4().hex[:6]}",
        detached=False,
        executors={"mode": mode, "shards": shards},
    )
    return RayRuntime.start(RuntimeConfig.model_validate(data))  # Ray is up: attaches


def _text(key: str, j: int) -> str:
    return json.dumps({"text": f"{key}/{j}"})


def _all_right(keys: list[str], results: list[Any], calls: int) -> bool:
    return all(
        len(res.results) == calls
        and all(getattr(r.result, "value", None) == f"{k}/{j}" for j, r in enumerate(res.results))
        for k, res in zip(keys, results, strict=True)
    )


async def _start_namespace(rt: RayRuntime) -> float:
    """Start what every scope shares (the pool; in sharded mode every shard); its seconds.

    One 1-call batch per warm-up scope: one scope per shard, or one (per-scope) executor.
    """
    from toolray import AbortController, ToolBatchInput, ToolCall

    names: dict[str, str] = {}
    shards = rt.config.executors.shards if rt.config.executors.mode == "sharded" else 1
    for i in range(10 * shards):
        names.setdefault(rt.executor(f"warm-{i}").name, f"warm-{i}")
        if len(names) == shards:
            break
    one = [ToolCall("w", "bench_echo", "{}")]
    start = time.perf_counter()
    await asyncio.gather(
        *(
            rt.executor(k).execute_batch(ToolBatchInput(one, AbortController().signal, scope=k))
            for k in names.values()
        )
    )
    return time.perf_counter() - start


_CONTROL = ("registry", "executor", "pool", "bucket")
"""The control actors (everything but the workers that run bodies)."""


async def measure_scopes(rt: RayRuntime, scopes: int, calls: int) -> dict[str, Any]:
    """N new scopes submit one ``calls``-call batch each at once, on a running namespace.

    First the namespace starts (its pool, and the shards in sharded mode: ``start_s``); then
    ``scopes`` new agent scopes submit at once (``wall_s``: per-scope mode starts their
    executor actors here), then again on the same scopes (``again_s``). Executor actors and
    RSS count the actors serving the agent scopes (not a per-scope warm-up executor); the
    per-scope memory is their growth over the scopes; the control actors are the registry,
    executors, pool managers and rate buckets of the namespace.
    """
    from toolray import AbortController, ToolBatchInput, ToolCall

    start_s = await _start_namespace(rt)
    before = {a.name: a.rss_bytes for a in (await asyncio.to_thread(rt.stats)).actors}
    keys = [f"agent-{i}" for i in range(scopes)]
    batches = [
        ToolBatchInput(
            [ToolCall(f"c{j}", "bench_echo", _text(k, j)) for j in range(calls)],
            AbortController().signal,
            scope=k,
        )
        for k in keys
    ]
    handles = [rt.executor(k) for k in keys]
    walls, right = [], True
    control_pids = [a.pid for a in (await asyncio.to_thread(rt.stats)).actors if a.kind in _CONTROL]
    waited = (await asyncio.to_thread(rt.stats)).batches_waited
    with PeakRss(control_pids) as peak:
        for _ in range(2):  # new scopes, then again on them
            start = time.perf_counter()
            runs = (h.execute_batch(b) for h, b in zip(handles, batches, strict=True))
            results = await asyncio.gather(*runs)
            walls.append(time.perf_counter() - start)
            right = right and _all_right(keys, results, calls)
    wall, again = walls
    stats = await asyncio.to_thread(rt.stats)
    serving = {h.name for h in handles}
    executors = [a for a in stats.actors if a.kind == "executor" and a.name in serving]
    rss = sum(a.rss_bytes for a in executors) / 2**20
    grown = sum(a.rss_bytes - before.get(a.name, 0) for a in executors) / 1024
    control = [a for a in stats.actors if a.kind in _CONTROL]
    return {
        "mode": rt.config.executors.mode,
        "shards": rt.config.executors.shards if rt.config.executors.mode == "sharded" else None,
        "scopes": scopes,
        "calls": scopes * calls,
        "start_s": start_s,
        "wall_s": wall,
        "calls_per_s": scopes * calls / wall,
        "again_s": again,
        "again_calls_per_s": scopes * calls / again,
        "all_right": right,
        "executor_actors": len(executors),
        "executor_rss_mb": rss,
        "rss_per_executor_mb": rss / max(1, len(executors)),
        "rss_per_scope_kb": grown / scopes,
        "control_actors": len(control),
        "control_rss_mb": sum(a.rss_bytes for a in control) / 2**20,
        "hosted_scopes": sum(a.scopes for a in executors),
        "control_peak_rss_mb": peak.total_bytes / 2**20,
        "batches_waited": stats.batches_waited - waited,
    }


class PeakRss:
    """The highest summed RSS of some local processes, sampled every 0.2 s in a thread."""

    def __init__(self, pids: list[int]) -> None:
        import psutil

        self._procs = [psutil.Process(pid) for pid in pids]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self.total_bytes = 0

    def _sample(self) -> None:
        while True:
            total = 0
            for proc in self._procs:
                try:
                    total += proc.memory_info().rss
                except Exception:  # gone (a shard restarted): not counted
                    continue
            self.total_bytes = max(self.total_bytes, total)
            if self._stop.wait(0.2):
                return

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def _noop_row(rt: RayRuntime, opts: ScopesOptions) -> dict[str, Any]:
    from toolray_actors.cli._bench import BenchOptions, bench_rows

    bench = BenchOptions(
        calls=opts.noop_calls,
        shapes=(GroupShape.parse("safe"),),
        cap=opts.noop_calls,
        repetitions=opts.repetitions,
    )
    (row,) = await bench_rows(rt, bench)
    return {"mode": rt.config.executors.mode, **row}


def run_scopes(base: RayRuntime, opts: ScopesOptions, *, say: Say | None = None) -> dict[str, Any]:
    """Every (mode, N) row and, per mode, the no-op batch vs raw Ray; the report."""
    from toolray_actors.cli._bench import machine

    opts.check()
    tell = say or (lambda what: None)
    rows: list[dict[str, Any]] = []
    noop: list[dict[str, Any]] = []
    started = time.perf_counter()
    for mode in opts.modes:
        for n in opts.scopes:
            if mode == "per_scope" and n > opts.per_scope_max:
                rows.append({"mode": mode, "scopes": n, "skipped": _why_skipped(n, opts)})
                tell(f"{mode}, {n} scopes: skipped")
                continue
            rt = _sibling(base, mode, opts.shards)
            try:
                rt.registry.register(echo_tool())
                row = asyncio.run(measure_scopes(rt, n, opts.scope_calls))
                rows.append(row)
                tell(f"{mode}, {n} scopes: {row['wall_s']:.1f} s")
            finally:
                rt.teardown()
        if opts.noop_calls:
            rt = _sibling(base, mode, opts.shards)
            try:
                noop_row = asyncio.run(_noop_row(rt, opts))
                noop.append(noop_row)
                ratio = noop_row["ratio"]
                tell(f"{mode}, {opts.noop_calls}-call no-op batch: {ratio:.2f}× raw Ray")
            finally:
                rt.teardown()
    return {
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "options": asdict(opts),
        "scopes": rows,
        "noop": noop,
        "seconds": time.perf_counter() - started,
    }


def _why_skipped(n: int, opts: ScopesOptions) -> str:
    return (
        f"over --per-scope-max {opts.per_scope_max}: {n} executor actors would need about "
        f"{n * 93 / 1024:.0f} GB and minutes to start on this machine"
    )
