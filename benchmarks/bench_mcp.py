"""Serving over MCP: toolray's servers beside the ``mcp`` SDK's own single-process server.

Run: ``.venv/bin/python benchmarks/bench_mcp.py [--quick] [--no-write] [--only=NAME]``. Each
server runs in a process of its own on 127.0.0.1 and serves the same functions
(``mcp_bench_tools.py``): ``cpu`` burns 20 ms of CPU, ``crash`` kills the process running it.
The clients are real ``mcp`` SDK clients over streamable HTTP (one session each), in this
process, on the same machine:

- **load**: 200 concurrent clients × 20 calls of ``cpu`` each, started together once every
  session is open; every call must be answered (none lost, none failed); throughput =
  calls answered / wall time, and the CPU each side spent per call; two rounds per server,
  the servers taking turns (the fastest round shown, every round's calls counted);
- **crash**: 20 clients × 5 calls of ``cpu`` while one more client calls ``crash`` (then
  ``cpu``): what the other calls get, and whether the server answers afterwards.

Servers, measured one after the other in one run: the peer, the SDK's ``MCPServer`` (FastMCP
in mcp 1.x) with its defaults, as users run it (``uvicorn``, one process); ``mcp_http_app``
over a Ray runtime's registry in one uvicorn process (``configs/local.toml``: two worker
actors, isolation ``"call"``); and ``toolray serve`` (the same app as a Ray Serve
application, an embedded local Ray, one replica, Serve's HTTP proxy in front). Writes
``benchmarks/RESULTS-mcp.md``. ``--quick``: 40 clients × 5 calls, one round.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "RESULTS-mcp.md"
CONFIG = ROOT / "configs" / "local.toml"
QUICK = "--quick" in sys.argv
CLIENTS, CALLS = (40, 5) if QUICK else (200, 20)
CRASH_CLIENTS, CRASH_CALLS = 20, 5
ROUNDS = 1 if QUICK else 2
BODY_MS = 20.0
TARGET = 1.5
"""Throughput over the peer's that toolray's servers should reach."""
TOKEN = "bench-token-0123456789abcdef"
PEER, APP, SERVE = "MCPServer (peer)", "mcp_http_app on Ray", "toolray serve"
SERVERS = (PEER, APP, SERVE)


# ---------------------------------------------------------------- the servers
def serve_peer(port: int) -> None:
    """The peer: the SDK's MCPServer with its defaults, one process (run by uvicorn)."""
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    sys.path.insert(0, str(HERE))
    from mcp_bench_tools import die, spin

    server = MCPServer("peer")

    @server.tool()
    def cpu(ms: float) -> int:
        """Burn ``ms`` milliseconds of CPU."""
        return spin(ms)

    @server.tool()
    def crash() -> str:
        """Kill the process running this call."""
        return die()

    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning")


def serve_app(port: int) -> None:
    """``mcp_http_app`` over a Ray runtime's registry, in this one uvicorn process."""
    import uvicorn

    from toolray.adapters.mcp import BearerTokens, mcp_http_app
    from toolray_actors import RayRuntime

    sys.path.insert(0, str(HERE))
    import mcp_bench_tools

    rt = RayRuntime.start(CONFIG, address="local")
    mcp_bench_tools.register(rt.registry)
    app = mcp_http_app(rt.registry, auth=BearerTokens({TOKEN: "bench"}))
    try:
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
    finally:
        rt.shutdown()


@dataclass
class Server:
    name: str
    process: subprocess.Popen[bytes]
    url: str
    token: str | None
    started_s: float


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(name: str, tokens: Path) -> Server:
    """Start ``name`` in a process of its own; return once it answers a call.

    A server that dies while starting is started once more (other sessions share this
    machine: a Ray that times out starting under their load, a process killed there).
    """
    try:
        return _start(name, tokens)
    except RuntimeError as err:
        print(f"{name} did not start, once more: {err}", file=sys.stderr, flush=True)
        return _start(name, tokens)


def _start(name: str, tokens: Path) -> Server:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)])}
    if name == SERVE:
        toolray = ROOT / ".venv" / "bin" / "toolray"
        command = [str(toolray), "serve", "--config", str(CONFIG), "--tokens", str(tokens)]
        command += ["--tools", "mcp_bench_tools", "--port", str(port)]
    else:
        mode = "serve-peer" if name == PEER else "serve-app"
        command = [sys.executable, __file__, mode, str(port)]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as log:  # the server's stderr: why, if it cannot start
        process = subprocess.Popen(
            command, cwd=HERE, env=env, stdout=subprocess.DEVNULL, stderr=log
        )
        server = Server(name, process, f"http://127.0.0.1:{port}/mcp", None, 0.0)
        server.token = None if name == PEER else TOKEN
        try:
            asyncio.run(_until_answering(server))
        except RuntimeError as err:
            log.seek(0)
            tail = log.read().decode(errors="replace").strip().splitlines()[-15:]
            raise RuntimeError("\n".join([str(err), *tail])) from None
    server.started_s = time.perf_counter() - t0
    return server


async def _until_answering(server: Server) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.name} exited: {server.process.returncode}")
        try:
            async with session_of(server) as session:
                await session.call_tool("cpu", {"ms": 1.0})
                return
        except Exception:
            await asyncio.sleep(0.2)  # a bounded poll: the server is still starting
    raise RuntimeError(f"{server.name} never answered")


def stop(server: Server) -> None:
    if server.process.poll() is None:
        server.process.send_signal(2)  # Ctrl-C: toolray serve stops cleanly
        try:
            server.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()


def server_cpu_s(server: Server) -> float:
    """CPU seconds of the server's process and every process under it (Ray's included)."""
    try:
        top = psutil.Process(server.process.pid)
        procs = [top, *top.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def client_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ---------------------------------------------------------------- the clients
@asynccontextmanager
async def session_of(server: Server) -> AsyncIterator[Any]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {server.token}"} if server.token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120.0, read=600.0)) as http,
        streamable_http_client(server.url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


class Start:
    """The clients start calling together, once every one has opened its session."""

    def __init__(self, clients: int) -> None:
        self.waiting = clients
        self.all_open = asyncio.Event()
        self.go = asyncio.Event()

    def arrived(self) -> None:
        self.waiting -= 1
        if self.waiting == 0:
            self.all_open.set()


@dataclass
class Tally:
    ok: int = 0
    failed: int = 0
    lost: int = 0
    crash: str = "not sent"
    latencies: list[float] = field(default_factory=list)
    notes: set[str] = field(default_factory=set)


async def client(server: Server, plan: list[str], start: Start, tally: Tally) -> None:
    """Open a session, wait for the start, make the calls of ``plan`` one after the other.

    A call leaves ``pending`` once it has an answer (or its own error): whatever ends the
    session first, the calls still pending are counted lost.
    """
    pending = list(plan)
    arrived = False
    try:
        async with session_of(server) as session:
            start.arrived()
            arrived = True
            await start.go.wait()
            while pending:
                name = pending[0]
                t0 = time.perf_counter()
                try:
                    result = await session.call_tool(
                        name, {} if name == "crash" else {"ms": BODY_MS}
                    )
                except Exception as err:  # this call's own failure: the next one goes on
                    tally.notes.add(f"{type(err).__name__}: {err}"[:120])
                    del pending[0]
                    tally.crash = "lost (no answer)" if name == "crash" else tally.crash
                    tally.lost += name == "cpu"
                    continue
                del pending[0]
                if name == "crash":
                    tally.crash = f"answered, isError={result.is_error}"
                    continue
                tally.latencies.append(time.perf_counter() - t0)
                tally.failed += result.is_error
                tally.ok += not result.is_error
    except Exception as err:  # the session could not be opened, or broke (its exit included)
        tally.notes.add(f"session: {type(err).__name__}")
    finally:
        if not arrived:
            start.arrived()
        tally.lost += sum(1 for name in pending if name == "cpu")
        if "crash" in pending:
            tally.crash = "lost (no answer)"


async def load(server: Server) -> dict[str, Any]:
    tally, start = Tally(), Start(CLIENTS)
    tasks = [
        asyncio.ensure_future(client(server, ["cpu"] * CALLS, start, tally)) for _ in range(CLIENTS)
    ]
    await asyncio.wait_for(start.all_open.wait(), 600)
    cpu0, server0, t0 = client_cpu_s(), server_cpu_s(server), time.perf_counter()
    start.go.set()
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - t0
    calls = CLIENTS * CALLS
    return {
        "calls": calls,
        "ok": tally.ok,
        "failed": tally.failed,
        "lost": tally.lost,
        "wall_s": wall,
        "calls_per_s": tally.ok / wall,
        "p50_ms": pct(tally.latencies, 0.5),
        "p99_ms": pct(tally.latencies, 0.99),
        "client_cpu_ms": 1000 * (client_cpu_s() - cpu0) / calls,
        "server_cpu_ms": 1000 * (server_cpu_s(server) - server0) / calls,
        "notes": sorted(tally.notes)[:5],
    }


async def crash(server: Server) -> dict[str, Any]:
    tally, start = Tally(), Start(CRASH_CLIENTS + 1)
    plans = [["cpu"] * CRASH_CALLS for _ in range(CRASH_CLIENTS)] + [["crash", "cpu"]]
    tasks = [asyncio.ensure_future(client(server, plan, start, tally)) for plan in plans]
    await asyncio.wait_for(start.all_open.wait(), 300)
    start.go.set()
    await asyncio.gather(*tasks)
    alive = server.process.poll() is None
    answers = False
    if alive:
        try:
            async with session_of(server) as session:
                answers = not (await session.call_tool("cpu", {"ms": 1.0})).is_error
        except Exception:
            answers = False
    return {
        "others": CRASH_CLIENTS * CRASH_CALLS + 1,
        "others_ok": tally.ok,
        "others_not_ok": tally.failed + tally.lost,
        "crash": tally.crash,
        "server_alive": alive,
        "answers_after": answers,
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0


def loaded(name: str, tokens: Path) -> dict[str, Any]:
    """One round of the load on a fresh server ``name``."""
    before = os.getloadavg()[0]
    server = start(name, tokens)
    try:
        result = asyncio.run(load(server))
    finally:
        stop(server)
    result |= {"start_s": server.started_s, "load_avg_before": before}
    print(json.dumps({"server": name, **result}), flush=True)
    return result


def crashed(name: str, tokens: Path) -> dict[str, Any]:
    server = start(name, tokens)
    try:
        result = asyncio.run(crash(server))
    finally:
        stop(server)
    print(json.dumps({"server": name, "crash": result}), flush=True)
    return result


def measure(names: list[str], tokens: Path) -> list[dict[str, Any]]:
    """Each server's load ``ROUNDS`` times, the servers taking turns; then each crash.

    A server's row is its fastest round, with the calls of every round counted: other
    sessions share this machine, and taking turns gives each server the same chances.
    """
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for _ in range(ROUNDS):
        for name in names:
            rounds[name].append(loaded(name, tokens))
    rows = []
    for name in names:
        best = max(rounds[name], key=lambda r: r["calls_per_s"])
        row = {"server": name, **best, "rounds": rounds[name]}
        row["calls"] = sum(r["calls"] for r in rounds[name])
        row["ok"] = sum(r["ok"] for r in rounds[name])
        row["failed"] = sum(r["failed"] for r in rounds[name])
        row["lost"] = sum(r["lost"] for r in rounds[name])
        row["crash"] = crashed(name, tokens)
        rows.append(row)
    return rows


# ---------------------------------------------------------------- the results
def write(rows: list[dict[str, Any]], seconds: float, load_avg: tuple[float, float]) -> None:
    base = next(r for r in rows if r["server"] == PEER)["calls_per_s"]
    lines = [
        "# Serving over MCP (`benchmarks/bench_mcp.py`)",
        "",
        f"`benchmarks/bench_mcp.py{' --quick' if QUICK else ''}`: one run, {seconds:.0f} s, "
        f"{time.strftime('%Y-%m-%d %H:%M')}; {platform.machine()}, nproc {os.cpu_count()}, "
        f"CPython {platform.python_version()}, mcp {version('mcp')}, Ray {version('ray')}; "
        f"1-minute load average {load_avg[0]:.1f} at the start, {load_avg[1]:.1f} at the end "
        "(other sessions share this machine: figures are noisy).",
        "",
        "Servers, each in a process of its own on 127.0.0.1: the `mcp` SDK's `MCPServer` "
        "with its defaults under uvicorn (the peer: one process); `mcp_http_app` over a Ray "
        "runtime's registry under uvicorn (one process for HTTP and MCP; the calls run in "
        'two worker actors, isolation `"call"`, from `configs/local.toml`); `toolray serve` '
        "(the same app as a Ray Serve application: Serve's HTTP proxy, one replica, an "
        "embedded local Ray). Each server's tokens, sessions and bodies as a user runs it.",
        "",
        f"## Load: {CLIENTS} concurrent clients × {CALLS} calls of {BODY_MS:.0f} ms of CPU",
        "",
        f"{CLIENTS} `mcp` SDK clients (one session each, all in the benchmark's process) start "
        f"together once every session is open; each makes {CALLS} calls of `cpu` one after "
        f"the other (the body burns {BODY_MS:.0f} ms of its thread's CPU time). Throughput = "
        "calls answered / wall time; CPU per call = CPU time of the clients' process, and of "
        "the server's process and every process under it (Ray's), over the calls (the "
        f"server's includes the {BODY_MS:.0f} ms body). {ROUNDS} round(s) per server on a "
        "fresh server each, the servers taking turns; a row shows the server's fastest round "
        "and counts the calls of every round. Target: every call answered, and toolray's "
        f"throughput ≥ {TARGET}× the peer's.",
        "",
        "| server | calls | answered ok | failed or lost | wall | calls/s | vs peer "
        "| p50 | p99 | client CPU / call | server CPU / call | every round's calls/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        each = " / ".join(f"{x['calls_per_s']:.1f}" for x in r["rounds"])
        lines.append(
            f"| {r['server']} | {r['calls']} | {r['ok']} | {r['failed'] + r['lost']} | "
            f"{r['wall_s']:.1f} s | {r['calls_per_s']:.1f} | {r['calls_per_s'] / base:.2f}× | "
            f"{r['p50_ms']:.0f} ms | {r['p99_ms']:.0f} ms | {r['client_cpu_ms']:.1f} ms | "
            f"{r['server_cpu_ms']:.1f} ms | {each} |"
        )
    lines.append("")
    for r in rows:
        if r["server"] != PEER:
            ratio = r["calls_per_s"] / base
            lines.append(
                f"- {r['server']}: {r['ok']} of {r['calls']} answered ok; "
                f"{ratio:.2f}× the peer's throughput ≥ {TARGET}×: {ratio >= TARGET}."
            )
    lines += [
        "",
        f"## Crash: {CRASH_CLIENTS} clients × {CRASH_CALLS} calls while one body kills its process",
        "",
        f"{CRASH_CLIENTS} clients make {CRASH_CALLS} calls of `cpu` each while one more client "
        "calls `crash` (its body ends the process running it, `os._exit(1)`, as a segfault or "
        "the OOM killer would) and then `cpu`; then a new client calls `cpu`.",
        "",
        "| server | other calls | answered ok | failed or lost | the crashing call "
        "| server alive | a new client answered |",
        "|---|---:|---:|---:|---|---|---|",
    ]
    for r in rows:
        c = r["crash"]
        lines.append(
            f"| crash: {r['server']} | {c['others']} | {c['others_ok']} | {c['others_not_ok']} "
            f"| {c['crash']} | {c['server_alive']} | {c['answers_after']} |"
        )
    lines += ["", "Raw rows (every round):", "", "```json"]
    lines += [json.dumps({k: v for k, v in r.items() if k != "rounds"}) for r in rows]
    lines += [json.dumps({"server": r["server"], **x}) for r in rows for x in r["rounds"]]
    lines += ["```", ""]
    RESULTS.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {RESULTS}")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] in ("serve-peer", "serve-app"):
        (serve_peer if sys.argv[1] == "serve-peer" else serve_app)(int(sys.argv[2]))
        return
    t0 = time.perf_counter()
    start_load = os.getloadavg()[0]
    only = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--only=")]
    with tempfile.TemporaryDirectory() as tmp:
        tokens = Path(tmp) / "tokens"
        tokens.write_text(f"{TOKEN} bench\n")
        tokens.chmod(0o600)
        rows = measure([name for name in SERVERS if not only or name in only], tokens)
    if "--no-write" not in sys.argv and any(r["server"] == PEER for r in rows):
        write(rows, time.perf_counter() - t0, (start_load, os.getloadavg()[0]))


if __name__ == "__main__":
    main()
