"""Chaos campaign: agents from several drivers under random SIGKILLs; invariants and figures.

A cluster host (``toolray_actors.testing.cluster_host``: a head, plus worker nodes with
``--nodes``) runs the namespace. ``--drivers`` driver processes (``_chaos_driver.py``) each
run ``--agents`` agents submitting ``--calls``-call batches of a ledger tool (every body
appends its call id to a SQLite ledger in WAL mode on entry). For ``--seconds`` a fault
injector SIGKILLs a random process of the namespace every ``--every`` seconds — a call's
process (``child``: with ``--isolation call``, the default, each call runs alone in one),
an environment instance's process (``instance``), tool workers, executors, pool managers,
the registry, token-bucket actors — and, with
``--nodes``, removes a worker node (and adds a fresh one). Each kill remembers the pids it
took (the victim, what ran below it and, for a pool manager, the worker actors it owns: Ray
ends them with it). Then the faults stop and every agent submits batches until one fully
succeeds.

Every batch mixes the farm controls: a plain ledger tool, an idempotent one with a retry
policy, a rate-limited one (its bucket actor is a fault kind of its own) and one on an
elastic pool (its manager is killed while it grows and shrinks). The invariants, checked at
the end and printed as a table, are ``_chaos_check``'s: one result per call in model order,
no call lost, no re-run or retry of a tool that is not idempotent, every retry on the log,
no collateral damage (a fault fails only the calls of the process that died), rate windows
within the limit plus one burst, every agent recovered, every log whole. Each agent also
keeps a tally in an environment of its own (``_chaos_env``: parked, restored and forked
under the faults, ``instance`` kills its process): no silent reset, no lost update, every
loss heard. A hostile tenant
(``--hostile``, on by default: ``_chaos_hostile``) attacks the farm from a scope of its own
meanwhile; no other tenant's result or argument may change. (With ``--isolation sandbox``
collateral damage is not measured: a sandboxed body cannot name its host process.)

Usage: ``toolray chaos --seconds 300 --nodes 2`` (the campaign), ``toolray chaos
--seconds 600 --kinds ""`` (the soak: no faults; RSS, open files and threads of every actor
sampled each ``--sample`` seconds), ``--seconds 15 --drivers 2 --agents 2`` (the short CI
run); ``benchmarks/chaos.py`` is the same program. Exit code 0 iff every invariant held.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from toolray_actors.bench._chaos_check import check
from toolray_actors.bench._chaos_env import check_env, env_held
from toolray_actors.bench._chaos_hostile import check_hostile, invariants_held
from toolray_actors.bench._chaos_soak import drift, percentile, sample

DRIVER = "toolray_actors.bench._chaos_driver"
KINDS = ("child", "instance", "worker", "executor", "pool", "registry", "bucket", "node")


class Proc:
    """A child whose stdout lines are read on demand (blocking, with a deadline)."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.p = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def send(self, line: str) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def expect(self, prefix: str) -> str:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            if line.startswith(prefix):
                return line[len(prefix) :].strip()
        err = self.p.stderr.read() if self.p.stderr is not None else ""
        raise RuntimeError(f"{self.p.args!r} ended before {prefix!r}: {err[-8000:]}")


def _env() -> dict[str, str]:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    return env


def _victims(address: str, namespace: str) -> Any:
    """An observer connection: pids of the namespace's actors by kind."""
    import ray

    from toolray_actors import RayRuntime, RuntimeConfig

    ray.init(address=address, log_to_driver=False)
    rt = RayRuntime.start(RuntimeConfig(namespace=namespace))
    return rt


def inject(
    args: argparse.Namespace,
    host: Proc,
    rt: Any,
    nodes: list[str],
    rng: random.Random,
    faults: Counter[str],
    killed: set[int],
) -> str | None:
    """Inject one fault of a random kind; what was hit, or ``None`` (nothing to hit).

    Every pid the fault takes (the victim and what ran below it) is added to ``killed``.
    """
    kind = rng.choice(args.kind_list)
    try:
        stats = rt.stats()
    except Exception:  # the observer's view is itself recovering
        return None
    if kind == "node":
        victim = nodes.pop(rng.randrange(len(nodes)))
        killed.update(_below(a.pid for a in stats.actors if a.node_id == victim))
        host.send(f"remove {victim}")
        what = f"removed node {victim}"
        host.expect("REMOVED")
        host.send('add {"toolslot": 8}')
        nodes.append(host.expect("NODE "))
    else:
        if kind == "child":
            pids = [pid for pool in stats.pools for pid in pool.child_pids]
        elif kind == "instance":
            pids = [pid for pool in stats.pools for pid in pool.instance_pids]
        else:
            pids = [a.pid for a in stats.actors if a.kind == kind]
        if not pids:
            return None
        pid = rng.choice(pids)
        killed.update(_below([pid, *_owned_by(stats.actors, pid)]))
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        name = {"child": "a call's process", "instance": "an instance's process"}.get(kind, kind)
        what = f"SIGKILL {name} (pid {pid})"
    faults[kind] += 1
    return f"{kind}: {what}"


def _owned_by(actors: Sequence[Any], pid: int) -> list[int]:
    """The worker actors a pool manager ``pid`` owns: they die with it (Ray fate-sharing).

    ``rt.stats().actors`` lists each pool manager followed by its workers and spares.
    """
    at = next((i for i, a in enumerate(actors) if a.pid == pid and a.kind == "pool"), None)
    if at is None:
        return []
    owned = []
    for actor in actors[at + 1 :]:
        if actor.kind != "worker":
            break
        owned.append(actor.pid)
    return owned


def _below(pids: Iterable[int]) -> set[int]:
    """``pids`` and every process below them now (what a kill of them takes along)."""
    import psutil

    found = set()
    for pid in pids:
        found.add(pid)
        with contextlib.suppress(psutil.Error):
            found.update(p.pid for p in psutil.Process(pid).children(recursive=True))
    return found


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``toolray chaos``."""
    add = parser.add_argument
    add("--seconds", type=float, default=60, help="how long faults are injected (default 60)")
    add("--every", type=float, default=1.5, help="seconds between two faults (default 1.5)")
    add("--drivers", type=int, default=3, help="driver processes submitting batches (default 3)")
    add("--agents", type=int, default=2, help="agent scopes per driver (default 2)")
    add("--calls", type=int, default=6, help="calls per batch (default 6)")
    add(
        "--nodes",
        type=int,
        default=0,
        help="worker nodes started beside the head (default 0); needed by the node kind",
    )
    add(
        "--kinds",
        default=None,
        help=f"comma-separated processes to SIGKILL, among {', '.join(KINDS)} (default: all "
        'but node, plus node with --nodes); "" injects no fault (a soak)',
    )
    add(
        "--mode",
        default="per_scope",
        choices=("per_scope", "sharded"),
        help="executors mode of the namespace (default per_scope)",
    )
    add(
        "--isolation",
        default="call",
        choices=("call", "shared", "sandbox"),
        help="isolation of the tool pool (default call: each call alone in a process)",
    )
    add(
        "--hostile",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a hostile tenant attacks the farm meanwhile (default on; --no-hostile: off)",
    )
    add("--seed", type=int, default=7, help="random seed of the fault plan (default 7)")
    add(
        "--sample",
        type=float,
        default=60.0,
        help="seconds between two samples of every actor's RSS, files and threads (default 60)",
    )
    add("--json", default=None, metavar="PATH", help="also write the figures as JSON")


def kinds_of(args: argparse.Namespace) -> list[str]:
    """The fault kinds to inject: checked against ``KINDS`` (``ValueError`` names a bad one)."""
    if args.kinds is None:
        return [k for k in KINDS if k != "node" or args.nodes > 0]
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = next((k for k in kinds if k not in KINDS), None)
    if unknown is not None:
        raise ValueError(f"--kinds: unknown kind {unknown!r} (choose from {', '.join(KINDS)})")
    if "node" in kinds and args.nodes < 1:
        raise ValueError("--kinds node needs worker nodes to remove: pass --nodes N (N >= 1)")
    return kinds


def run(args: argparse.Namespace) -> int:
    """Run the campaign; print the table; 0 iff every invariant held."""
    args.kind_list = kinds_of(args)  # a bad --kinds fails here, before anything starts
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="toolray-chaos-"))
    ledger = str(work / "ledger.sqlite")
    db = sqlite3.connect(ledger)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE runs (call_id TEXT, pid INTEGER, at REAL, lineage TEXT)")
    db.commit()
    db.close()
    if args.isolation == "sandbox":  # its bodies are uid 65534: the ledger is theirs to write
        work.chmod(0o777)
        Path(ledger).chmod(0o666)
    (work / "logs").mkdir()
    namespace = f"chaos-{os.getpid()}"
    host = Proc([sys.executable, "-m", "toolray_actors.testing.cluster_host"], _env())
    drivers: list[Proc] = []
    try:
        address = host.expect("ADDRESS ")
        print(f"chaos: cluster at {address}; starting {args.drivers} driver(s)", flush=True)
        nodes = []
        for _ in range(args.nodes):
            host.send('add {"toolslot": 8}')
            nodes.append(host.expect("NODE "))
        t_start = time.time()
        for d in range(args.drivers):
            argv = [
                *(sys.executable, "-m", DRIVER, address, namespace, ledger),
                *(str(work / f"driver{d}.jsonl"), str(work / "logs"), "--driver", str(d)),
                *("--agents", str(args.agents), "--calls", str(args.calls)),
                *("--seed", str(args.seed), "--mode", args.mode),
                *("--isolation", args.isolation),
                *(["--toolslot"] if args.nodes else []),
                *(["--hostile", str(work / "hostile")] if args.hostile and d == 0 else []),
            ]
            drivers.append(Proc(argv, _env()))
        for proc in drivers:
            proc.expect("READY")
        rt = _victims(address, namespace)
        plan = ", ".join(args.kind_list) or "none (a soak)"
        say = f"chaos: {args.seconds:g} s of faults every {args.every:g} s; kinds: {plan}"
        print(say, flush=True)
        baseline_end = time.time() + min(10.0, args.seconds / 4)
        time.sleep(max(0.0, baseline_end - time.time()))  # a fault-free stretch to compare
        faults: Counter[str] = Counter()
        killed: set[int] = set()
        chaos_start = time.time()
        samples: list[dict[str, Any]] = []
        next_sample = chaos_start
        while time.time() - chaos_start < args.seconds:
            time.sleep(args.every)
            hit = inject(args, host, rt, nodes, rng, faults, killed) if args.kind_list else None
            if hit is not None:
                at = time.time() - chaos_start
                print(f"[{at:6.1f} s] fault {sum(faults.values())}: {hit}", flush=True)
            if time.time() >= next_sample:
                samples.append(sample(rt))
                next_sample += args.sample
        chaos_end = time.time()
        print(f"chaos: {sum(faults.values())} fault(s) injected; agents recover", flush=True)
        for proc in drivers:
            proc.send("stop")
        for proc in drivers:
            proc.expect("DONE")
            proc.p.wait(timeout=120)
        rt.shutdown()
    finally:
        for proc in drivers:
            if proc.p.poll() is None:
                proc.p.kill()
        import ray  # the observer's connection leaves first: Ray ends a process whose store

        ray.shutdown()  # vanished, before it could report what went wrong above
        host.send("")  # then close stdin: the host shuts the cluster down
        assert host.p.stdin is not None
        host.p.stdin.close()
        host.p.wait(timeout=120)
    records = [
        json.loads(line)
        for d in range(args.drivers)
        for line in (work / f"driver{d}.jsonl").read_text().splitlines()
    ]
    out = check(records, ledger, work / "logs", killed)
    out.update(check_env(records))
    if args.isolation == "sandbox":  # a sandboxed body is pid 1 of its own namespace:
        out["collateral"] = out["collateral_calls"] = None  # no host process to name
    if args.hostile:
        out.update(check_hostile(work / "hostile", records, args.isolation))
    calm = [r for r in records if r["phase"] == "chaos" and r["end"] < chaos_start]
    wild = [r for r in records if r["phase"] == "chaos" and chaos_start <= r["end"] <= chaos_end]

    def rate(rs: list[dict[str, Any]], span: float) -> float:
        return sum(len(r["ids"]) for r in rs) / span if span > 0 else 0.0

    out.update(
        seed=args.seed,
        seconds=args.seconds,
        drivers=args.drivers,
        agents_per_driver=args.agents,
        mode=args.mode,
        isolation=args.isolation,
        faults=dict(faults),
        faults_total=sum(faults.values()),
        calls_per_s_calm=round(rate(calm, chaos_start - t_start), 1),
        calls_per_s_chaos=round(rate(wild, chaos_end - chaos_start), 1),
        p99_batch_s_calm=round(percentile([r["seconds"] for r in calm], 0.99), 3),
        p99_batch_s_chaos=round(percentile([r["seconds"] for r in wild], 0.99), 3),
        recovery_p50_s=round(percentile(out["recovery_s"], 0.5), 2),
        recovery_p99_s=round(percentile(out["recovery_s"], 0.99), 2),
        **drift(samples),
        workdir=str(work),
    )
    ok = (
        out["lost"] == 0
        and out["re_run"] == 0
        and not out["collateral"]
        and out["success_not_exactly_once"] == 0
        and out["log_problems"] == 0
        and out["agents_recovered"] == out["agents"]
        and out["retries_unrecorded"] == 0
        and out["retried_not_idempotent"] == 0
        and out["rate_windows_over"] == 0
        and out.get("soak_max_rss_growth_mb", 0) <= 20
        and (out["faults_total"] > 0 or not args.kind_list)  # a campaign that injected nothing
        and invariants_held(out)
        and env_held(out)
    )
    width = max(len(k) for k in out)
    for key, value in out.items():
        if key != "recovery_s":
            print(f"{key:<{width}}  {value}")
    print(f"{'verdict':<{width}}  {'PASS' if ok else 'FAIL'}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0 if ok else 1
