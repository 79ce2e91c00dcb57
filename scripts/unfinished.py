"""Explain a pytest session that ended without finishing: its last test and Ray's logs.

``scripts/test`` runs this when the trail ``tests/conftest.py`` writes does not end with
``finished``: the pytest process was ended from outside, or ended itself without pytest's
say (Ray's driver exits at once, with status 1 and no message of its own, when its raylet
dies or its GCS stays unreachable). Printed: the test that was running, then the ends of the
session Ray's raylet, GCS and this driver's core-worker logs, where the reason is.

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


def explain(trail: Path, status: str) -> str:
    """What to print for an unfinished session whose trail is ``trail``."""
    entries = dict.fromkeys(("pid", "ray", "test"), "")
    for line in trail.read_text().splitlines():
        key, _, value = line.partition(" ")
        entries[key] = value
    out = [
        f"scripts/test: pytest ended (status {status}) without finishing its session",
        f"  the test that was running: {entries['test'] or '(none had started)'}",
    ]
    logs = Path(entries["ray"]) / "logs" if entries["ray"] else None
    if logs is None or not logs.is_dir():
        out.append("  (the session's Ray had not started: no Ray logs to show)")
        return "\n".join(out)
    drivers = sorted(logs.glob(f"python-core-driver-*_{entries['pid']}.log"))
    for path in [logs / "raylet.out", logs / "gcs_server.out", *drivers]:
        out.append(f"--- the last lines of {path}")
        out.extend(_tail(path))
    return "\n".join(out)


def main(argv: list[str]) -> int:
    """Print the explanation for ``TRAIL STATUS`` to standard error; 2 on a usage error."""
    if len(argv) != 2:
        print("usage: unfinished.py TRAIL STATUS", file=sys.stderr)
        return 2
    print(explain(Path(argv[0]), argv[1]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
