"""``toolray serve``: refusals in one line, then a real server (its own embedded Ray) that a
real MCP client uses with a token, stopped by Ctrl-C with nothing left running."""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.adapters._http import free_port, open_session, texts

ROOT = Path(__file__).resolve().parents[2]
TOOLRAY = [sys.executable, "-c", "from toolray_actors.cli import main; raise SystemExit(main())"]


def _tokens(tmp_path: Path, mode: int = 0o600) -> Path:
    path = tmp_path / "tokens"
    path.write_text("tok-a a\ntok-b b\n")
    path.chmod(mode)
    return path


def _refusal(*args: str) -> str:
    done = subprocess.run([*TOOLRAY, "serve", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_refusals_are_one_line_before_ray_starts(tmp_path: Path) -> None:
    assert "--tokens FILE is required" in _refusal()
    no_auth = _refusal("--insecure-no-auth", "--host", "0.0.0.0")
    assert "loopback" in no_auth
    assert "chmod 600" in _refusal("--tokens", str(_tokens(tmp_path, 0o644)))


def _lines(process: subprocess.Popen[str]) -> tuple[queue.Queue[str], threading.Thread]:
    found: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            found.put(line)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return found, thread


def _wait_for(lines: queue.Queue[str], text: str, timeout_s: float) -> list[str]:
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            continue
        seen.append(line)
        if text in line:
            return seen
    raise AssertionError(f"no {text!r} in {timeout_s} s: {''.join(seen)[-2000:]}")


@pytest.mark.ray
@pytest.mark.own_ray
@pytest.mark.timeout(300)
def test_serve_answers_a_token_and_ctrl_c_stops_everything(tmp_path: Path) -> None:
    port = free_port()
    command = [
        *TOOLRAY,
        "serve",
        "--config",
        "configs/ci.toml",
        "--tokens",
        str(_tokens(tmp_path)),
        "--tools",
        "tests.actors._mcp_tools:register",
        "--scope-per-session",
        "--port",
        str(port),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines, pump = _lines(process)
    try:
        banner = "".join(_wait_for(lines, "Ctrl-C stops", 180))
        assert f"at http://127.0.0.1:{port}/mcp" in banner
        started = psutil.Process(process.pid).children(recursive=True)
        assert started  # its own Ray

        async def use() -> tuple[set[str], list[str]]:
            async with open_session(f"http://127.0.0.1:{port}/mcp", "tok-a") as session:
                names = {tool.name for tool in (await session.list_tools()).tools}
                return names, texts(await session.call_tool("whoami", {}))

        names, where = asyncio.run(use())
        assert {"add", "a_only", "bump"} <= names
        assert where[0].startswith("a/mcp-")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=120) == 0
        _wait_for(lines, "toolray serve: stopped", 5)
        gone = psutil.wait_procs(started, timeout=60)[1]
        assert [p for p in gone if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
        pump.join(timeout=30)
        assert process.stdout is not None
        process.stdout.close()
