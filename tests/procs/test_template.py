"""The template substrate with real processes: forks, channels, ends, groups, namespaces, death."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import signal
import socket
import sys
from pathlib import Path

import psutil
import pytest

from tests.procs.conftest import ENTRIES, descendants
from toolray.procs import (
    ATTACHMENT,
    ExitStatus,
    FrameDecoder,
    Template,
    TemplateError,
    TemplateSpec,
    encode_frame,
)

WAIT_S = 30


def read_frame(sock: socket.socket, attachments: bool = False) -> dict:
    decoder = FrameDecoder(attachments=attachments)
    while True:
        data = sock.recv(65536)
        assert data, "the child closed its channel"
        frames = decoder.feed(data)
        if frames:
            assert len(frames) == 1
            return frames[0]


def test_a_child_serves_several_requests_on_its_channel(make_template) -> None:
    template = make_template("echo")
    child = template.fork(timeout=WAIT_S)
    try:
        for n in range(3):
            child.channel.sendall(encode_frame({"op": "echo", "n": n}, b"\x00pickled\n" * n))
            back = read_frame(child.channel, attachments=True)
            assert (back["n"], back["served_by"]) == (n, child.pid)
            assert back.get(ATTACHMENT, b"") == b"\x00pickled\n" * n
        child.channel.shutdown(socket.SHUT_WR)  # EOF: the entry returns 0
        assert child.wait_exit_blocking(WAIT_S) == ExitStatus(
            code=0, cpu_s=child.status.cpu_s, max_rss_kb=child.status.max_rss_kb
        )
        assert child.status.max_rss_kb > 0
    finally:
        child.close()


@pytest.mark.parametrize(
    ("entry", "args", "described"),
    [
        ("exit_with", 7, "code 7"),
        ("crash", None, "signal SIGSEGV"),
        ("fail", None, "code 1"),
    ],
)
def test_how_a_child_ended_is_reported(make_template, entry, args, described) -> None:
    template = make_template(entry)
    child = template.fork(args, timeout=WAIT_S)
    try:
        assert child.wait_exit_blocking(WAIT_S).describe() == described
        assert not child.alive
        assert child.pid not in descendants()  # reaped by the template
    finally:
        child.close()


def test_a_dead_child_tells_how_it_ended_before_its_template_reaps_it(make_template) -> None:
    template = make_template("report")
    child = template.fork(timeout=WAIT_S)
    pidfd = os.pidfd_open(child.pid)
    try:
        read_frame(child.channel)  # it runs
        assert child.zombie_status() is None
        os.kill(template.pid, signal.SIGSTOP)  # its template cannot reap it now
        try:
            os.kill(child.pid, signal.SIGKILL)
            select.select([pidfd], [], [], WAIT_S)  # readable once it has died
            assert child.zombie_status() == ExitStatus(signal=signal.SIGKILL)
            assert child.status is None  # not reported yet
        finally:
            os.kill(template.pid, signal.SIGCONT)
        assert child.wait_exit_blocking(WAIT_S).signal == signal.SIGKILL
        assert child.zombie_status() == child.status  # reaped: the report from now on
    finally:
        os.close(pidfd)
        child.close()


def test_an_entry_that_raises_leaves_its_traceback_on_the_captured_stderr(make_template) -> None:
    template = make_template("fail")
    child = template.fork(capture_stderr=True, timeout=WAIT_S)
    try:
        assert child.wait_exit_blocking(WAIT_S).code == 1
        text = b""
        while chunk := os.read(child.stderr, 65536):
            text += chunk
        assert b"RuntimeError: the entry raised" in text
    finally:
        child.close()


async def test_kill_ends_the_whole_process_group_and_nothing_is_left(make_template) -> None:
    template = make_template("hang_with_grandchild")
    child = await template.fork_async()
    try:
        pids = await asyncio.to_thread(read_frame, child.channel)
        assert pids["child"] == child.pid
        grandchild = psutil.Process(pids["grandchild"])
        assert os.getpgid(grandchild.pid) == child.pid  # the child leads its own group
        child.kill()
        status = await child.wait_exit()
        assert status.signal == signal.SIGKILL
        assert not status.lost
        grandchild.wait(WAIT_S)  # reaped by the template, a child subreaper
        assert not psutil.pid_exists(pids["grandchild"]) or grandchild.status() != "zombie"
    finally:
        child.close()


def test_a_child_holds_only_its_channel_and_the_standard_descriptors(make_template) -> None:
    template = make_template("report")
    child = template.fork({"k": [1, 2]}, timeout=WAIT_S)
    try:
        facts = read_frame(child.channel)
        assert facts["fds"] == [0, 1, 2, 3]
        assert facts["args"] == {"k": [1, 2]}
        assert facts["pgid"] == facts["pid"] == child.pid
    finally:
        child.close()
        child.wait_exit_blocking(WAIT_S)


def test_preload_and_init_run_once_in_the_template(make_template) -> None:
    template = make_template(
        "report", preload=("json", str(ENTRIES)), init=f"{ENTRIES}:remember", init_args={"a": 1}
    )
    template.wait_ready(WAIT_S)
    facts = []
    for _ in range(2):
        child = template.fork(timeout=WAIT_S)
        facts.append(read_frame(child.channel))
        child.close()
        child.wait_exit_blocking(WAIT_S)
    assert [f["loaded"] for f in facts] == [{"init": {"a": 1}, "template_pid": template.pid}] * 2


@pytest.mark.skipif(os.geteuid() != 0, reason="a pid namespace per child needs root here")
def test_a_child_can_be_pid_1_of_its_own_pid_namespace(make_template) -> None:
    template = make_template("report")
    child = template.fork(pid_namespace=True, timeout=WAIT_S)
    plain = template.fork(timeout=WAIT_S)
    try:
        inside, outside = read_frame(child.channel), read_frame(plain.channel)
        assert (inside["pid"], inside["pidns_error"], child.pid_namespace_error) == (1, None, None)
        assert child.pid != 1
        assert outside["pid"] == plain.pid  # the next child is back in the template's namespace
    finally:
        for c in (child, plain):
            c.close()
            c.wait_exit_blocking(WAIT_S)


def test_set_title_rewrites_cmdline_and_environ(make_template) -> None:
    template = make_template("titled", env={"PATH": "/usr/bin"}, title_room=256)
    child = template.fork(timeout=WAIT_S)
    try:
        told = read_frame(child.channel)
        assert told["fitted"] is True
        assert told["env"] == {"ROLE": "titled", "N": "1"}
        proc = psutil.Process(child.pid)
        assert [part for part in proc.cmdline() if part] == [
            "python",
            "worker.py",
            "--role",
            "titled",
        ]
        assert proc.environ() == {"ROLE": "titled", "N": "1"}
    finally:
        child.close()
        child.wait_exit_blocking(WAIT_S)


async def test_many_forks_at_once_each_get_their_own_child(make_template) -> None:
    template = make_template("exit_with")
    children = await asyncio.gather(*(template.fork_async(n) for n in range(12)))
    try:
        statuses = await asyncio.gather(*(c.wait_exit() for c in children))
        assert [s.code for s in statuses] == list(range(12))
        assert len({c.pid for c in children}) == 12
        stats = template.statistics()
        assert (stats.forks, stats.exits, stats.alive) == (12, 12, 0)
    finally:
        for c in children:
            c.close()


def test_a_dead_template_is_noticed_and_the_next_fork_restarts_it(make_template) -> None:
    template = make_template("report")
    child = template.fork(timeout=WAIT_S)
    first = template.pid
    os.kill(first, signal.SIGKILL)
    status = child.wait_exit_blocking(WAIT_S)
    assert status is not None
    assert status.lost
    child.close()
    with contextlib.suppress(psutil.NoSuchProcess):  # killed with its template, reaped by init
        psutil.Process(child.pid).wait(WAIT_S)
    again = template.fork(timeout=WAIT_S)  # a new template
    try:
        assert template.pid not in (None, first)
        assert read_frame(again.channel)["pid"] == again.pid
        assert template.statistics().starts == 2
    finally:
        again.close()
        again.wait_exit_blocking(WAIT_S)


def test_stop_kills_and_reaps_every_child(make_template) -> None:
    template = make_template("hang_with_grandchild")
    children = [template.fork(timeout=WAIT_S) for _ in range(3)]
    pids = [read_frame(c.channel) for c in children]
    template.stop()
    assert all(c.status is not None and c.status.signal == signal.SIGKILL for c in children)
    for c in children:
        c.close()
    gone = {p["child"] for p in pids} | {p["grandchild"] for p in pids}
    assert gone.isdisjoint(descendants())
    # not merely out of this tree: no orphan of theirs lives on anywhere (the template
    # reaped every one, grandchildren too, before it ended)
    assert [pid for pid in gone if Path(f"/proc/{pid}").exists()] == []
    assert not template.running
    template.stop()  # idempotent


def test_an_interpreter_that_exits_at_once_fails_the_fork(make_template) -> None:
    template = make_template("report", python="/bin/false")
    with pytest.raises(TemplateError, match=r"the template exited \(code 1\) before it was ready"):
        template.fork(timeout=WAIT_S)


def test_a_missing_interpreter_is_an_os_error(make_template) -> None:
    template = make_template("report", python="/nonexistent/python")
    with pytest.raises(OSError):
        template.fork(timeout=WAIT_S)


async def test_cancelling_a_fork_leaves_no_child(make_template) -> None:
    template = make_template("report")
    await asyncio.to_thread(template.wait_ready, WAIT_S)
    task = asyncio.ensure_future(template.fork_async())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    follower = await template.fork_async()  # the template still serves, in order
    try:
        assert read_frame(follower.channel)["pid"] == follower.pid
    finally:
        follower.close()
        await follower.wait_exit()


def test_the_template_runs_isolated_by_path_without_toolray(make_template) -> None:
    template = make_template("report", isolated=True, env={})
    child = template.fork(timeout=WAIT_S)
    try:
        assert read_frame(child.channel)["pid"] == child.pid
        cmdline = psutil.Process(template.pid).cmdline()
        assert cmdline[:5] == [sys.executable, "-I", "-S", "-B", "-X"]
        assert json.loads(cmdline[-1])["entry"].endswith("entries.py:report")
    finally:
        child.close()
        child.wait_exit_blocking(WAIT_S)


def test_a_template_is_not_forked_from_the_caller() -> None:
    template = Template(TemplateSpec(entry=f"{ENTRIES}:report"))
    try:
        template.wait_ready(WAIT_S)
        assert psutil.Process(template.pid).ppid() == os.getpid()
        assert "_zygote.py" in " ".join(psutil.Process(template.pid).cmdline())
    finally:
        template.stop()


def test_an_importable_entry_with_toolray_preloaded(make_template) -> None:
    # The per-call way: a module entry, the core and cloudpickle loaded once in the template.
    root = str(ENTRIES.parents[2])
    spec = TemplateSpec(
        entry="tests.procs.entries:report", sys_path=(root,), preload=("toolray", "cloudpickle")
    )
    template = Template(spec)
    try:
        child = template.fork({"n": 1}, timeout=WAIT_S)
        assert read_frame(child.channel)["args"] == {"n": 1}
        child.close()
        child.wait_exit_blocking(WAIT_S)
    finally:
        template.stop()


async def test_a_double_forked_daemon_is_killed_when_the_template_adopts_it(
    make_template,
) -> None:
    template = make_template("hang_with_daemon")
    child = await template.fork_async()
    try:
        pids = await asyncio.to_thread(read_frame, child.channel)
        daemon = psutil.Process(pids["daemon"])
        assert os.getsid(daemon.pid) != os.getsid(child.pid)  # it left the child's session
        deadline = asyncio.get_running_loop().time() + WAIT_S
        while daemon.ppid() != template.pid:  # its intermediate may not have left yet
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.001)
        # the template, a subreaper, took it in
        assert daemon.status() != "zombie"  # the control: it runs
        child.kill()  # its group goes; the daemon is in none of it
        await child.wait_exit()
        daemon.wait(WAIT_S)  # killed by the template that adopted it, and reaped
        with contextlib.suppress(psutil.NoSuchProcess):  # gone, or a zombie not reaped yet
            assert daemon.status() == "zombie"
        deadline = asyncio.get_running_loop().time() + WAIT_S
        while template.statistics().orphans < 1:  # its report follows the kill
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.01)
    finally:
        child.close()


async def test_an_adopted_copy_is_a_child_of_the_template_not_an_orphan(make_template) -> None:
    template = make_template("fork_a_copy")
    child = await template.fork_async()
    ours, theirs = socket.socketpair()
    copy = None
    try:
        pids = await asyncio.to_thread(read_frame, child.channel)
        copy = await template.adopt_async(pids["copy"], ours)
        assert copy.pid == pids["copy"]
        child.channel.sendall(b"\1")  # the copy's parent leaves: the template takes it in
        assert (await child.wait_exit()).code == 0
        process = psutil.Process(copy.pid)
        deadline = asyncio.get_running_loop().time() + WAIT_S
        while process.ppid() != template.pid:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.01)
        # another child's end makes the template look for orphans: the copy is not one
        other = await template.fork_async("exit")
        assert (await other.wait_exit()).code == 0
        other.close()
        assert process.status() != "zombie"
        assert template.statistics().orphans == 0
        assert template.statistics().alive == 1  # the copy, as a child
        copy.kill()  # through the template, like a forked child
        assert (await copy.wait_exit()).signal == signal.SIGKILL
    finally:
        if copy is not None:
            copy.close()  # its channel is ``ours``
        else:
            ours.close()
        theirs.close()
        child.close()


async def test_adopting_a_pid_twice_is_refused(make_template) -> None:
    template = make_template("report")
    child = await template.fork_async()
    try:
        ours, theirs = socket.socketpair()
        with pytest.raises(TemplateError, match="cannot adopt"):
            await template.adopt_async(child.pid, ours)  # refused: the channel is closed
        theirs.close()
    finally:
        child.close()


@pytest.mark.parametrize("keeper", [True, False])
def test_a_kill_of_the_hosts_children_leaves_a_kept_template_to_end_what_is_below_it(
    keeper: bool,
) -> None:
    """Ray ends an actor whose owner died with SIGKILLs to it and its direct children.

    A kept template is not such a child: it sees its host's socket close and ends its child
    and what the child started in a session of its own. Without a keeper (the control) the
    template dies at once, its child by its parent-death signal, and the session child
    outlives them all.
    """
    import subprocess

    script = str(Path(__file__).with_name("_kept_host.py"))
    host = subprocess.Popen(
        [sys.executable, script, str(ENTRIES), "1" if keeper else "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    pids: dict[str, int] = {}
    try:
        assert host.stdout is not None
        pids = json.loads(host.stdout.readline())
        session = psutil.Process(pids["session"])
        assert session.ppid() == pids["child"]  # below a running child, in its own session
        direct = psutil.Process(host.pid).children()
        assert (pids["template"] in {p.pid for p in direct}) is not keeper
        above = psutil.Process(pids["template"]).parents()  # its keeper, then the host
        assert [p.pid for p in above[: 2 if keeper else 1]] == [
            *([direct[0].pid] if keeper else []),
            host.pid,
        ]
        for process in direct:  # what Ray does to an actor's children as it ends it
            process.kill()
        host.kill()
        host.wait(WAIT_S)
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pids["child"]).wait(WAIT_S)  # by the template, or its own death
        if keeper:
            session.wait(WAIT_S)  # ended by the template, which then ends too
            with contextlib.suppress(psutil.NoSuchProcess):  # gone, or a zombie not reaped yet
                assert session.status() == "zombie"
        else:
            assert session.is_running()
            assert session.status() != psutil.STATUS_ZOMBIE
            assert session.ppid() != pids["child"]  # an orphan nobody will end
    finally:
        host.kill()
        host.wait()
        if host.stdout is not None:
            host.stdout.close()
        for name in ("session", "child", "template"):
            with contextlib.suppress(psutil.Error, KeyError):
                psutil.Process(pids[name]).kill()
