"""Explain a pytest session whose process died under a test: that test and Ray's logs.

``tests/conftest.py`` writes a trail (``TOOLRAY_TEST_TRAIL``): ``ray <pid> <dir>`` when the
session's Ray starts (its driver's pid and Ray's session directory), ``test <nodeid>`` as
each test starts, ``finished`` at the end. ``scripts/test`` runs this after each pytest
process; it prints nothing when the trail ends with ``finished``. Otherwise the process
ended without pytest's say: Ray's driver exits at once, with status 1 and no message of its
own, when its raylet dies or its GCS stays unreachable. The reason is in Ray's logs, whose
ends are printed here — the raylet's, the GCS's and that driver's core worker's.

Usage: ``python scripts/unfinished.py TRAIL STATUS``. Standard library only.
"""

from __future__ import annotations

import sys
from pathlib import Path

LINES = 25
"""How many last lines of each log to print."""


def _tail(path: Path, lines: int = LINES) -> list[str]:
    try:
        text = path.read_text(errors="replace")
    except OSError as err:
        return [f"(cannot read: {err})"]
    return text.splitlines()[-lines:]


def _logs(ray: tuple[str, str] | None) -> list[str]:
    """The ends of the logs of the Ray ``(driver pid, session directory)``."""
    logs = Path(ray[1]) / "logs" if ray is not None and ray[1] else None
    if logs is None or not logs.is_dir():
        return ["  (the session's Ray had not started: no Ray logs to show)"]
    out = []
    drivers = sorted(logs.glob(f"python-core-driver-*_{ray[0]}.log"))
    for path in [logs / "raylet.out", logs / "gcs_server.out", *drivers]:
        out.append(f"--- the last lines of {path}")
        out.extend(_tail(path))
    return out


def explain(trail: Path, status: str) -> str:
    """What to print for the session whose trail is ``trail`` (``""``: nothing to explain)."""
    ray: tuple[str, str] | None = None
    last_test = ""
    finished = False
    for line in trail.read_text().splitlines():
        key, _, value = line.partition(" ")
        finished = key == "finished"
        if key == "ray":
            pid, _, directory = value.partition(" ")
            ray = (pid, directory)
        elif key == "test":
            last_test = value
    if finished:
        return ""
    out = [
        f"scripts/test: pytest ended (status {status}) without finishing its session",
        f"  the last test started: {last_test or '(none had started)'}",
    ]
    out.extend(_logs(ray))
    return "\n".join(out)


def main(argv: list[str]) -> int:
    """Print the explanation for ``TRAIL STATUS`` to standard error; 2 on a usage error."""
    if len(argv) != 2:
        print("usage: unfinished.py TRAIL STATUS", file=sys.stderr)
        return 2
    said = explain(Path(argv[0]), argv[1])
    if said:
        print(said, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
