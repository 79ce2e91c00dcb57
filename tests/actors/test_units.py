"""Ray-free unit tests of the Ray layer's plain classes: they run without starting Ray.

``Mirror`` (replaying contributions), ``LeaseTable``, the definition fingerprint and the
placement key (stable across processes), the driver-side ``Accumulator`` of a streamed batch
(``EXECUTOR_LOST`` and the synthetic log records), the ``Portal`` (blocking calls inside a
running loop) and ``ToolWorker`` (bodies, early aborts, the definition cache).
"""

from __future__ import annotations

import asyncio
import pickle
import subprocess
import sys
import textwrap

import cloudpickle

from tests.actors._procs import ROOT, child_env
from tests.tools import text_echo_tool
from toolray import (
    AbortController,
    LogStep,
    MemoryEventLog,
    Placement,
    ToolBatchInput,
    ToolCall,
    ToolRegistry,
)
from toolray_actors._config import RuntimeConfig
from toolray_actors._fingerprint import fingerprint
from toolray_actors._mirror import Mirror, Op
from toolray_actors._placement import placement_key
from toolray_actors._wire import Committed, LogRecord, WorkerRequest
from toolray_actors.control._leases import LeaseTable
from toolray_actors.driver._batch_stream import Accumulator
from toolray_actors.driver._portal import Portal
from toolray_actors.execution._placements import Placements
from toolray_actors.execution._pool_client import PoolClient, WorkerSlot
from toolray_actors.execution._worker import ToolWorker


def _register(op_id: int, key: str | None, name: str, safe: bool = True) -> Op:
    blob = cloudpickle.dumps(text_echo_tool(name, safe=safe))
    return Op(id=op_id, kind="register", key=key, blob=blob, name=name)


# ---------------------------------------------------------------- Mirror
def test_a_mirror_replays_registrations_scopes_and_restrictions() -> None:
    mirror = Mirror(ToolRegistry())
    mirror.apply(_register(1, None, "alpha"))
    mirror.apply(_register(2, None, "beta"))
    mirror.apply(Op(id=3, kind="scope", key="agent"))
    mirror.apply(Op(id=4, kind="restrict", key="agent", deny=("beta",)))
    assert [s["name"] for s in mirror.registry.schemas("agent")] == ["alpha"]
    assert mirror.key_of(mirror.registry.get("alpha")) is not None
    mirror.remove(4)
    assert [s["name"] for s in mirror.registry.schemas("agent")] == ["alpha", "beta"]


def test_a_mirror_swaps_a_registration_in_place_and_forgets_a_disposed_scope() -> None:
    mirror = Mirror(ToolRegistry())
    mirror.apply(Op(id=1, kind="scope", key="agent"))
    mirror.apply(_register(2, "agent", "tool"))
    old = mirror.registry.get("tool", "agent")
    mirror.swap(2, _register(3, "agent", "tool", safe=False))
    new = mirror.registry.get("tool", "agent")
    assert new is not old
    assert mirror.key_of(new) is not None
    assert mirror.key_of(new)[0] == "def:3"
    mirror.dispose_scope("agent", [1, 3])
    assert not mirror.has_scope("agent")
    assert mirror.disposers == {}
    assert mirror.blobs == {}
    assert mirror.keys == {}


def test_a_disposed_scopes_definitions_leave_what_the_worker_slots_remember_sending() -> None:
    placements = Placements("ns", RuntimeConfig())
    pool = placements.pools["default"] = PoolClient(None)
    slot = pool.slots["w1"] = WorkerSlot("w1", None)
    mirror = Mirror(ToolRegistry(), on_forget=placements.forget_code)
    mirror.apply(_register(1, None, "shared"))
    mirror.apply(Op(id=2, kind="scope", key="agent"))
    mirror.apply(_register(3, "agent", "own"))
    mirror.apply(_register(4, "agent", "other"))
    slot.sent |= {"def:1", "def:3", "def:4"}  # what the body runner sent this worker
    mirror.swap(4, _register(5, "agent", "other", safe=False))
    assert slot.sent == {"def:1", "def:3"}
    mirror.dispose_scope("agent", [2, 3, 5])
    assert slot.sent == {"def:1"}  # the global tool's code stays known


# ---------------------------------------------------------------- leases
def test_leases_count_holders_and_drop_dead_ones() -> None:
    table = LeaseTable(thaw=lambda blob: f"ref<{blob.decode()}>")
    assert table.acquire("l1", "job-a", 1, "h", anchor=b"1") == 1
    assert table.acquire("l1", "job-a", 1, "h") == 1  # idempotent; the anchor stays
    assert table.acquire("l2", "job-b", 2, "h", anchor=b"2") == 2
    assert table.anchors == {"l1": "ref<1>", "l2": "ref<2>"}
    assert [lease.id for lease in table.drop({"l1"})] == ["l1"]
    assert table.anchors == {"l2": "ref<2>"}
    assert table.release("l2") == 0
    assert table.ever_held


def test_restored_leases_get_their_anchors_back_from_the_persisted_bytes() -> None:
    persisted = LeaseTable(thaw=bytes.decode)
    persisted.acquire("l1", "job-a", 1, "h", anchor=b"one")
    persisted.acquire("l2", "job-b", 2, "h")  # an old runtime's lease: no anchor
    saved = pickle.loads(pickle.dumps(persisted.snapshot()))
    restored = LeaseTable(saved, thaw=bytes.decode)
    assert restored.anchors == {"l1": "one"}
    assert restored.ever_held
    assert [lease.anchor for lease in restored.snapshot()] == [b"one", b""]


def test_the_leases_whose_anchors_are_lost_are_the_dead_ones() -> None:
    table = LeaseTable(thaw=bytes.decode)
    for n, blob in enumerate((b"up", b"down", b"slow", b"")):
        table.acquire(f"l{n}", "job", n, "h", anchor=blob)
    asked: list[tuple[object, float]] = []

    async def alive(ref: object, timeout_s: float) -> bool:
        asked.append((ref, timeout_s))
        return ref != "down"

    assert asyncio.run(table.dead(alive, 2.0)) == {"l1"}
    assert sorted(asked) == [("down", 2.0), ("slow", 2.0), ("up", 2.0)]  # l3: no anchor


# ---------------------------------------------------------------- identities
_FINGERPRINT = textwrap.dedent(
    """
    from tests.tools import text_echo_tool
    from toolray import Placement
    from toolray_actors._fingerprint import fingerprint
    from toolray_actors._placement import placement_key
    print(fingerprint(text_echo_tool("same")))
    print(placement_key(Placement(resources={"gpu_slot": 1}, runtime_env={"env_vars": {"A": "1"}})))
    """
)


def test_fingerprints_and_placement_keys_are_equal_in_every_process() -> None:
    """Another process (another hash seed) computes the same digests."""
    out = subprocess.run(
        [sys.executable, "-c", _FINGERPRINT],
        cwd=ROOT,
        env=child_env(PYTHONHASHSEED="12345"),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    assert out[0] == fingerprint(text_echo_tool("same"))
    env_a = Placement(resources={"gpu_slot": 1}, runtime_env={"env_vars": {"A": "1"}})
    env_b = Placement(resources={"gpu_slot": 1}, runtime_env={"env_vars": {"A": "2"}})
    assert out[1] == placement_key(env_a)
    assert placement_key(env_a) != placement_key(env_b)


def test_a_fingerprint_sees_captured_values_and_code() -> None:
    assert fingerprint(text_echo_tool("t")) == fingerprint(text_echo_tool("t"))
    assert fingerprint(text_echo_tool("t", safe=True)) != fingerprint(
        text_echo_tool("t", safe=False)
    )
    assert fingerprint(text_echo_tool("t")) != fingerprint(text_echo_tool("u"))


# ---------------------------------------------------------------- the driver's stream
def test_a_lost_executor_fails_the_uncommitted_calls_and_completes_the_log() -> None:
    log = MemoryEventLog()
    calls = [ToolCall("c1", "t", "{}"), ToolCall("c2", "t", "{}"), ToolCall("c3", "t", "{}")]
    batch = ToolBatchInput(calls, AbortController().signal, scope="s", log=LogStep(1, 1, log))
    acc = Accumulator(batch)
    committed = ToolRegistry()  # a real success result for c1, from an in-process run
    committed.register(text_echo_tool("t"))
    one = asyncio.run(committed.execute_batch(ToolBatchInput(calls[:1], AbortController().signal)))
    head = {"turn": 1, "step": 1}
    chunk = [
        LogRecord({**head, "type": "tool/call", "callId": "c1", "name": "t", "arguments": "{}"}),
        LogRecord({**head, "type": "tool/call", "callId": "c2", "name": "t", "arguments": "{}"}),
        Committed(0, one.results[0]),
    ]
    assert [i for i, _ in acc.take(chunk)] == [0]
    lost = list(acc.lose(None))
    assert [i for i, _ in lost] == [1, 2]
    assert all(r.result.error.info.code == "EXECUTOR_LOST" for _, r in lost)
    pairs = [(e["type"], e["callId"]) for e in log.events]
    assert pairs == [
        ("tool/call", "c1"),
        ("tool/call", "c2"),
        ("tool/result", "c2"),  # c2 started: only its result is synthetic
        ("tool/call", "c3"),  # c3 never started: both records are
        ("tool/result", "c3"),
    ]
    result = acc.result()
    assert [r.call_id for r in result.results] == ["c1", "c2", "c3"]


# ---------------------------------------------------------------- the portal
def test_the_portal_runs_blocking_calls_from_inside_a_running_loop() -> None:
    portal = Portal()

    async def inner() -> int:
        await asyncio.sleep(0)
        return 7

    async def outer() -> int:
        return portal.run(inner())  # as a notebook cell would: a loop is already running

    try:
        assert asyncio.run(outer()) == 7
    finally:
        portal.close()


# ---------------------------------------------------------------- the worker
def test_a_worker_runs_bodies_caches_definitions_and_honours_early_aborts() -> None:
    async def scenario() -> None:
        worker = ToolWorker(threads=2)
        blob = cloudpickle.dumps(text_echo_tool("w"))
        ident = {"call_id": "c1", "name": "w", "root_call_id": None, "scope": None}
        first = await worker.run(WorkerRequest("t1", "def:1", blob, {"text": "a"}, ident))
        assert first.status == "ok"
        assert first.value["text"] == "a"
        cached = await worker.run(WorkerRequest("t2", "def:1", None, {"text": "b"}, ident))
        assert cached.status == "ok"
        assert cached.value["text"] == "b"
        assert (await worker.run(WorkerRequest("t3", "def:9", None, {}, ident))).status == "missing"
        assert await worker.abort("t4", "stop") is False  # not here yet: remembered
        waiting = cloudpickle.dumps(_signal_reader())
        early = await worker.run(WorkerRequest("t4", "def:2", waiting, {}, ident))
        assert early.status == "ok"
        assert early.value == "aborted: stop"
        assert (await worker.status()).in_flight == 0

    asyncio.run(scenario())


def _signal_reader() -> object:
    from toolray import ToolOutput, define_tool, text_block

    async def body(args: object, ctx: object) -> str:
        signal = ctx.signal  # type: ignore[attr-defined]
        return f"aborted: {signal.reason}" if signal.aborted else "running"

    return define_tool(
        name="reader",
        description="Report the signal",
        parameters={},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        execute=body,
    )
