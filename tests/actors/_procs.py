"""Subprocess helpers for the multi-driver suite: a cluster host and line-driven drivers."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def child_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    env.update(extra)
    return env


def run_scenario(module: str, timeout: float = 280) -> Any:
    """Run ``python -m module`` (its own Ray, never an outer one); its last ``RESULT {json}``.

    Fails the test with the child's output when it exits non-zero or prints no result.
    """
    proc = subprocess.run(
        [sys.executable, "-m", module],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT ") :])


class Child:
    """A child process whose stdout lines are read by a thread (no blocking reads)."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", *args],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def expect(self, prefix: str, timeout: float) -> str:
        """The next line starting with ``prefix`` (other lines are kept in ``output``)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {prefix!r} line in {timeout}s:\n{self.tail()}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise EOFError(f"the child exited before {prefix!r}:\n{self.tail()}")
            if line.startswith(prefix):
                return line[len(prefix) :].strip()

    def tail(self) -> str:
        return "".join(self.output[-40:])

    def close(self, timeout: float = 60) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class DriverProc(Child):
    """``tests.actors._driver``: send a command, get its JSON answer."""

    def __init__(self, address: str, namespace: str, env: dict[str, str]) -> None:
        super().__init__(["tests.actors._driver", address, namespace], env)

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def answer(self, timeout: float = 120) -> dict[str, Any]:
        return dict(json.loads(self.expect("ANSWER ", timeout)))

    def ask(self, command: str, timeout: float = 120) -> dict[str, Any]:
        self.send(command)
        return self.answer(timeout)

    def ok(self, command: str, timeout: float = 120) -> dict[str, Any]:
        out = self.ask(command, timeout)
        assert out["ok"], (command, out)
        return out
