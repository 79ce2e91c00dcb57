"""Run every benchmark in this folder, one after another, and print their tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = ["bench_validator.py", "bench_registry.py", "bench_pipeline.py", "bench_batch.py"]


def main() -> int:
    extra = ["--quick"] if "--quick" in sys.argv else []
    failures = 0
    for script in [*SCRIPTS, "bench_ray.py"]:
        args = extra if script == "bench_ray.py" else []
        print(f"\n===== {script} {' '.join(args)}".rstrip(), flush=True)
        failures += subprocess.call([sys.executable, str(HERE / script), *args]) != 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
