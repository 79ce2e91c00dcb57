"""``toolray bench --environments``: the environment figures, each beside its reference.

Every part runs on a fresh sharded namespace (2 shards) of the running Ray, torn down
after it:

- ``call``: a one-call batch of an environment's tool against the same stateless tool,
  interleaved round by round (p50 each, the ratio);
- ``open``: ``open()`` of a warm definition, the previous instance closed between rounds;
- ``fork``: ``fork="process"`` of a 50 MB state against a 1 KB state (and a
  ``"snapshot"`` fork of the same 50 MB for comparison);
- ``memory``: N open instances of a 100 KB state: the proportional set size toolray's
  processes gained, with each isolation; beside it the floor of ``"call"``: what a child
  forked from the same kind of template adds when it does nothing at all;
- ``parked``: N instances with ``park_after_s`` short, opened in waves: the peak of every
  toolray process's memory meanwhile, then each state read back and checked;
- ``replay``: the multi-turn replay of ``_env_replay`` (hundreds of scopes, forks) against
  plain Python: the same outcomes and final states, exactly.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import psutil

from toolray import (
    EnvironmentDefinition,
    Placement,
    ToolBatchInput,
    ToolCall,
    ToolRunContext,
    define_environment,
    tool,
)
from toolray.procs import ChildContext, Template, TemplateSpec

from ._env_replay import make_plan, replay_plain, replay_toolray
from ._env_world import definitions

if TYPE_CHECKING:
    from toolray_actors import RayRuntime

__all__ = ("EnvOptions", "run_environments")

Say = Callable[[str], None]
_WAVE = 32


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvOptions:
    """What ``run_environments`` measures (``0`` skips a part)."""

    rounds: int = 200
    forks: int = 20
    fork_mb: int = 50
    instances: int = 1000
    state_kb: int = 100
    parked: int = 10_000
    replay_scopes: int = 200

    def check(self) -> None:
        """Raise ``ValueError`` for options that cannot be measured."""
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"--env-{name.replace('_', '-')} must be a count ≥ 0: {value!r}")


def _blob(config: dict[str, int]) -> dict[str, bytes]:
    return {"blob": random.Random(config["seed"]).randbytes(config["size"])}


def _digest(state: dict[str, bytes]) -> str:
    return hashlib.sha256(state["blob"]).hexdigest()


@tool(name="env_bench_noop", environment="bench")
def _env_noop(*, ctx: ToolRunContext) -> int:
    """A call of the bench environment that does nothing."""
    return 0


@tool(name="bench_noop")
def _noop() -> int:
    """The same call of no environment."""
    return 0


def _env(name: str, **options: object) -> EnvironmentDefinition:
    return define_environment(name, create=_blob, **options)  # type: ignore[arg-type]


def _sibling(base: RayRuntime, label: str) -> RayRuntime:
    from toolray_actors import RayRuntime, RuntimeConfig

    data = base.config.model_dump()
    data.update(
        namespace=f"{base.config.namespace}-env-{label}-{uuid.uuid4().hex[:6]}",
        detached=False,
        executors={"mode": "sharded", "shards": 2},
    )
    return RayRuntime.start(RuntimeConfig.model_validate(data))


def _ms(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"p50_ms": statistics.median(ordered) * 1e3, "p99_ms": p99 * 1e3, "n": len(ordered)}


async def _timed(work: Awaitable[object]) -> float:
    started = time.perf_counter()
    await work
    return time.perf_counter() - started


# ------------------------------------------------------------------ the parts
async def _call(rt: RayRuntime, rounds: int) -> dict[str, object]:
    rt.registry.register_environment(_env("bench"))
    rt.registry.register(_env_noop)
    rt.registry.register(_noop)
    ex = rt.executor("bench-call")
    await ex.environment("bench").open({"seed": 1, "size": 1024})

    def one(name: str) -> ToolBatchInput:
        return ToolBatchInput([ToolCall("c", name, {})], scope="bench-call")

    for _ in range(20):  # warm both paths
        await ex.execute_batch(one("bench_noop"))
        await ex.execute_batch(one("env_bench_noop"))
    plain: list[float] = []
    env: list[float] = []
    for _ in range(rounds):
        plain.append(await _timed(ex.execute_batch(one("bench_noop"))))
        env.append(await _timed(ex.execute_batch(one("env_bench_noop"))))
    a, b = _ms(env), _ms(plain)
    return {"environment": a, "stateless": b, "ratio": a["p50_ms"] / b["p50_ms"]}


async def _open(rt: RayRuntime, rounds: int) -> dict[str, object]:
    rt.registry.register_environment(_env("bench_open"))
    h = rt.executor("bench-open").environment("bench_open")
    for _ in range(5):
        await h.open({"seed": 2, "size": 1024})
    samples = []
    for i in range(rounds):
        await h.close()
        samples.append(await _timed(h.open({"seed": i, "size": 1024})))
    return {"open": _ms(samples)}


async def _fork(rt: RayRuntime, forks: int, mb: int) -> dict[str, object]:
    rt.registry.register_environment(_env("bench_fork", fork="process"))
    rt.registry.register_environment(_env("bench_copy", fork="snapshot"))
    out: dict[str, object] = {}
    for label, name, size in (
        ("process_1kb", "bench_fork", 1024),
        ("process_big", "bench_fork", mb * 2**20),
        ("snapshot_big", "bench_copy", mb * 2**20),
    ):
        h = rt.registry.environment(name, scope=f"fork-src-{label}")
        await h.open({"seed": 3, "size": size})
        samples = [await _timed(h.fork(f"fork-dst-{label}-{i % 2}")) for i in range(forks)]
        out[label] = _ms(samples)
        copy = await rt.registry.environment(name, scope=f"fork-dst-{label}-0").run(_digest)
        out[f"{label}_intact"] = copy == await h.run(_digest)
    big, small = out["process_big"], out["process_1kb"]
    assert isinstance(big, dict)
    assert isinstance(small, dict)
    out["ratio"] = big["p50_ms"] / small["p50_ms"]
    return out


def _pss(pids: Sequence[int]) -> int:
    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_full_info().pss
        except (psutil.Error, OSError):
            continue
    return total


async def _memory(rt: RayRuntime, count: int, kb: int) -> dict[str, object]:
    """Open instances' memory with each isolation: a process each, or states in workers."""
    out: dict[str, object] = {"instances": count}
    for isolation in ("call", "shared"):
        name = f"bench_mem_{isolation}"
        placement = Placement(isolation=isolation, size=1)
        rt.registry.register_environment(_env(name, placement=placement))
        await rt.registry.environment(name, scope="mem-warm").open({"seed": 0, "size": 1024})
        before = await asyncio.to_thread(_toolray_pss, rt)
        for wave in range(0, count, _WAVE):
            await asyncio.gather(
                *(
                    rt.registry.environment(name, scope=f"mem-{i}").open(
                        {"seed": i, "size": kb * 1024}
                    )
                    for i in range(wave, min(count, wave + _WAVE))
                )
            )
        added = await asyncio.to_thread(_toolray_pss, rt) - before
        out[isolation] = {"added_mb": added / 2**20, "per_instance_mb": added / 2**20 / count}
        await asyncio.gather(
            *(rt.registry.environment(name, scope=f"mem-{i}").close() for i in range(count))
        )
    out["fork_floor_mb"] = await asyncio.to_thread(_fork_floor, min(count, _FLOOR_CHILDREN))
    return out


_FLOOR_CHILDREN = 20


def idle_child(ctx: ChildContext) -> int:
    """A template's child that says it is up, then only waits (the floor of a forked child)."""
    os.write(ctx.channel, b"\1")
    os.read(ctx.channel, 1)
    return 0


def _fork_floor(children: int) -> float:
    """MB of PSS one idle child adds, forked from a template preloading the call core."""
    spec = TemplateSpec(
        entry=f"{__name__}:idle_child",
        preload=("toolray.isolation._entry", __name__),
        sys_path=tuple(p for p in sys.path if p),
    )
    template = Template(spec)
    kids = []
    try:
        template.wait_ready(60)
        assert template.pid is not None
        before = _pss([template.pid])
        kids = [template.fork({}) for _ in range(children)]
        for kid in kids:
            kid.channel.recv(1)  # it is up and waiting
        after = _pss([template.pid, *(kid.pid for kid in kids)])
    finally:
        for kid in kids:
            kid.close()
        template.stop()
    return (after - before) / 2**20 / max(1, children)


def _toolray_pss(rt: RayRuntime) -> int:
    """Every toolray process's proportional set size: actors, instances, their templates."""
    stats = rt.stats()
    pids = {a.pid for a in stats.actors} | {p for pool in stats.pools for p in pool.instance_pids}
    pids |= {c.pid for pid in list(pids) for c in _children(pid)}
    return _pss(sorted(pids))


def _children(pid: int) -> list[psutil.Process]:
    """``pid``'s children; a template's keeper (a shell) stands for the template below it."""
    try:
        kids = list(psutil.Process(pid).children())
        return [*kids, *(g for k in kids if "toolray-keeper" in k.cmdline() for g in k.children())]
    except (psutil.Error, OSError):
        return []


async def _parked(rt: RayRuntime, count: int, kb: int) -> dict[str, object]:
    rt.registry.register_environment(_env("bench_park", park_after_s=1.0))
    scopes = [f"park-{i}" for i in range(count)]
    peak = 0
    started = time.perf_counter()
    for wave in range(0, count, _WAVE):
        await asyncio.gather(
            *(
                rt.registry.environment("bench_park", scope=s).open({"seed": i, "size": kb * 1024})
                for i, s in enumerate(scopes[wave : wave + _WAVE], start=wave)
            )
        )
        if wave % (_WAVE * 10) == 0:
            peak = max(peak, await asyncio.to_thread(_toolray_pss, rt))
    opened = time.perf_counter() - started
    counts = rt.stats().environments
    intact = 0
    for wave in range(0, count, _WAVE):
        digests = await asyncio.gather(
            *(
                rt.registry.environment("bench_park", scope=s).run(_digest)
                for s in scopes[wave : wave + _WAVE]
            )
        )
        wanted = range(wave, wave + len(digests))
        expected = [_digest(_blob({"seed": i, "size": kb * 1024})) for i in wanted]
        intact += sum(a == b for a, b in zip(digests, expected, strict=True))
        if wave % (_WAVE * 10) == 0:
            peak = max(peak, await asyncio.to_thread(_toolray_pss, rt))
    return {
        "instances": count,
        "open_s": opened,
        "parked_when_opened": counts.parked,
        "peak_pss_mb": peak / 2**20,
        "intact": intact,
        "check_s": time.perf_counter() - started - opened,
    }


async def _replay(rt: RayRuntime, scopes: int) -> dict[str, object]:
    environments, tools = definitions()
    for e in environments:
        rt.registry.register_environment(e)
    for t in tools:
        rt.registry.register(t)
    plan = make_plan(scopes, 6, seed=5, prefix="bench-replay")
    started = time.perf_counter()
    reference = replay_plain(plan)
    plain_s = time.perf_counter() - started
    started = time.perf_counter()
    got = await replay_toolray(
        plan,
        lambda b: rt.executor(b.scope).execute_batch(b),
        lambda s, e: rt.registry.environment(e, scope=s),
    )
    outcomes, states = reference
    got_outcomes, got_states = got
    return {
        "scopes": len(states),
        "calls": plan.calls,
        "outcomes_match": got_outcomes == outcomes,
        "states_match": got_states == states,
        "toolray_s": time.perf_counter() - started,
        "plain_s": plain_s,
    }


_PARTS: dict[str, Callable[[RayRuntime, EnvOptions], Coroutine[None, None, dict[str, object]]]] = {
    "call": lambda rt, o: _call(rt, o.rounds),
    "open": lambda rt, o: _open(rt, max(1, o.rounds // 4)),
    "fork": lambda rt, o: _fork(rt, o.forks, o.fork_mb),
    "memory": lambda rt, o: _memory(rt, o.instances, o.state_kb),
    "parked": lambda rt, o: _parked(rt, o.parked, o.state_kb),
    "replay": lambda rt, o: _replay(rt, o.replay_scopes),
}
_SIZE = {"call": "rounds", "open": "rounds", "fork": "forks", "memory": "instances"}
_SIZE |= {"parked": "parked", "replay": "replay_scopes"}


def run_environments(
    base: RayRuntime, opts: EnvOptions, *, say: Say | None = None
) -> dict[str, object]:
    """Every part (each on its own namespace); the report."""
    from toolray_actors.cli._bench import machine

    opts.check()
    tell = say or (lambda what: None)
    report: dict[str, object] = {
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "options": asdict(opts),
    }
    started = time.perf_counter()
    for part, measure in _PARTS.items():
        if not getattr(opts, _SIZE[part]):
            continue
        rt = _sibling(base, part)
        try:
            report[part] = asyncio.run(measure(rt, opts))
            tell(f"{part}: done")
        finally:
            rt.teardown()
    report["seconds"] = time.perf_counter() - started
    return report
