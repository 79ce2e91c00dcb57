"""One driver process of the chaos campaign (``benchmarks/chaos.py`` starts several).

It attaches to the campaign's cluster, registers the ledger tool (identical in every
driver), and runs ``--agents`` agents, each submitting batches in a loop until a ``stop``
line arrives on stdin. Then each agent submits batches until one fully succeeds (the
recovery time). Every batch is checked as it returns and written to ``--out`` (JSON lines):
one result per call in model order, or the exception it raised.

With ``--hostile DIR`` it also runs the hostile tenant (``_chaos_hostile``) in a scope of
its own beside its agents, its files and records in ``DIR``.

Usage: ``python benchmarks/_chaos_driver.py ADDRESS NAMESPACE LEDGER OUT --driver N ...``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cloudpickle
import psutil

from toolray import (
    AbortController,
    JsonlEventLog,
    LogStep,
    Placement,
    RetryPolicy,
    ToolBatchInput,
    ToolCall,
    ToolCallResult,
    ToolOutput,
    define_tool,
    text_block,
)
from toolray_actors import RayRuntime, RuntimeConfig
from toolray_actors.bench import _chaos_env, _chaos_hostile
from toolray_actors.bench._chaos_check import RATE
from toolray_actors.bench._chaos_env import Tally, tally_kit
from toolray_actors.bench._chaos_hostile import HOSTILE_SCOPE, hostile_tools, run_hostile

TOOLS = {"": "ledger", "R": "ledger_retry", "L": "ledger_limited", "E": "ledger_elastic"}
"""The campaign's tools by call-id suffix: plain, idempotent with retries, rate-limited,
and on an elastic pool (which grows and shrinks under the campaign's bursts)."""


def lineage() -> str:
    """This process's pid and its ancestors' up to (not including) pid 1, space-separated.

    The campaign's check reads it: a call whose process was forked below a killed process
    after the kill was aimed (a call process forked by a worker that its pool's death was
    about to take) died with it, not beside it.
    """
    try:
        me = psutil.Process()
        pids = [me.pid, *(parent.pid for parent in me.parents())]
    except psutil.Error:  # a sandboxed body may not see its ancestors
        pids = [os.getpid()]
    return " ".join(str(pid) for pid in pids if pid > 1)


def ledger_tool(path: str, name: str = "ledger", **controls: Any) -> Any:
    """Appends its call id to the SQLite ledger on entry, then works for a few ms."""

    def body(args: Any, ctx: Any) -> Any:
        db = sqlite3.connect(path, timeout=30, isolation_level=None)
        try:
            db.execute(
                "INSERT INTO runs (call_id, pid, at, lineage) VALUES (?, ?, ?, ?)",
                (ctx.call_id, os.getpid(), time.time(), lineage()),
            )
        finally:
            db.close()
        time.sleep(float(args.get("ms", 5)) / 1000)
        return {"n": args.get("n", 0)}

    return define_tool(
        name=name,
        description="Record the call and work a little",
        parameters={"n": {"type": "integer"}, "ms": {"type": "number"}},
        output=ToolOutput(schema={"type": "json"}, render=lambda a, v: [text_block(str(v))]),
        execute=body,
        is_concurrency_safe=lambda args: True,
        **controls,
    )


def farm_tools(path: str, toolslot: bool, boxed: Placement | None = None) -> list[Any]:
    """The ledger tool and its farm-controlled twins (one per suffix of ``TOOLS``).

    ``boxed``: the sandbox placement (``--isolation sandbox``), its write path the ledger's.
    """
    elastic = Placement(
        min_size=1,
        max_size=3,
        idle_s=1.0,
        max_concurrency=2,
        spare=0,
        resources={"toolslot": 1} if toolslot else None,
        isolation=None if boxed is None else "sandbox",
        write_paths=() if boxed is None else boxed.write_paths,
    )
    return [
        ledger_tool(path, placement=boxed),
        ledger_tool(
            path, TOOLS["R"], idempotent=True, retry=RetryPolicy(backoff_ms=20), placement=boxed
        ),
        ledger_tool(path, TOOLS["L"], rate_limit=RATE, placement=boxed),
        ledger_tool(path, TOOLS["E"], placement=elastic),
    ]


def _boxed(args: argparse.Namespace) -> Placement | None:
    """``--isolation sandbox``: each tool's calls in sandboxes that may write the work dir."""
    if args.isolation != "sandbox":
        return None
    resources = {"toolslot": 1.0} if args.toolslot else None
    work = (os.path.dirname(args.ledger),)
    return Placement(isolation="sandbox", write_paths=work, resources=resources, size=2)


def _wrong_values(calls: list[ToolCall], results: Sequence[ToolCallResult]) -> int:
    """Successes whose value is not their own call's (another tenant's in its place)."""
    wrong = 0
    for call, item in zip(calls, results, strict=False):
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        if not item.result.is_error and item.result.value != {"n": arguments.get("n")}:
            wrong += 1
    return wrong


class Agent:
    def __init__(self, driver: int, index: int, args: argparse.Namespace, rt: RayRuntime) -> None:
        self.name = f"d{driver}a{index}"
        self.args = args
        self.rt = rt
        self.rng = random.Random(args.seed * 1000 + driver * 100 + index)
        self.batches = 0
        self.log_path = Path(args.logs) / f"{self.name}.jsonl"
        self.tally = Tally(rt, self.name)  # the agent's environment, bumped after each batch

    def _calls(self) -> list[ToolCall]:
        k = self.args.calls
        prefix = f"{self.name}-b{self.batches}"
        kinds = list(TOOLS)
        calls = []
        for i in range(k):
            kind = kinds[i % len(kinds)]
            args = {"n": i, "ms": self.rng.choice((1, 5, 20))}
            calls.append(ToolCall(f"{prefix}-c{i}{kind}", TOOLS[kind], args))
        return calls

    async def one(self, phase: str) -> dict[str, Any]:
        calls = self._calls()
        self.batches += 1
        t0 = time.monotonic()
        record: dict[str, Any] = {"agent": self.name, "phase": phase, "ids": [c.id for c in calls]}
        try:
            with JsonlEventLog(self.log_path) as log:
                batch = ToolBatchInput(
                    calls,
                    AbortController().signal,
                    scope=self.name,
                    log=LogStep(self.batches, 0, log),
                )
                out = await self.rt.executor(self.name).execute_batch(batch)
        except BaseException as err:  # an invariant violation: record it, go on
            record.update(raised=f"{type(err).__module__}.{type(err).__name__}: {err}")
        else:
            record.update(
                result_ids=[r.call_id for r in out.results],
                codes=[
                    (r.result.error.info.code if r.result.error.info else "NO_CODE")
                    if r.result.is_error
                    else None
                    for r in out.results
                ],
                uncoded=[
                    r.result.error.message[:300]
                    for r in out.results
                    if r.result.is_error and r.result.error.info is None
                ],
                wrong_values=_wrong_values(calls, out.results),
            )
        record["seconds"] = round(time.monotonic() - t0, 4)
        record["tally"] = await self.tally.step()
        record["end"] = time.time()
        return record


async def run(
    args: argparse.Namespace, stop: threading.Event, attacks: list[dict[str, object]]
) -> list[dict[str, Any]]:
    config = RuntimeConfig.model_validate(
        {
            "namespace": args.namespace,
            "kill_grace_ms": 300,
            "cancel_grace_ms": 100,
            "pool": {
                "size": 2,
                "spare": 1,
                "max_concurrency": 64,
                # with worker nodes, tool workers live there (so a lost node costs calls)
                "resources": {"toolslot": 1} if args.toolslot else {},
                "isolation": args.isolation,
            },
            "executors": {"mode": args.mode, "shards": 2},
        }
    )
    rt = RayRuntime.start(config, address=args.address)
    boxed = _boxed(args)
    for definition in farm_tools(args.ledger, args.toolslot, boxed):
        rt.registry.register(definition)
    tally, bump = tally_kit(boxed is not None)  # identical in every driver: one registration
    rt.registry.register_environment(tally)
    rt.registry.register(bump)
    agents = [Agent(args.driver, i, args, rt) for i in range(args.agents)]
    records: list[dict[str, Any]] = []
    hostile = None
    if args.hostile:  # a tenant whose bodies attack the farm, in a scope of its own
        for definition in hostile_tools(args.hostile, boxed):
            rt.registry.scope(HOSTILE_SCOPE).register(definition)
        hostile = asyncio.ensure_future(run_hostile(rt, args.isolation, stop.is_set))
    print("READY", flush=True)

    async def loop(agent: Agent) -> None:
        while not stop.is_set():
            records.append(await agent.one("chaos"))
        stopped = time.time()
        while True:  # recovery: until one batch fully succeeds
            rec = await agent.one("recovery")
            rec["since_stop"] = round(rec["end"] - stopped, 3)
            records.append(rec)
            if "codes" in rec and not any(rec["codes"]) and rec["tally"].get("ok"):
                return
            if rec["since_stop"] > 120:
                return

    await asyncio.gather(*(loop(a) for a in agents))
    if hostile is not None:
        attacks.extend(await hostile)
    rt.shutdown()
    return records


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("address", "namespace", "ledger", "out", "logs"):
        parser.add_argument(name)
    parser.add_argument("--driver", type=int, default=0)
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--calls", type=int, default=6)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mode", default="per_scope")
    parser.add_argument("--toolslot", action="store_true")
    parser.add_argument("--isolation", default="call", choices=("call", "shared", "sandbox"))
    parser.add_argument("--hostile", default=None, metavar="DIR")
    args = parser.parse_args()
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cloudpickle.register_pickle_by_value(_chaos_hostile)  # its bodies import nothing of Ray
    cloudpickle.register_pickle_by_value(_chaos_env)
    stop = threading.Event()

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    attacks: list[dict[str, object]] = []  # the hostile tenant's batches
    records = asyncio.run(run(args, stop, attacks))
    if args.hostile:
        lines = [json.dumps(rec) + "\n" for rec in attacks]
        Path(args.hostile, "records.jsonl").write_text("".join(lines), encoding="utf-8")
    with open(args.out, "w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
