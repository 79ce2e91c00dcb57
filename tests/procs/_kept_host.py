"""A host of one template (``argv``: entries file, keeper 1/0): forks one child, says the pids.

The child (``entries.hang_with_session``) runs with a ``setsid`` child of its own; the host
prints the template's, the child's and that session child's pids as one JSON line, then
waits to be killed (as an actor's process is when its owner dies).
"""

from __future__ import annotations

import json
import os
import sys
import time

from toolray.procs import FrameDecoder, Template, TemplateSpec


def main() -> None:
    entries, keeper = sys.argv[1], sys.argv[2] == "1"
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(16)]  # descriptors past 9, as
    assert held[-1] > 9  # in a Ray worker: the template's socket must not need a low one
    template = Template(TemplateSpec(entry=f"{entries}:hang_with_session", keeper=keeper))
    child = template.fork(timeout=30)
    decoder = FrameDecoder()
    while not (frames := decoder.feed(child.channel.recv(65536))):
        pass
    pids = {"template": template.pid, **{k: frames[0][k] for k in ("child", "session")}}
    print(json.dumps(pids), flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
