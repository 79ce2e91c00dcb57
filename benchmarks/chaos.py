"""The chaos campaign: ``toolray chaos`` (see ``toolray_actors/cli/_chaos.py``).

Usage: ``python benchmarks/chaos.py --seconds 300 --nodes 2`` (the campaign),
``--seconds 600 --kinds ""`` (the soak), ``--seconds 15 --drivers 2 --agents 2`` (CI).
"""

from __future__ import annotations

import sys

from toolray_actors.cli import main

if __name__ == "__main__":
    sys.exit(main(["chaos", *sys.argv[1:]]))
