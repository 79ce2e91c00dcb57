"""Fixtures of the red team: a runtime with default settings, canaries, a SIGUSR1 counter."""

from __future__ import annotations

import secrets
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.code._helpers import child_pids
from toolray.code import PythonRuntime


@pytest.fixture(scope="module")
def runtime() -> Iterator[PythonRuntime]:
    """The default runtime (``confinement="auto"``), one per module (the attacks share it,
    as a model's programs do); every child it made is gone after."""
    before = child_pids()
    rt = PythonRuntime()
    yield rt
    rt.close()
    assert child_pids() - before == set()


@dataclass(frozen=True)
class Canary:
    """A secret file in a temp dir: the program must neither read nor change it."""

    directory: Path
    path: Path
    token: str

    def intact(self) -> bool:
        return self.path.read_text() == self.token and sorted(self.directory.iterdir()) == [
            self.path
        ]


@pytest.fixture
def canary(tmp_path: Path) -> Canary:
    token = "canary-" + secrets.token_hex(16)
    path = tmp_path / "secret.txt"
    path.write_text(token)
    path.chmod(0o644)  # readable by anyone on this host: only the sandbox stands in the way
    return Canary(tmp_path, path, token)


class SignalCounter:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, signum: int, frame: object) -> None:
        self.count += 1


@pytest.fixture
def sigusr1() -> Iterator[SignalCounter]:
    """This process counts the SIGUSR1s it receives (none may come from a program)."""
    counter = SignalCounter()
    previous = signal.signal(signal.SIGUSR1, counter)
    yield counter
    signal.signal(signal.SIGUSR1, previous)
