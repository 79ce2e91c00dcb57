"""Code Mode runtime benchmark: a trivial run on a warm child, and the cost of a sub-call.

Run: ``.venv/bin/python benchmarks/bench_code.py [--quick] [--confinement] [--no-write]``
(about 60 s; ``--quick`` about 20 s). Figures are wall times on this machine, medians and
99th percentiles of ``N`` runs; a full run (not ``--confinement``) writes
``benchmarks/RESULTS-code.md``.

- confinement (``--confinement`` runs only this part): a trivial run ``1 + 1`` on a warm
  child with ``confinement="auto"`` (every layer: namespaces, Landlock, seccomp) and with
  ``"off"``, interleaved run by run so both see the same load: target p50 ≤ 15 ms with
  ``"auto"``; the same cold (``warm=0``: fork, sandbox and run); how long a child takes
  from the fork request to ready (its sandbox built); ``confinement()`` on a new runtime;
- trivial run ``1``, warm child (the pool has booted before each run): target p50 ≤ 30 ms;
- the same back to back (the next child boots while the previous run goes) and cold
  (``warm=0``: interpreter start-up plus the pre-imports in every run), for reference;
- a program awaiting 20 binding calls one after another; and per call, 200 calls one after
  another (or under ``asyncio.gather``) minus the same program with no call; against 20
  direct awaits of the binding in-process, and against 20 native calls through a
  ``ToolRegistry`` batch;
- through the registry (``run_code`` with ``PythonRuntime`` mounted, every binding call a
  sub-call through the full pipeline on the sub-scheduler): a trivial ``run_code``, a
  program making 20 sub-calls, and per sub-call (200 sub-calls minus an empty program)
  against the same calls as a native batch: target ≤ 2× a native call;
- the floor under a sub-call: a bare round trip of a small frame between two processes on
  this machine (a peer blocking on its socket, as a child waiting for its lone call), the
  host blocking too, or on an asyncio loop (as the runtime's host), the two processes where
  the kernel puts them or both on one core (on a virtual machine, waking an idle core costs
  more than switching between two processes on one);
- the sub-call target (issue 42, item 3: ≤ 2× a native call of the same tool), for 200 and
  20 sequential calls, beside its references in the same run: per call, the sub-call, the
  native call, the bare runtime (the trip to the child alone) and the floor, and their
  ratios.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from toolray import (
    AbortController,
    ToolBatchInput,
    ToolCall,
    ToolExecutionInput,
    ToolOutput,
    ToolRegistry,
    define_tool,
    text_block,
)
from toolray.code import CodeRunOutcome, PythonRuntime
from toolray.procs import Template, TemplateSpec

QUICK = "--quick" in sys.argv
RESULTS = Path(__file__).with_name("RESULTS-code.md")
N = 15 if QUICK else 50
SIGNAL = AbortController().signal


async def echo(args: Any) -> Any:
    return args["i"]


def _program(calls: int, concurrent: bool) -> str:
    if concurrent:
        return f"import asyncio\nawait asyncio.gather(*[echo(i=i) for i in range({calls})])"
    return f"s = 0\nfor i in range({calls}):\n    s += await echo(i=i)\ns"


async def _times(
    runs: int, once: Callable[[], Awaitable[Any]], before: Callable[[], Awaitable[Any]]
) -> list[float]:
    out = []
    for _ in range(runs):
        await before()
        start = time.perf_counter()
        await once()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _p50_p99(values: list[float]) -> str:
    return f"{_p(values, 0.5):.1f} / {_p(values, 0.99):.1f}"


def _p50_p95_p99(values: list[float]) -> str:
    return " / ".join(f"{_p(values, q):.1f}" for q in (0.5, 0.95, 0.99))


async def _nothing() -> None:
    return None


async def _runs(runtime: PythonRuntime, program: str, warm: bool, runs: int = N) -> list[float]:
    before = runtime.wait_warm if warm else _nothing
    return await _times(runs, lambda: runtime.run(program, {"echo": echo}, SIGNAL), before)


async def _direct(calls: int) -> float:
    start = time.perf_counter()
    for _ in range(200):
        for i in range(calls):
            await echo({"i": i})
    return (time.perf_counter() - start) * 1000 / 200 / calls


async def _native(calls: int) -> float:
    reg = ToolRegistry()
    out = ToolOutput(schema={"type": "integer"}, render=lambda a, v: [text_block(str(v))])

    async def body(args: Any, ctx: Any) -> int:
        return int(args["i"])

    params = {"i": {"type": "integer", "required": True}}
    reg.register(define_tool(name="echo", description="e", parameters=params, output=out,
                             execute=body, is_concurrency_safe=lambda a: False))  # fmt: skip
    batch = [ToolCall(f"c{i}", "echo", f'{{"i": {i}}}') for i in range(calls)]
    start = time.perf_counter()
    for _ in range(50):
        await reg.execute_batch(ToolBatchInput(batch, SIGNAL))
    return (time.perf_counter() - start) * 1000 / 50 / calls


def _registry(runtime: PythonRuntime) -> ToolRegistry:
    reg = ToolRegistry(mode="code", code_runtime=runtime)
    out = ToolOutput(schema={"type": "integer"}, render=lambda a, v: [text_block(str(v))])

    async def body(args: Any, ctx: Any) -> int:
        return int(args["i"])

    params = {"i": {"type": "integer", "required": True}}
    reg.register(define_tool(name="echo", description="e", parameters=params, output=out,
                             execute=body, is_concurrency_safe=lambda a: False))  # fmt: skip
    return reg


async def _run_code(reg: ToolRegistry, program: str) -> float:
    inp = ToolExecutionInput(
        "c1", "run_code", {"code": program, "description": "bench"}, SIGNAL, scope="a"
    )
    start = time.perf_counter()
    result = await reg.execute(inp)
    elapsed = (time.perf_counter() - start) * 1000
    assert not result.is_error, result.content
    return elapsed


SETTLE_S = 0.3
"""A timed program first waits this long, so the warm child booting beside it is done."""


def _timed(calls: int) -> str:
    """A program timing its own ``calls`` sequential calls (ms), after ``SETTLE_S``."""
    return (
        f"import asyncio, time\nawait asyncio.sleep({SETTLE_S})\nt = time.perf_counter()\n"
        f"for i in range({calls}):\n    await echo(i=i)\n(time.perf_counter() - t) * 1000"
    )


async def _paired(
    runtime: PythonRuntime, reg: ToolRegistry, native: ToolRegistry, calls: int, runs: int
) -> dict[str, list[float]]:
    """Interleaved (the machine is shared): ``calls`` sequential calls timed inside the
    program, through ``run_code`` (``sub``) and on the bare runtime with the binding awaited
    directly (``raw``), and the same calls as a native batch (``native``), all in ms."""
    program, batch = _timed(calls), _native_batch(calls)
    inp = ToolExecutionInput("c1", "run_code", {"code": program, "description": "b"}, SIGNAL)
    out: dict[str, list[float]] = {"sub": [], "raw": [], "native": []}
    for _ in range(runs):
        await runtime.wait_warm()
        out["sub"].append(float((await reg.execute(inp)).value["result"]))  # type: ignore[union-attr]
        await runtime.wait_warm()
        out["raw"].append(float((await runtime.run(program, {"echo": echo}, SIGNAL)).result))  # type: ignore[arg-type]
        start = time.perf_counter()
        await native.execute_batch(batch)
        out["native"].append((time.perf_counter() - start) * 1000)
    return out


def _native_batch(calls: int) -> ToolBatchInput:
    return ToolBatchInput(
        [ToolCall(f"c{i}", "echo", f'{{"i": {i}}}') for i in range(calls)], SIGNAL
    )


class _Scripted:
    """A runtime without a child: the program awaits the bindings in-process.

    Isolates what the registry adds to a sub-call (identity, the lane, the pipeline) from the
    child's pipe round trip.
    """

    language = "python"

    def __init__(self, calls: int) -> None:
        self.calls = calls

    async def run(self, program: str, bindings: Any, signal: Any) -> Any:
        total = 0
        for i in range(self.calls):
            total += await bindings["echo"]({"i": i})
        return CodeRunOutcome(logs=[], result=total, has_result=True)


async def _bridge_row(calls: int, runs: int) -> tuple[str, str, str]:
    reg, empty = _registry(_Scripted(calls)), _registry(_Scripted(0))  # type: ignore[arg-type]
    native = ToolRegistry()
    for definition in reg.definitions():
        native.register(definition)
    sub, base, nat = [], [], []
    for _ in range(runs):
        base.append(await _run_code(empty, "-"))
        sub.append(await _run_code(reg, "-"))
        start = time.perf_counter()
        await native.execute_batch(_native_batch(calls))
        nat.append((time.perf_counter() - start) * 1000)
    per_sub = (statistics.median(sub) - statistics.median(base)) / calls
    ratio = per_sub / (statistics.median(nat) / calls)
    return ("  the registry alone (no child) / native call", f"{ratio:.2f}×", "—")


PerCall = dict[int, tuple[float, float, float]]
"""Per call (ms), by the number of sequential calls: sub-call, bare runtime, native call."""


async def _registry_rows(runtime: PythonRuntime) -> tuple[list[tuple[str, str, str]], PerCall]:
    reg = _registry(runtime)
    native = ToolRegistry()
    for definition in reg.definitions():
        native.register(definition)
    trivial, sub20 = [], []
    for _ in range(N):
        await runtime.wait_warm()
        trivial.append(await _run_code(reg, "1"))
        await runtime.wait_warm()
        sub20.append(await _run_code(reg, _program(20, False)))
    rows = [
        ("registry: trivial `run_code`, warm", _p50_p99(trivial), "≤ 30"),
        ("registry: run_code making 20 sub-calls, warm", _p50_p99(sub20), "—"),
    ]
    per_call: PerCall = {}
    for calls, runs in ((20, max(5, N // 2)), (200, max(5, N // 5))):
        t = await _paired(runtime, reg, native, calls, runs)
        sub, raw, nat = (statistics.median(t[k]) / calls for k in ("sub", "raw", "native"))
        per_call[calls] = (sub, raw, nat)
        rows += [
            (f"{calls} sequential calls timed in the program, per call:", "", ""),
            ("  sub-call through run_code", f"{sub * 1000:.0f} µs", "—"),
            ("  binding awaited directly (bare runtime)", f"{raw * 1000:.0f} µs", "—"),
            ("  native call in a batch", f"{nat * 1000:.0f} µs", "—"),
            ("  sub-call / native call", f"{sub / nat:.2f}×", "—"),
            ("  what the registry adds / native call", f"{(sub - raw) / nat:.2f}×", "—"),
            await _bridge_row(calls, runs),
        ]  # fmt: skip
    return rows, per_call


_PEER = (
    "import socket, sys, time\n"
    "s = socket.socket(fileno=int(sys.argv[1]))\n"
    "frame = bytes(4) + b'x' * 60\n"
    "for rounds in (200, 2000):\n"
    "    t = time.perf_counter()\n"
    "    for _ in range(rounds):\n"
    "        s.sendall(frame)\n"
    "        s.recv(65536)\n"
    "print((time.perf_counter() - t) / rounds * 1e6)\n"
)
_REPLY = bytes(4) + b"y" * 50


class _Echo(asyncio.BufferedProtocol):
    """The host's side of the floor on a loop: each read answered with one reply."""

    def __init__(self, ended: asyncio.Future[None]) -> None:
        self.buffer = memoryview(bytearray(65536))
        self.ended = ended

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.transport.write(_REPLY)

    def eof_received(self) -> bool:
        self.ended.set_result(None)
        return False


def _serve_blocking(host: socket.socket) -> None:
    with host:
        while host.recv(65536):
            host.sendall(_REPLY)


async def _floor_us(on_loop: bool, pinned: bool = False) -> float:
    """One bare round trip between two processes, µs (the mean of the peer's 2,000).

    ``pinned``: both on one core (a switch between them, no idle core to wake).
    """
    cores = os.sched_getaffinity(0)
    if pinned:
        os.sched_setaffinity(0, {min(cores)})  # this thread, and the peer it starts
    try:
        return await _floor_once(on_loop)
    finally:
        os.sched_setaffinity(0, cores)


async def _floor_once(on_loop: bool) -> float:
    host, peer = socket.socketpair()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _PEER, str(peer.fileno()),
        pass_fds=[peer.fileno()], stdout=subprocess.PIPE,
    )  # fmt: skip
    peer.close()
    if on_loop:
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()
        transport, _ = await loop.create_unix_connection(lambda: _Echo(ended), sock=host)
        await ended
        transport.close()
    else:
        await asyncio.to_thread(_serve_blocking, host)
    out, _ = await proc.communicate()
    return float(out)


async def _floor_rows() -> tuple[list[tuple[str, str, str]], float]:
    """The floor's rows, and the floor (µs): the host on a loop as the runtime's, the two
    processes wherever the kernel puts them or both on one core, whichever costs less."""
    blocking, on_loop, pinned = [], [], []
    for _ in range(3):
        blocking.append(await _floor_us(False))
        on_loop.append(await _floor_us(True))
        pinned.append(await _floor_us(True, pinned=True))
    both, loop, one = (statistics.median(v) for v in (blocking, on_loop, pinned))
    return [
        ("floor: a bare round trip between two processes, both blocking", f"{both:.0f} µs", "—"),
        ("floor: the same, the host on an asyncio loop", f"{loop:.1f} µs", "—"),
        ("floor: the same, both processes on one core", f"{one:.1f} µs", "—"),
    ], min(loop, one)


def _target_rows(per_call: PerCall, floor_us: float) -> list[tuple[str, str, str]]:
    """Issue 42 item 3 (a sub-call ≤ 2× a native call), beside its references, per call.

    A sub-call is a native call's pipeline plus the trip to the child and back: the bare
    runtime (the binding awaited directly, no pipeline) is that trip alone, and the floor is
    the least any trip between two processes costs on this machine.
    """
    rows: list[tuple[str, str, str]] = []
    for calls in sorted(per_call, reverse=True):
        sub, raw, nat = (v * 1000 for v in per_call[calls])
        rows += [
            (f"sub-call / native call, {calls} sequential calls", f"{sub / nat:.2f}×", "≤ 2×"),
            ("  per call: sub-call · native call · bare runtime · floor",
             f"{sub:.0f} · {nat:.0f} · {raw:.0f} · {floor_us:.0f} µs", "—"),
            ("  sub-call − native call (the trip to the child) / native call",
             f"{(sub - nat) / nat:.2f}×", "—"),
            ("  the same / bare runtime (the trip with no pipeline)",
             f"{(sub - nat) / raw:.2f}×", "—"),
            ("  bare runtime / floor", f"{raw / floor_us:.1f}×", "—"),
            ("  sub-call / floor", f"{sub / floor_us:.1f}×", "—"),
        ]  # fmt: skip
    return rows


async def _ready_ms(runtime: PythonRuntime) -> float:
    """From a fork request to the child's ready report (its sandbox built)."""
    start = time.perf_counter()
    await runtime.wait_warm()
    return (time.perf_counter() - start) * 1000


async def _procs_rows() -> list[tuple[str, str, str]]:
    """The substrate alone: a bare child (``builtins:print``) forked, and its end reported."""
    template = Template(TemplateSpec(entry="builtins:print", preload=("asyncio", "json")))
    await asyncio.to_thread(template.wait_ready, 60)
    forked, ended = [], []
    for _ in range(N):
        start = time.perf_counter()
        child = await template.fork_async()
        forked.append((time.perf_counter() - start) * 1000)
        await child.wait_exit()
        ended.append((time.perf_counter() - start) * 1000)
        child.close()
    template.stop()
    return [
        ("toolray.procs: fork request → child forked", _p50_p99(forked), "a few ms"),
        ("toolray.procs: fork request → its exit reported", _p50_p99(ended), "—"),
    ]


async def _confinement_rows() -> list[tuple[str, str, str]]:
    start = time.perf_counter()
    auto, off = PythonRuntime(), PythonRuntime(confinement="off")
    layers = auto.confinement().describe()
    probe = (time.perf_counter() - start) * 1000
    off.confinement()
    warm: dict[str, list[float]] = {"auto": [], "off": []}
    cold: dict[str, list[float]] = {"auto": [], "off": []}
    ready: dict[str, list[float]] = {"auto": [], "off": []}
    colds = {"auto": PythonRuntime(warm=0), "off": PythonRuntime(warm=0, confinement="off")}
    for i in range(N):
        for mode, runtime in (("auto", auto), ("off", off))[:: 1 if i % 2 else -1]:
            await runtime.wait_warm()
            warm[mode] += await _times(1, lambda r=runtime: r.run("1 + 1", {}, SIGNAL), _nothing)
            ready[mode].append(await _ready_ms(runtime))
            if i < max(5, N // 3):
                one = colds[mode]
                cold[mode] += await _times(1, lambda r=one: r.run("1 + 1", {}, SIGNAL), _nothing)
    for runtime in (auto, off, *colds.values()):
        runtime.close()
    return [
        (f"confinement: {layers}", "", ""),
        ('trivial run, warm child, "auto" (p50 / p95 / p99)', _p50_p95_p99(warm["auto"]), "≤ 15"),
        ('trivial run, warm child, "off" (p50 / p95 / p99)', _p50_p95_p99(warm["off"]), "—"),
        ('trivial run, cold (warm=0), "auto"', _p50_p99(cold["auto"]), "—"),
        ('trivial run, cold (warm=0), "off"', _p50_p99(cold["off"]), "—"),
        ('fork request → child ready, "auto"', _p50_p99(ready["auto"]), "—"),
        ('fork request → child ready, "off"', _p50_p99(ready["off"]), "—"),
        ("confinement() on a new runtime (template boot + probe)", f"{probe:.0f} ms", "—"),
        *await _procs_rows(),
    ]


def _print(rows: list[tuple[str, str, str]]) -> None:
    width = max(len(r[0]) for r in rows)
    print(f"{'figure':<{width}}  {'ms p50 / p99, or as shown':>26}  target")
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:>26}  {target}")


def write(rows: list[tuple[str, str, str]], seconds: float) -> None:
    """``RESULTS-code.md``: how, where and when, then every row (ms unless shown)."""
    import platform

    table = ["| figure | p50 / p99 (ms), or as shown | target |", "|---|---:|---|"]
    for name, value, target in rows:
        unit = " ms" if target.replace("≤ ", "").isdigit() else ""
        table.append(f"| {name.strip()} | {value} | {target}{unit} |")
    RESULTS.write_text(
        f"""# Code Mode runtime (`benchmarks/bench_code.py`)

`benchmarks/bench_code.py{" --quick" if QUICK else ""}`: {N} runs per figure, \
{seconds:.0f} s, {time.strftime("%Y-%m-%d %H:%M")}; {platform.machine()}, nproc \
{os.cpu_count()}, {platform.system()} {platform.release()}, CPython \
{sys.version.split()[0]}; 1-minute load average {os.getloadavg()[0]:.1f} at the end.

- Confinement: a trivial run `1 + 1` on a warm child with `confinement="auto"` (every layer
  the kernel offers: namespaces, Landlock, seccomp) and with `"off"`, interleaved run by run;
  the same cold (`warm=0`: fork, sandbox and run); from a fork request to the child's ready
  report (its sandbox built); `confinement()` on a new runtime; the process substrate alone.
- A trivial run `1`, warm; back to back (the next child boots while the run goes); cold.
- Sub-calls: a program awaiting 20 binding calls; per call over 200 calls (minus the same
  program with no call), one after another or gathered; against a direct await of the
  binding in-process and a native registry batch.
- Through the registry (`run_code` with `PythonRuntime` mounted, each binding call a
  sub-call through the full pipeline): a trivial `run_code`, 20 sub-calls, and per sub-call
  (timed inside the program) against the same calls as a native batch.
- The floor under a sub-call: a bare round trip of a small frame between two processes (a
  peer blocking on its socket, as a child waiting for its lone call), the host blocking too
  or on an asyncio loop (as the runtime's host), the processes where the kernel puts them
  or both on one core (waking an idle core of a virtual machine can cost more than the
  switch). A sub-call is this round trip plus both sides' work plus a native call's
  pipeline; a native call crosses no process.
- The sub-call target (≤ 2× a native call of the same tool) last, from the paired runs
  above, beside its references: per call, the sub-call, the native call, the bare runtime
  (the binding awaited directly: the trip to the child and back, no pipeline) and the floor
  (the host on a loop; the lesser of the two placements); what a sub-call costs over a
  native call, against a native call and against the bare runtime; the bare runtime and the
  sub-call against the floor.

{chr(10).join(table)}
""",
        encoding="utf-8",
    )


async def main() -> None:
    started = time.perf_counter()
    rows: list[tuple[str, str, str]] = await _confinement_rows()
    if "--confinement" in sys.argv:
        _print(rows)
        return
    runtime = PythonRuntime(timeout_s=60)
    await runtime.wait_warm()
    await runtime.run("1", {}, SIGNAL)  # first use: caches warm
    warm = await _runs(runtime, "1", warm=True)
    rows.append(("trivial run, warm child", f"{_p(warm, 0.5):.1f} / {_p(warm, 0.99):.1f}", "≤ 30"))
    b2b = await _runs(runtime, "1", warm=False, runs=max(5, N // 3))
    rows.append(("trivial run, back to back", f"{_p(b2b, 0.5):.1f} / {_p(b2b, 0.99):.1f}", "—"))
    cold_rt = PythonRuntime(timeout_s=60, warm=0)
    cold = await _runs(cold_rt, "1", warm=False, runs=max(5, N // 5))
    rows.append(("trivial run, cold (warm=0)", f"{_p(cold, 0.5):.1f} / {_p(cold, 0.99):.1f}", "—"))
    base = statistics.median(await _runs(runtime, _program(0, False), warm=True))
    seq20 = await _runs(runtime, _program(20, False), warm=True)
    rows.append(
        ("program awaiting 20 sub-calls", f"{_p(seq20, 0.5):.1f} / {_p(seq20, 0.99):.1f}", "—")
    )
    # Per call over 200 calls: the run's own jitter (a few ms) would swamp 20 calls.
    seq = statistics.median(await _runs(runtime, _program(200, False), warm=True))
    par = statistics.median(await _runs(runtime, _program(200, True), warm=True))
    per_seq, per_par = (seq - base) / 200, (par - base) / 200
    rows.append(("sequential sub-call, per call (of 200)", f"{per_seq * 1000:.0f} µs", "—"))
    rows.append(("gathered sub-call, per call (of 200)", f"{per_par * 1000:.0f} µs", "—"))
    direct, native = await _direct(20), await _native(20)
    rows.append(("direct await of the binding, per call", f"{direct * 1000:.2f} µs", "—"))
    rows.append(("native registry batch (20 exclusive), per call", f"{native * 1000:.0f} µs", "—"))
    rows.append(("sequential sub-call / direct await", f"{per_seq / direct:.0f}×", "—"))
    rows.append(("sequential sub-call / native call", f"{per_seq / native:.2f}×", "—"))
    registry_rows, per_call = await _registry_rows(runtime)
    floor_rows, floor_us = await _floor_rows()
    rows += [*registry_rows, *floor_rows, *_target_rows(per_call, floor_us)]
    runtime.close()
    cold_rt.close()
    _print(rows)
    if "--no-write" not in sys.argv:
        write(rows, time.perf_counter() - started)
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    asyncio.run(main())
