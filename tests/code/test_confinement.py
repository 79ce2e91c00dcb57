"""``confinement()``, the modes, the test switch, and what the host sees of a confined child."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

import psutil
import pytest

import toolray
from tests.code._helpers import child_pids, run, warm_pids
from toolray.code import Confinement, PythonRuntime
from toolray.code._cgroup import ChildCgroup, delegated
from toolray.code._confinement import REFUSE_VARIABLE
from toolray.errors import SandboxUnavailableError, ToolrayError

LANDLOCK_ABI = 7  # this machine's kernel (Linux 6.18)


def test_auto_activates_every_layer_here_but_the_cgroup() -> None:
    runtime = PythonRuntime()
    try:
        report = runtime.confinement()
    finally:
        runtime.close()
    assert isinstance(report, Confinement)
    assert dataclasses.astuple(report)[:9] == (
        "auto",
        True,
        True,
        True,
        True,
        True,
        LANDLOCK_ABI,
        True,
        False,
    )
    (cgroup,) = report.missing
    assert cgroup.startswith("cgroup: this host has a cgroup v1 (hybrid) hierarchy")
    assert report.describe() == (
        "confinement auto: user, pid, net, mount, ipc namespaces, Landlock ABI 7, seccomp,"
        " no cgroup"
    )


def test_confinement_is_a_frozen_value() -> None:
    runtime = PythonRuntime(confinement="off")
    try:
        report = runtime.confinement()
        with pytest.raises(dataclasses.FrozenInstanceError):
            report.seccomp = False  # type: ignore[misc]
        assert runtime.confinement() is report  # probed once
    finally:
        runtime.close()


def test_off_is_the_syscall_filter_and_the_limits_only() -> None:
    runtime = PythonRuntime(confinement="off")
    try:
        report = runtime.confinement()
    finally:
        runtime.close()
    assert report == Confinement(
        mode="off",
        user_namespace=False,
        pid_namespace=False,
        network_namespace=False,
        mount_namespace=False,
        ipc_namespace=False,
        landlock_abi=0,
        seccomp=True,
        cgroup=False,
        missing=(),
    )


def test_strict_starts_where_every_layer_is_available() -> None:
    runtime = PythonRuntime(confinement="strict")
    try:
        assert runtime.confinement().landlock_abi == LANDLOCK_ABI
        out = asyncio.run(run(runtime, "6 * 7"))
        assert out.result == 42
    finally:
        runtime.close()


@pytest.mark.parametrize(
    ("refused", "named"),
    [
        ("landlock", ["landlock"]),
        ("user_namespace", ["user_namespace"]),
        ("network_namespace,ipc_namespace", ["network_namespace", "ipc_namespace"]),
    ],
)
def test_strict_refuses_to_start_naming_each_missing_layer(
    monkeypatch: pytest.MonkeyPatch, refused: str, named: list[str]
) -> None:
    monkeypatch.setenv(REFUSE_VARIABLE, refused)
    before = child_pids()
    with pytest.raises(SandboxUnavailableError) as caught:
        PythonRuntime(confinement="strict")
    err = caught.value
    assert isinstance(err, ToolrayError)
    assert [entry.split(":")[0] for entry in err.missing] == named
    for layer in named:
        assert f"{layer}: refused by {REFUSE_VARIABLE}" in str(err)
    assert child_pids() - before == set()  # the probe's child is gone


def test_auto_reports_a_refused_layer_and_keeps_the_others(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(REFUSE_VARIABLE, "landlock")
    secret = tmp_path / "secret"
    secret.write_text("mine")
    runtime = PythonRuntime()
    try:
        report = runtime.confinement()
        assert (report.landlock_abi, report.mount_namespace) == (0, True)
        assert report.missing[0] == f"landlock: refused by {REFUSE_VARIABLE}"
        # without Landlock the mount namespace still hides the host's files
        program = f"import random\nrandom._os.path.exists({str(secret)!r})"
        assert asyncio.run(run(runtime, program)).result is False
    finally:
        runtime.close()


def test_an_unknown_layer_in_the_switch_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REFUSE_VARIABLE, "landlock,firewall")
    with pytest.raises(ValueError, match="unknown layers: firewall"):
        PythonRuntime()


async def test_the_host_sees_a_child_without_capabilities_filtered_and_not_dumpable() -> None:
    runtime = PythonRuntime()
    seen: dict[str, str] = {}
    try:
        (pid,) = await warm_pids(runtime)

        async def status(args):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                key, _, value = line.partition(":")
                seen[key] = value.strip()
            return None

        out = await run(runtime, "import random\nawait tools.status()\nrandom._os.getuid()",
                        {"status": status})  # fmt: skip
    finally:
        runtime.close()
    assert out.result == 65534  # its uid inside its user namespace
    for caps in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(seen[caps], 16) == 0, caps
    assert (seen["NoNewPrivs"], seen["Seccomp"]) == ("1", "2")
    assert seen["NSpid"].split()[-1] == "1"  # pid 1 of its own pid namespace
    outside = 65534 if os.geteuid() == 0 else os.geteuid()  # a root host: nobody, outside too
    assert int(seen["Uid"].split()[0]) == outside


def test_confinement_reuses_its_probe_child_as_the_warm_one() -> None:
    before = child_pids()
    runtime = PythonRuntime()
    try:
        runtime.confinement()
        assert runtime.statistics().spawned == 1
        probed = child_pids() - before
        assert len(probed) == 1
        assert asyncio.run(run(runtime, "1")).result == 1
        assert probed.isdisjoint(child_pids())  # the run used (and discarded) the probe's child
        assert runtime.statistics().spawned == 2  # and one more was forked for the next run
    finally:
        runtime.close()


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"confinement": "on"}, ValueError),
        ({"scratch_mb": 0}, ValueError),
        ({"warm_ttl_s": 0}, ValueError),
        ({"warm_ttl_s": None}, TypeError),
        ({"max_outstanding_calls": 0}, ValueError),
        ({"max_run_bytes": 10}, ValueError),
        ({"read_paths": "/tmp"}, TypeError),
        ({"read_paths": ["relative/path"]}, ValueError),
        ({"read_paths": ["/nonexistent/toolray"]}, ValueError),
    ],
)
def test_bad_new_settings_are_rejected(kwargs: dict, error: type[Exception]) -> None:
    with pytest.raises(error):
        PythonRuntime(**kwargs)


def test_the_defaults_are_finite() -> None:
    runtime = PythonRuntime(warm=0)
    assert repr(runtime) == (
        "PythonRuntime(timeout_s=30.0, memory_mb=512, cpu_s=10.0, confinement='auto')"
    )
    explicit = PythonRuntime(timeout_s=None, cpu_s=None, warm=0)
    assert "timeout_s=None" in repr(explicit)


def _mountinfo(tmp_path: Path, fstype: str, point: str = "/sys/fs/cgroup") -> str:
    path = tmp_path / "mountinfo"
    path.write_text(f"30 25 0:26 / {point} rw,nosuid - {fstype} cgroup rw\n")
    return str(path)


def test_a_cgroup_is_used_only_where_one_is_delegated(tmp_path: Path) -> None:
    hybrid = _mountinfo(tmp_path, "tmpfs")
    assert delegated({}, hybrid)[0] is None
    assert "cgroup v1 (hybrid)" in delegated({}, hybrid)[1]
    unified = _mountinfo(tmp_path, "cgroup2")
    assert delegated({}, unified) == (
        None,
        "no cgroup v2 directory is delegated (TOOLRAY_CODE_CGROUP is unset)",
    )
    base = tmp_path / "delegated"
    base.mkdir()
    (base / "cgroup.subtree_control").write_text("cpu memory pids\n")
    assert delegated(
        {"TOOLRAY_CODE_CGROUP": str(base)}, _mountinfo(tmp_path, "cgroup2", str(base))
    ) == (
        str(base),
        "",
    )
    (base / "cgroup.subtree_control").write_text("cpu\n")
    assert (
        "does not enable memory and pids"
        in delegated(
            {"TOOLRAY_CODE_CGROUP": str(base)}, _mountinfo(tmp_path, "cgroup2", str(base))
        )[1]
    )


def test_a_childs_cgroup_gets_its_limits_and_its_pid(tmp_path: Path) -> None:
    # A stand-in directory (this host delegates no cgroup): the files a real one would get.
    group = ChildCgroup(str(tmp_path), 4242, 512 * 2**20)
    assert group.path == tmp_path / "toolray-code-4242"
    files = {p.name: p.read_text() for p in group.path.iterdir()}
    assert files == {
        "memory.max": str(512 * 2**20),
        "memory.swap.max": "0",
        "pids.max": "16",
        "cgroup.procs": "4242",
    }
    assert os.path.isdir(group.path)


def test_an_unprivileged_host_gets_every_layer_but_the_pid_namespace(tmp_path: Path) -> None:
    # The template runs as uid 65534, as it would where toolray is not root: the child's
    # user namespace comes first and owns the others; no pid namespace can be made.
    # The checkout may sit below a directory only root can enter (a clone in `mktemp -d`):
    # uid 65534 runs a readable copy of the package, its paths rewritten in the arguments.
    source = str(Path(toolray.__file__).parent.parent)
    readable = tempfile.mkdtemp(prefix="toolray-nobody-")
    os.chmod(readable, 0o755)
    shutil.copytree(
        Path(source) / "toolray",
        Path(readable) / "toolray",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    python = tmp_path / "python-as-nobody"
    python.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do\n'
        f'  set -- "$@" "$(printf %s "$a" | sed "s#{source}/#{readable}/#g")"; shift\n'
        "done\n"
        "exec setpriv --reuid=65534 --regid=65534 --clear-groups"
        f' {psutil.Process().exe()} "$@"\n'
    )
    python.chmod(0o755)
    secret = tmp_path / "secret"
    secret.write_text("host")
    secret.chmod(0o644)
    runtime = PythonRuntime(python=str(python))
    try:
        report = runtime.confinement()
        program = (
            "import random\nos = random._os\n"
            "def read():\n"
            "    try:\n"
            f"        return os.read(os.open({str(secret)!r}, os.O_RDONLY), 10)\n"
            "    except OSError as err:\n"
            "        return type(err).__name__\n"
            "[os.getuid(), os.path.exists('/proc/1'), read()]"
        )
        out = asyncio.run(run(runtime, program))
    finally:
        runtime.close()
        shutil.rmtree(readable)
    flags = (report.user_namespace, report.network_namespace, report.mount_namespace)
    assert (*flags, report.ipc_namespace, report.seccomp) == (True,) * 5
    assert (report.pid_namespace, report.landlock_abi) == (False, LANDLOCK_ABI)
    assert report.missing[0].startswith("pid_namespace: unshare(CLONE_NEWPID): [Errno 1]")
    uid, proc, read = out.result  # type: ignore[misc]
    assert (uid, proc) == (65534, False)  # no /proc of the host's pid namespace in its root
    assert read in ("FileNotFoundError", "PermissionError")
