"""Observability overhead: a call with tracing off, and with ``toolray.otel.instrument()`` on.

Run: ``.venv/bin/python benchmarks/bench_observability.py`` (in-process, about 20 s;
``--ray`` adds batches on a local Ray, about a minute more). Off and on are measured
alternately in one run, best of several rounds each (the machine is shared and noisy):

- **the seam alone**: what a call pays with nobody observing — ``start_call`` answering
  ``None`` (the one check a call makes), in µs;
- **execute()**: ``await registry.execute(...)`` of a no-op async tool, µs per call;
- **batch**: a batch of 100 no-op async calls, µs per call;
- **Ray** (``--ray``): a batch of 100 no-op calls (cap 100) through an executor actor to 2
  workers, µs per call (the executor's statistics and metrics are on in both rows; tracing
  adds the driver's spans, the executor's span records and the worker's context). One
  stage within its cap runs the same way either way; a batch wider than its cap would
  travel as one chain with tracing off and stage by stage with it on (a tracer watches
  each call's start), which is not the cost of tracing.

"On" uses the OpenTelemetry SDK's ``TracerProvider`` with a ``SimpleSpanProcessor`` and an
exporter that drops every span: the cost of making and ending spans, not of shipping them.
Writes ``RESULTS-observability.md`` beside this file.
"""

from __future__ import annotations

import asyncio
import os
import platform
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from toolray import (
    AbortController,
    ExecutionToken,
    ToolBatchInput,
    ToolCall,
    ToolExecutionInput,
    ToolRegistry,
    tool,
)
from toolray.lowlevel import Observation
from toolray.otel import instrument

HERE = Path(__file__).resolve().parent
OUT = HERE / "RESULTS-observability.md"
ROUNDS = 7
CALLS = 2_000
BATCH = 100
SEAM_CALLS = 200_000


@tool(concurrency_safe=True)
async def noop() -> str:
    """Do nothing."""
    return "ok"


class _Drop(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release."""


def _provider() -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_Drop()))
    return provider


async def _round(step: Callable[[], Awaitable[Any]], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await step()
    return (time.perf_counter() - start) / n * 1e6


async def _alternate(step: Callable[[], Awaitable[Any]], n: int, per: int) -> tuple[float, float]:
    """Best µs per unit with tracing off and on, measured in alternating rounds."""
    provider = _provider()
    for _ in range(max(1, n // 10)):
        await step()
    off = on = float("inf")
    for _ in range(ROUNDS):
        off = min(off, await _round(step, n) / per)
        with instrument(tracer_provider=provider):
            on = min(on, await _round(step, n) / per)
    return off, on


def _seam() -> float:
    from toolray.pipeline._observe import start_call  # the seam itself, timed alone

    inp = ToolExecutionInput("c1", "noop", {}, AbortController().signal)
    token = ExecutionToken()
    within: Observation | None = None
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(SEAM_CALLS):
            start_call(inp, token, within)
        best = min(best, (time.perf_counter() - start) / SEAM_CALLS * 1e6)
    return best


def _sdk_span() -> float:
    """What the SDK alone charges for one span like a call's (start, 6 attributes, end)."""
    tracer = _provider().get_tracer("bench")
    attributes = {f"a{i}": "x" for i in range(5)}
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(CALLS):
            span = tracer.start_span("execute_tool noop", attributes=attributes)
            span.set_attribute("toolray.outcome", "ok")
            span.end()
        best = min(best, (time.perf_counter() - start) / CALLS * 1e6)
    return best


async def _in_process() -> dict[str, tuple[float, float]]:
    registry = ToolRegistry()
    registry.register(noop)
    inp = ToolExecutionInput("c1", "noop", {}, AbortController().signal)
    calls = [ToolCall(f"c{i}", "noop", {}) for i in range(BATCH)]

    async def one() -> Any:
        return await registry.execute(inp)

    async def batch() -> Any:
        return await registry.execute_batch(ToolBatchInput(calls))

    return {
        "execute()": await _alternate(one, CALLS, 1),
        f"batch of {BATCH}": await _alternate(batch, CALLS // BATCH, BATCH),
    }


def _ray() -> tuple[float, float]:
    import cloudpickle

    from toolray_actors import RayRuntime, load_config

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cfg = load_config("ci").model_copy(update={"namespace": "toolray-bench-observability"})
    rt = RayRuntime.start(cfg, address="local")
    try:
        rt.registry.register(noop)
        ex = rt.executor("bench")
        calls = [ToolCall(f"c{i}", "noop", {}) for i in range(BATCH)]

        async def batch() -> Any:
            batch = ToolBatchInput(calls, scope="bench", max_parallel_tool_calls=BATCH)
            return await ex.execute_batch(batch)

        return asyncio.run(_alternate(batch, 10, BATCH))
    finally:
        rt.shutdown()


def _row(name: str, off: float, on: float) -> str:
    return f"| {name} | {off:.1f} | {on:.1f} | {on - off:+.1f} | {on / off:.2f}× |"


def main() -> None:
    started = time.perf_counter()
    machine = f"{platform.machine()}, nproc={os.cpu_count()}, CPython {sys.version.split()[0]}"
    print(f"python on {machine}; µs per call, best of {ROUNDS} alternating rounds")
    seam = _seam()
    sdk = _sdk_span()
    figures = asyncio.run(_in_process())
    if "--ray" in sys.argv:
        figures["Ray: batch of 100, 2 workers"] = _ray()
    rows = [_row(name, *pair) for name, pair in figures.items()]
    table = [
        "| per call | tracing off (µs) | tracing on (µs) | on − off | on / off |",
        "|---|---:|---:|---:|---:|",
        f"| the seam alone, nobody observing | {seam:.2f} | — | — | — |",
        *rows,
    ]
    print("\n".join(table))
    print(f"the seam with nobody observing: {seam:.3f} µs per call; an SDK span: {sdk:.1f} µs")
    base = figures["execute()"][0]
    text = "\n".join(
        [
            "# Observability overhead",
            "",
            "`benchmarks/bench_observability.py` (`--ray` for the Ray row). Machine: "
            f"{machine}; {time.strftime('%Y-%m-%d %H:%M')}.",
            "",
            *table,
            "",
            f"The seam with nobody observing (one `start_call` answering `None`): "
            f"**{seam:.3f} µs** per call, {seam / base * 100:.2f} % of a no-op `execute()` "
            f"({base:.1f} µs) — tracing off costs nothing measurable. With tracing on, the "
            f"OpenTelemetry SDK alone charges **{sdk:.1f} µs** for one span like a call's "
            "(start, six attributes, end, a span processor); on Ray the driver records each "
            "call's span, the executor makes its span record and the worker enters its "
            "context. The Ray batch has a cap of 100: one stage that runs the same way with "
            "tracing on or off (wider than its cap and untraced, it would travel as one "
            "chain). The machine is shared: figures move by ±10 % in-process, ±30 % on Ray.",
            "",
        ]
    )
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.name}; total {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
