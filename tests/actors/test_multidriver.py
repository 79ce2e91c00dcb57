"""Many drivers, one namespace: leases, shutdown, death, teardown, recovery.

A head started by ``ray.cluster_utils.Cluster`` in a host subprocess (its own ports, shut
down by the test) and driver subprocesses attaching to it, each driven line by line; every
answer carries the exception's module, so no ``ray.exceptions`` type can reach a caller
unnoticed.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.actors._procs import Child, DriverProc, child_env

pytestmark = [pytest.mark.ray, pytest.mark.own_ray, pytest.mark.slow]

_ns = itertools.count()


@pytest.fixture(scope="module")
def cluster_host() -> Iterator[tuple[Child, str]]:
    host = Child(["toolray_actors.testing.cluster_host"], child_env())
    try:
        yield host, host.expect("ADDRESS ", timeout=180)
    finally:
        host.close(timeout=120)


@pytest.fixture(scope="module")
def cluster(cluster_host: tuple[Child, str]) -> str:
    return cluster_host[1]


@pytest.fixture
def drivers(cluster: str) -> Iterator[Any]:
    started: list[DriverProc] = []
    namespace = f"farm-{os.getpid()}-{next(_ns)}"

    def new() -> DriverProc:
        proc = DriverProc(cluster, namespace, child_env())
        started.append(proc)
        return proc

    yield new
    for proc in started:
        proc.close(timeout=60)


def _no_ray_types(*answers: dict[str, Any]) -> None:
    for out in answers:
        assert not str(out.get("module", "")).startswith("ray"), out


def _wait_namespace_empty(observer: DriverProc, within: float) -> list[str]:
    deadline = time.monotonic() + within
    while True:
        names = observer.ok("actors")["names"]
        if not names or time.monotonic() > deadline:
            return list(names)
        time.sleep(0.25)  # polling the cluster's state (bounded): the thing waited for is remote


def _two_with_echo(drivers: Any) -> tuple[DriverProc, DriverProc]:
    """Two started drivers of one namespace, the first having registered ``echo``."""
    a, b = drivers(), drivers()
    a.ok("start", 180)
    b.ok("start", 180)
    a.ok("register echo")
    return a, b


@pytest.mark.timeout(400)
def test_two_drivers_start_together_share_registrations_and_outlive_each_other(
    drivers: Any,
) -> None:
    a, b = drivers(), drivers()
    a.send("start")
    b.send("start")  # both race to create the namespace's registry actor
    assert a.answer(180)["ok"]
    assert b.answer(180)["ok"]
    a.ok("register echo")
    b.ok("register echo")  # identical: shares the registration
    assert a.ok("batch agent-a")["values"] == ["t0", "t1", "t2"]
    assert b.ok("batch agent-b")["values"] == ["t0", "t1", "t2"]
    a.ok("shutdown")  # releases a's lease only
    assert b.ok("batch agent-b")["values"] == ["t0", "t1", "t2"]
    assert b.ok("names")["names"] == ["echo"]
    different = b.ask("register shout")
    assert not different["ok"]
    assert different["type"] == "ValueError"
    assert different["message"].endswith("; pass replace=True to swap it")
    b.ok("register shout yes")
    assert b.ok("batch agent-b 1")["values"] == ["T0"]
    b.ok("shutdown")  # the last lease of a non-detached namespace: everything stops
    observer = drivers()
    observer.ok("connect")
    assert _wait_namespace_empty(observer, within=15) == []
    _no_ray_types(different)


@pytest.mark.timeout(400)
def test_a_driver_that_dies_breaks_no_other_and_the_last_death_ends_the_namespace(
    drivers: Any,
) -> None:
    a, b = _two_with_echo(drivers)
    assert a.ok("batch agent-a")["values"] == ["t0", "t1", "t2"]
    a.send("exit 0")  # os._exit: no shutdown, no lease release
    assert a.proc.wait(timeout=60) == 0
    assert b.ok("batch agent-b")["values"] == ["t0", "t1", "t2"]
    assert b.ok("names")["names"] == ["echo"]
    observer = drivers()
    observer.ok("connect")
    assert "toolray:registry" in observer.ok("actors")["names"]
    b.send("exit 0")
    assert b.proc.wait(timeout=60) == 0
    # every holder's driver exited: noticed within 10 s, then the actors exit
    assert _wait_namespace_empty(observer, within=20) == []


@pytest.mark.timeout(400)
def test_leases_restored_after_a_registry_sigkill_still_end_with_their_drivers(
    drivers: Any,
) -> None:
    """The registry restarts from its persisted leases; each still knows its driver's death."""
    a, b = _two_with_echo(drivers)
    os.kill(a.ok("pids")["toolray:registry"], signal.SIGKILL)
    assert b.ok("names")["names"] == ["echo"]  # the restarted registry, from its store
    observer = drivers()
    observer.ok("connect")
    os.kill(a.proc.pid, signal.SIGKILL)  # no shutdown, no lease release
    a.proc.wait(timeout=60)
    assert b.ok("batch agent-b")["values"] == ["t0", "t1", "t2"]
    assert "toolray:registry" in observer.ok("actors")["names"]  # b still holds it
    b.send("exit 0")
    assert b.proc.wait(timeout=60) == 0
    # both leases were restored, not re-acquired: their drivers' deaths still end the namespace
    assert _wait_namespace_empty(observer, within=20) == []


@pytest.mark.timeout(400)
def test_teardown_stops_the_namespace_for_everyone_with_a_clear_error(drivers: Any) -> None:
    a, b = _two_with_echo(drivers)
    assert b.ok("batch agent-b")["values"] == ["t0", "t1", "t2"]
    a.ok("teardown")
    after = [b.ask("batch agent-b"), b.ask("names"), b.ask("register echo"), b.ask("stats")]
    for out in after:
        assert not out["ok"], out
        assert out["type"] == "RuntimeUnavailableError", out
        assert out["code"] == "RUNTIME_UNAVAILABLE", out
        assert "torn down" in out["message"], out
    _no_ray_types(*after)
    b.ok("shutdown")  # after teardown: a quiet no-op
    observer = drivers()
    observer.ok("connect")
    assert _wait_namespace_empty(observer, within=15) == []


@pytest.mark.timeout(400)
def test_every_public_call_survives_a_sigkill_of_its_actor(drivers: Any) -> None:
    a = drivers()
    a.ok("start", 180)
    a.ok("register echo")
    assert a.ok("batch agent-k")["values"] == ["t0", "t1", "t2"]
    pids = a.ok("pids")
    os.kill(pids["toolray:executor:agent-k"], signal.SIGKILL)
    answers = [a.ask("batch agent-k"), a.ask("stats")]
    assert answers[0]["values"] == ["t0", "t1", "t2"], answers[0]
    os.kill(pids["toolray:registry"], signal.SIGKILL)  # restarted from the persisted state
    answers += [a.ask("names"), a.ask("batch agent-k"), a.ask("register echo"), a.ask("stats")]
    for out in answers:
        assert out["ok"], out
    assert answers[2]["names"] == ["echo"]
    assert answers[3]["values"] == ["t0", "t1", "t2"]
    _no_ray_types(*answers)


@pytest.mark.timeout(400)
def test_the_docs_farm_driver_runs_as_written_from_two_processes(
    cluster: str, tmp_path: Any
) -> None:
    """The farm page's driver script (a file block), twice at once, outside the repository."""
    import subprocess
    import sys

    from tests.docs._snippets import DOCS, blocks, expected_output

    farm = next(b for b in blocks(DOCS / "farm-runtime.md") if b.file_name == "farm_driver.py")
    script = tmp_path / "farm_driver.py"
    script.write_text(farm.source)
    env = child_env(RAY_ADDRESS=cluster)
    env.pop("PYTHONPATH")  # as a user would run it: only the installed packages
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), agent],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for agent in ("agent-1", "agent-2")
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for proc, (_, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 0, err[-3000:]
        assert "Traceback" not in err, err[-3000:]
    printed = sorted(
        line for out, _ in outs for line in out.splitlines() if line.startswith("agent-")
    )
    want = expected_output(farm.source)[0]
    assert printed == sorted([want, want.replace("agent-1", "agent-2")])
    down = subprocess.run(
        [
            sys.executable,
            "-c",
            'from toolray_actors import RayRuntime\nRayRuntime.start("cluster").teardown()',
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert down.returncode == 0, down.stderr[-3000:]


@pytest.mark.timeout(400)
def test_control_actors_live_on_control_nodes_and_come_back_when_their_node_goes(
    cluster_host: tuple[Child, str], drivers: Any
) -> None:
    """Control actors go where ``control_resource`` is offered, never to a driver's node;
    losing their node costs nothing but a restart from the persisted state."""
    host, _ = cluster_host
    control = f"control{os.getpid()}"
    nodes = []
    for _ in range(2):
        assert host.proc.stdin is not None
        host.proc.stdin.write(f'add {{"{control}": 10}}\n')
        host.proc.stdin.flush()
        nodes.append(host.expect("NODE ", timeout=180))
    a = drivers()
    a.ok(f"start {control}", 180)
    a.ok("register echo")
    assert a.ok("batch agent-c")["values"] == ["t0", "t1", "t2"]
    where = a.ok("where")
    del where["ok"]
    assert set(where.values()) <= set(nodes), where
    doomed = where["toolray:registry"]
    assert host.proc.stdin is not None
    host.proc.stdin.write(f"remove {doomed}\n")
    host.proc.stdin.flush()
    host.expect("REMOVED", timeout=120)
    seen = []
    deadline = time.monotonic() + 90
    while True:  # the cluster notices the lost node within seconds; Ray restarts the registry
        seen.append(a.ask("names"))
        seen.append(a.ask("where"))
        moved = {k: v for k, v in seen[-1].items() if k != "ok"}
        if moved.get("toolray:registry") not in (None, doomed):
            break
        assert time.monotonic() < deadline, seen[-4:]
        time.sleep(0.5)  # polling the cluster's state (bounded)
    seen.append(a.ask("batch agent-c"))
    seen.append(a.ask("names"))
    for out in seen:
        assert out["ok"], out
    assert seen[-2]["values"] == ["t0", "t1", "t2"]
    assert seen[-1]["names"] == ["echo"]
    assert moved["toolray:registry"] in nodes
    _no_ray_types(*seen)
