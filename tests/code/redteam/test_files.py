"""Host files: every route a program has found to read or write one fails inside the program.

Each route reaches a real file API (the child holds them all); what stops it is the child's
mount namespace (the canary's directory is not in its root) and Landlock (reads beneath the
standard library and the read paths only, writes beneath the scratch directory only).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sysconfig
from pathlib import Path

import pytest

from tests.code.redteam._kit import attack, blocked, still_serves
from toolray.code import PythonRuntime

READS = {
    "os.open through random._os": "steal = lambda: os.read(os.open(PATH, os.O_RDONLY), 4096)",
    "__import__ with foreign globals": (
        "steal = lambda: __import__('pathlib', {}).Path(PATH).read_text()"
    ),
    "a __subclasses__ walk to FileIO": (
        "def steal():\n"
        "    found, todo = [], [object]\n"
        "    while todo:\n"
        "        cls = todo.pop()\n"
        "        found.append(cls)\n"
        "        todo.extend(type.__subclasses__(cls))\n"
        "    return [c for c in found if c.__name__ == 'FileIO'][0](PATH).read()"
    ),
    "len.__self__.open (the builtins module)": "steal = lambda: len.__self__.open(PATH).read()",
    "a module loader's get_data": "steal = lambda: __import__('json').__loader__.get_data(PATH)",
    "gc.get_objects to the io module": (
        "def steal():\n"
        "    gc = sys.modules['gc']\n"
        "    gc.unfreeze()\n"
        "    io = [o for o in gc.get_objects() if type(o) is type(os) and o.__name__ == 'io'][0]\n"
        "    return io.open(PATH).read()"
    ),
    "frame walking to the child's globals": (
        "def steal():\n"
        "    try:\n"
        "        1 / 0\n"
        "    except ZeroDivisionError as err:\n"
        "        frame = err.__traceback__.tb_frame\n"
        "    while frame.f_globals.get('__name__') == '__main__':\n"
        "        frame = frame.f_back\n"
        "    real_os = frame.f_globals['os']\n"
        "    return real_os.read(real_os.open(PATH, real_os.O_RDONLY), 4096)"
    ),
    "linecache through traceback": (
        "steal = lambda: sys.modules['linecache'].getlines(PATH) or 1 / 0"
    ),
    "_io.FileIO from sys.modules": "steal = lambda: sys.modules['_io'].FileIO(PATH).read()",
    "os.scandir of its directory": "steal = lambda: [e.name for e in os.scandir(DIRECTORY)]",
}


@pytest.mark.parametrize("route", READS.values(), ids=READS.keys())
async def test_a_host_file_cannot_be_read(runtime: PythonRuntime, canary, route: str) -> None:
    names = f"PATH = {str(canary.path)!r}\nDIRECTORY = {str(canary.directory)!r}\n"
    outcome = await attack(runtime, names + route + "\nattempt(steal)")
    blocked(outcome)
    assert canary.token not in repr(outcome)
    assert canary.intact()
    await still_serves(runtime)


WRITES = {
    "a new file beside the canary": "os.open({directory!r} + '/planted', os.O_WRONLY | os.O_CREAT)",
    "the canary itself": "os.open({path!r}, os.O_WRONLY | os.O_TRUNC)",
    "a rename over the canary": "os.rename('mine', {path!r})",
    "the canary removed": "os.unlink({path!r})",
}


@pytest.mark.parametrize("route", WRITES.values(), ids=WRITES.keys())
async def test_a_host_file_cannot_be_written(runtime: PythonRuntime, canary, route: str) -> None:
    setup = "open_ = len.__self__.open\nopen_('mine', 'w').write('x')\n"
    action = route.format(path=str(canary.path), directory=str(canary.directory))
    blocked(await attack(runtime, setup + f"attempt(lambda: {action})"))
    assert canary.intact()
    await still_serves(runtime)


async def test_no_pth_file_can_be_planted_in_site_packages(runtime: PythonRuntime) -> None:
    # A .pth file in site-packages would run its code, unconfined, in the next interpreter.
    target = Path(sysconfig.get_paths()["purelib"], f"toolray-redteam-{secrets.token_hex(8)}.pth")
    flags = "os.O_WRONLY | os.O_CREAT | os.O_EXCL"
    program = f"attempt(lambda: os.write(os.open({str(target)!r}, {flags}), b'import os'))"
    try:
        blocked(await attack(runtime, program))
        assert not target.exists()
    finally:
        if target.exists():
            target.unlink()


async def test_the_runtimes_own_files_cannot_be_changed(runtime: PythonRuntime) -> None:
    import toolray.code

    guard = Path(toolray.code.__file__).with_name("_child_guard.py")
    before = hashlib.sha256(guard.read_bytes()).hexdigest(), guard.stat().st_mtime_ns
    # Opening for writing is the whole attack: nothing is written if it were to succeed.
    program = f"attempt(lambda: os.open({str(guard)!r}, os.O_WRONLY | os.O_APPEND))"
    blocked(await attack(runtime, program))
    assert (hashlib.sha256(guard.read_bytes()).hexdigest(), guard.stat().st_mtime_ns) == before
    await still_serves(runtime)


async def test_read_paths_are_readable_and_still_read_only(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "data.txt").write_text("for the program")
    runtime = PythonRuntime(read_paths=[shared])
    try:
        path = str(shared / "data.txt")
        out = await attack(
            runtime,
            f"[open_ := len.__self__.open, open_({path!r}).read(),"
            f" attempt(lambda: open_({path!r}, 'a'))][1:]",
        )
        assert out.result[0] == "for the program"  # type: ignore[union-attr]
        assert out.result[1].startswith("blocked: ")  # type: ignore[union-attr]
        assert (shared / "data.txt").read_text() == "for the program"
    finally:
        runtime.close()


async def test_the_scratch_directory_is_the_only_writable_place(runtime: PythonRuntime) -> None:
    program = (
        "open_ = len.__self__.open\n"
        "open_('notes.txt', 'w').write('mine')\n"
        "[os.getcwd() == os.environ['HOME'], open_('notes.txt').read(),"
        " attempt(lambda: open_('/tmp/elsewhere', 'w')), attempt(lambda: os.mkdir('/x'))]"
    )
    out = await attack(runtime, program)
    ok, text, elsewhere, root = out.result  # type: ignore[union-attr,misc]
    assert (ok, text) == (True, "mine")
    assert elsewhere.startswith("blocked: ")
    assert root.startswith("blocked: ")
    assert not os.path.exists("/tmp/elsewhere")


async def test_without_confinement_the_same_routes_do_read_the_canary(canary) -> None:
    """The routes above are real: with ``confinement="off"`` each one reads the canary."""
    runtime = PythonRuntime(confinement="off")
    try:
        names = f"PATH = {str(canary.path)!r}\nDIRECTORY = {str(canary.directory)!r}\n"
        for name, route in READS.items():
            out = await attack(runtime, names + route + "\nattempt(steal)")
            report = getattr(out, "result", out)
            assert isinstance(report, str), (name, report)
            assert report.startswith("LEAK: "), (name, report)
            assert canary.token in report or "secret.txt" in report, name
    finally:
        runtime.close()
