"""Freed heap goes back to the system in toolray's actors (``toolray_actors._heap``)."""

from __future__ import annotations

import subprocess
import sys
import threading

from tests.actors._procs import ROOT, child_env


def _printed(program: str) -> str:
    """What ``program`` prints, run in a Python process of its own."""
    argv = [sys.executable, "-c", program]
    run = subprocess.run(
        argv, cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout.strip()


_PROGRAM = """
import threading, psutil
from toolray_actors._heap import trim
kept = []
def burst():  # a thread's burst of 2 KB blocks (glibc's, not Python's), 1 in 64 kept
    blocks = [bytes(2000) + bytes([i % 256]) for i in range(40_000)]
    kept.extend(blocks[::64])
    del blocks
thread = threading.Thread(target=burst)
thread.start()
thread.join()
me = psutil.Process()
before = me.memory_info().rss
assert trim()
print(before - me.memory_info().rss)
"""


def test_trim_gives_back_a_bursts_freed_blocks() -> None:
    """80 MB allocated in a thread, all but 1/64 freed: the scattered free pages go back."""
    assert int(_printed(_PROGRAM)) > 40 * 2**20


_ONCE = """
import threading
from toolray_actors._heap import start_trimming
assert start_trimming(every_s=3600) and start_trimming(every_s=3600)
print([t.daemon for t in threading.enumerate() if t.name == "toolray-heap-trim"])
"""


def test_the_trimming_thread_starts_once_per_process() -> None:
    assert _printed(_ONCE) == "[True]"
    assert not [t for t in threading.enumerate() if t.name == "toolray-heap-trim"]
