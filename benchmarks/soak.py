"""Soak: many created-and-disposed scopes and many calls; actor RSS before and after.

"Bounded memory" of the farm runtime: creating and disposing 10,000 scopes and running 100,000 calls
grows no actor's RSS by more than 20 MB. Each scope gets a tool, a restriction and a
``schemas()`` view, then is disposed; every 100th scope also runs a batch on its own
executor (which exits when the scope is disposed). The calls run in 50-call batches on a
few long-lived agent scopes. RSS is read from ``rt.stats().actors`` after a warm-up and at
the end, per actor that lived through both.

Usage: ``python benchmarks/soak.py`` (full) or ``--quick`` (1,000 scopes, 10,000 calls).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import time
from typing import Any

import cloudpickle

from toolray import AbortController, ToolBatchInput, ToolCall, ToolOutput, define_tool, text_block
from toolray_actors import RayRuntime, RuntimeConfig

MB = 2**20


def _tool(name: str) -> Any:
    async def body(args: Any, ctx: Any) -> Any:
        return args.get("n", 0)

    return define_tool(
        name=name,
        description="No-op",
        parameters={"n": {"type": "integer"}},
        output=ToolOutput(schema={"type": "integer"}, render=lambda a, v: [text_block(str(v))]),
        execute=body,
        is_concurrency_safe=lambda args: True,
    )


def _batch(scope: str, n: int, start: int = 0) -> ToolBatchInput:
    calls = [ToolCall(f"c{start + i}", "soak_noop", {"n": i}) for i in range(n)]
    return ToolBatchInput(calls, AbortController().signal, scope=scope)


def _rss(rt: RayRuntime) -> dict[str, tuple[str, int]]:
    return {f"{a.kind}:{a.name}:{a.pid}": (a.kind, a.rss_bytes) for a in rt.stats().actors}


async def _scopes(rt: RayRuntime, count: int, offset: int) -> int:
    failures = 0
    for i in range(count):
        key = f"soak-{offset + i}"
        scope = rt.scope(key)
        scope.register(_tool(f"soak_local_{i % 7}"))
        scope.restrict(deny=["soak_other"])
        rt.registry.schemas(key)
        if i % 100 == 0:
            out = await rt.executor(key).execute_batch(_batch(key, 5))
            failures += sum(r.result.is_error for r in out.results)
        scope.dispose()
    return failures


async def _calls(rt: RayRuntime, total: int, agents: int) -> int:
    failures, done = 0, 0
    while done < total:
        wave = [
            rt.executor(f"soak-agent-{a}").execute_batch(_batch(f"soak-agent-{a}", 50, done))
            for a in range(agents)
        ]
        for out in await asyncio.gather(*wave):
            failures += sum(r.result.is_error for r in out.results)
        done += 50 * agents
    return failures


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    cloudpickle.register_pickle_by_value(__import__(__name__))
    config = RuntimeConfig.model_validate(
        {"namespace": "toolray-soak", "pool": {"size": 2, "spare": 1, "max_concurrency": 64}}
    )
    with RayRuntime.start(config, address="local") as rt:
        rt.registry.register(_tool("soak_noop"))
        rt.registry.register(_tool("soak_other"))
        # warm-up: every code path once, caches filled, the agents' executors up
        await _scopes(rt, args.warmup, offset=10**7)
        await _calls(rt, 50 * args.agents * 4, args.agents)
        before = _rss(rt)
        t0 = time.perf_counter()
        scope_failures = await _scopes(rt, args.scopes, offset=0)
        t1 = time.perf_counter()
        call_failures = await _calls(rt, args.calls, args.agents)
        t2 = time.perf_counter()
        after = _rss(rt)
        info = rt.registry.info()
    rows = []
    for key, (kind, rss) in sorted(before.items()):
        if key in after:
            rows.append((kind, key.split(":", 1)[1], rss / MB, after[key][1] / MB))
    return {
        "scopes": args.scopes,
        "calls": args.calls,
        "scope_seconds": round(t1 - t0, 1),
        "call_seconds": round(t2 - t1, 1),
        "calls_per_s": round(args.calls / (t2 - t1)),
        "failures": scope_failures + call_failures,
        "registry_scopes_after": info["scopes"],
        "registry_contributions_after": info["contributions"],
        "actors": [
            {"kind": k, "name": n, "rss_before_mb": round(b, 1), "rss_after_mb": round(a, 1)}
            for k, n, b, a in rows
        ],
        "max_growth_mb": round(max((a - b for _, _, b, a in rows), default=0.0), 1),
        "machine": f"{platform.processor() or platform.machine()}, Python "
        f"{platform.python_version()}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 scopes, 10,000 calls")
    parser.add_argument("--json", default=None, help="write the figures to this file")
    args = parser.parse_args()
    args.scopes = 1_000 if args.quick else 10_000
    args.calls = 10_000 if args.quick else 100_000
    args.warmup = 200
    args.agents = 4
    out = asyncio.run(main_async(args))
    print(f"{'actor':<44} {'RSS before':>11} {'RSS after':>10} {'growth':>8}")
    for row in out["actors"]:
        growth = row["rss_after_mb"] - row["rss_before_mb"]
        print(
            f"{row['kind'] + ' ' + row['name'][:36]:<44} {row['rss_before_mb']:>9.1f}MB "
            f"{row['rss_after_mb']:>8.1f}MB {growth:>+7.1f}MB"
        )
    print(
        f"\n{out['scopes']:,} scopes created+disposed in {out['scope_seconds']} s; "
        f"{out['calls']:,} calls in {out['call_seconds']} s ({out['calls_per_s']:,}/s); "
        f"failures {out['failures']}; registry after: {out['registry_scopes_after']} scopes, "
        f"{out['registry_contributions_after']} contributions; "
        f"max RSS growth {out['max_growth_mb']} MB (target ≤ 20 MB)"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
