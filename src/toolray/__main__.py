"""``python -m toolray``: runs the ``toolray`` console script.

The command line lives in the Ray layer (``toolray_actors.cli:main``, the console script).
The core never imports the Ray layer, not even here: this shim replaces the process with the
console script installed next to this Python, so both spellings are one program.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

SCRIPT = "toolray"


def _script() -> str | None:
    """The console script of this environment (next to the interpreter), else on PATH."""
    beside = Path(sys.executable).with_name(SCRIPT)
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(SCRIPT)


def main() -> int:
    """Replace this process with the ``toolray`` console script, or explain why it cannot."""
    script = _script()
    if script is None:
        print(
            f"toolray: the {SCRIPT!r} console script is not installed in this environment; "
            'install toolray with: pip install "toolray[ray]"',
            file=sys.stderr,
        )
        return 2
    os.execv(script, [script, *sys.argv[1:]])  # does not return
    return 2  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
