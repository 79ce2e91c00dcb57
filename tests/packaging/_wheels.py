"""The wheel and the fresh venvs the packaging tests install it into, made in the background.

Building the wheel and installing it into two fresh venvs (one with the ``ray`` extra: tens
of seconds of pip) needs no Ray and nothing of the other tests. ``tests/packaging/conftest.py``
starts it as soon as collection shows a wheel test is selected, so it overlaps the Ray tests
(which leave a core idle much of the time) instead of adding its whole time at the end; the
tests wait for what it made and check it. One thread, one step after another: it never takes
both cores from the tests it overlaps.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

__all__ = ("ROOT", "made", "run", "start", "stop")


def run(argv: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """``argv`` as a stranger runs it: no repository on the path, no Ray address, no config."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS")}
    env.pop("TOOLRAY_CONFIG", None)
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    # installed without compiling (most of Ray is never imported): the modules a process
    # imports are compiled once and kept, as on a user's machine, not again in every process
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _wheel(out: Path) -> Path:
    proc = run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(out)],
        out,
        300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (built,) = out.glob("toolray-*.whl")
    return built


def _venv(where: Path, requirement: str) -> Path:
    assert not where.resolve().is_relative_to(ROOT)  # outside the repository
    proc = run([sys.executable, "-m", "venv", str(where)], where.parent, 120)
    assert proc.returncode == 0, proc.stderr
    pip = [str(where / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile"]
    proc = run([*pip, requirement], where.parent, 900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return where / "bin"


_made: dict[str, Future[Path]] = {}
_dirs: list[Path] = []
_pool = ThreadPoolExecutor(1, thread_name_prefix="wheels")


def start() -> None:
    """Begin (once): the wheel, then a venv with ``wheel[ray]``, then one with the wheel alone."""
    if _made:
        return
    top = Path(tempfile.mkdtemp(prefix="toolray-wheels-"))
    _dirs.append(top)
    wheel = _pool.submit(_wheel, top)
    _made["wheel"] = wheel
    _made["ray"] = _pool.submit(lambda: _venv(top / "venv-ray", f"{wheel.result()}[ray]"))
    _made["core"] = _pool.submit(lambda: _venv(top / "venv-core", str(wheel.result())))


def made(kind: str) -> Path:
    """The wheel (``"wheel"``) or the ``bin`` of a venv (``"ray"``, ``"core"``), once made."""
    start()
    return _made[kind].result(timeout=1200)


def stop() -> None:
    """Wait for what is under way, then remove everything made."""
    _pool.shutdown(wait=True, cancel_futures=True)
    for top in _dirs:
        shutil.rmtree(top, ignore_errors=True)
