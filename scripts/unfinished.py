"""Explain a pytest session whose process died under a test: that test and Ray's logs.

``tests/conftest.py`` writes a trail (``TOOLRAY_TEST_TRAIL``): ``ray <pid> <dir>`` when the
session's Ray starts (its driver's pid and Ray's session directory), ``test <nodeid>`` as
each test starts, ``crashed <nodeid>`` when a test's worker process died under it (xdist
says so and carries on), ``finished`` at the end. ``scripts/test`` runs this when the trail
has a crash or does not end with ``finished`` (the pytest process itself ended without
pytest's say). Ray's driver exits at once, with status 1 and no message of its own, when
its raylet dies or its GCS stays unreachable: the reason is in Ray's logs, whose ends are
printed here — the raylet's, the GCS's and that driver's core worker's.

Usage: ``python scripts/unfinished.py TRAIL STATUS``. Standard library only.
"""

from __future__ import annotations

import sys
from pathlib import Path

LINES = 25
"""How many last lines of each log to print."""
MOST = 3
"""Crashes explained at most (the first ones: a dead Ray explains what follows it)."""


def _tail(path: Path, lines: int = LINES) -> list[str]:
    try:
        text = path.read_text(errors="replace")
    except OSError as err:
        return [f"(cannot read: {err})"]
    return text.splitlines()[-lines:]


def _logs(ray: tuple[str, str] | None) -> list[str]:
    """The ends of the logs of the Ray ``(driver pid, session directory)``."""
    logs = Path(ray[1]) / "logs" if ray is not None and ray[1] else None
    if ray is None or logs is None or not logs.is_dir():
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
    crashes: list[tuple[str, tuple[str, str] | None]] = []
    finished = False
    for line in trail.read_text().splitlines():
        key, _, value = line.partition(" ")
        finished = key == "finished"
        if key == "ray":
            pid, _, directory = value.partition(" ")
            ray = (pid, directory)
        elif key == "test":
            last_test = value
        elif key == "crashed":
            crashes.append((value, ray))
    out = []
    for nodeid, at in crashes[:MOST]:
        out.append(f"scripts/test: the process running {nodeid} died under it")
        out.extend(_logs(at))
    if not finished:
        out.append(f"scripts/test: pytest ended (status {status}) without finishing its session")
        out.append(f"  the last test started: {last_test or '(none had started)'}")
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
