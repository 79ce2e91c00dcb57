"""Other runs: a program cannot reach a sibling run's process, nor poison a warm child."""

from __future__ import annotations

import asyncio

from tests.code._helpers import child_pids, warm_pids
from tests.code.redteam._kit import PRELUDE, attack
from toolray import AbortController
from toolray.code import PythonRuntime
from toolray.testing import Gate

FORGED = (
    "frame = lambda obj: len(__import__('json').dumps(obj)).to_bytes(4, 'big')"
    " + __import__('json').dumps(obj).encode()\n"
    "call = frame({'op': 'call', 'id': 99, 'name': 'transfer',"
    " 'args': {'to': 'mallory', 'amount': 10**6}})\n"
    "done = frame({'op': 'done', 'has_result': True, 'result': 'forged'})\n"
)

REACH = (
    "def reach(pid):\n"
    "    open_ = len.__self__.open\n"
    "    reports = []\n"
    "    for fd in range(3, 8):\n"
    "        reports.append(attempt(lambda: open_(f'/proc/{pid}/fd/{fd}', 'wb').write(call)))\n"
    "    reports.append(attempt(lambda: open_(f'/proc/{pid}/mem', 'r+b', buffering=0)))\n"
    "    reports.append(attempt(lambda: os.kill(pid, 9)))\n"
    "    pidfd = syscall(434, pid, 0)\n"
    "    reports.append(f'pidfd {pidfd}' if pidfd < 0 else 'LEAK: pidfd')\n"
    "    return reports\n"
)


def _all_blocked(reports: list[str]) -> bool:
    return all(r.startswith(("blocked: ", "pidfd -")) for r in reports)


async def test_a_program_cannot_write_into_a_sibling_runs_channel() -> None:
    runtime = PythonRuntime(warm=1)
    transfers: list[dict] = []
    entered, release = Gate(), Gate()

    async def transfer(args):
        transfers.append(dict(args))
        return "sent"

    async def hold(args):
        entered.open()
        await release.wait()
        return None

    try:
        (victim_pid,) = await warm_pids(runtime)  # the victim's run takes this warm child
        victim = asyncio.ensure_future(
            runtime.run(
                "await tools.hold()\nawait tools.transfer(to='alice', amount=10)",
                {"hold": hold, "transfer": transfer},
                AbortController().signal,
            )
        )
        await entered.wait()

        async def sibling(args):
            return victim_pid

        out = await attack(
            runtime, FORGED + REACH + "reach(await tools.sibling())", {"sibling": sibling}
        )
        assert _all_blocked(out.result), out.result  # type: ignore[union-attr]
        release.open()
        result = await victim
        assert (result.result, transfers) == ("sent", [{"to": "alice", "amount": 10}])
    finally:
        release.open()
        runtime.close()


async def test_a_program_cannot_poison_the_next_warm_child() -> None:
    before = child_pids()
    runtime = PythonRuntime(warm=2)
    try:
        await runtime.wait_warm()
        waiting = child_pids() - before
        assert len(waiting) == 2

        async def others(args):
            return sorted(child_pids() - before)

        program = FORGED + REACH + "[r for pid in await tools.others() for r in reach(pid)]"
        out = await attack(runtime, program, {"others": others})
        assert _all_blocked(out.result), out.result  # type: ignore[union-attr]
        follow = await runtime.run("print('mine')\n'real result'", {}, AbortController().signal)
        assert (follow.logs, follow.result) == (["mine"], "real result")
    finally:
        runtime.close()
    assert child_pids() - before == set()


async def test_the_prelude_is_only_python(runtime: PythonRuntime) -> None:
    # The kit itself does nothing forbidden: its definitions alone run fine.
    out = await runtime.run(PRELUDE + "'ok'", {}, AbortController().signal)
    assert out.result == "ok"
