"""``Template.load``: work done in a running template, inherited by the children forked after."""

from __future__ import annotations

import json

from tests.procs.conftest import ENTRIES

WAIT_S = 30


def _report(child) -> list:
    data = b""
    while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
        chunk = child.channel.recv(65536)
        assert chunk, "the child closed its channel"
        data += chunk
    return json.loads(data[4:])


def test_loads_reach_the_children_forked_after_them_and_a_failed_load_is_harmless(
    make_template,
) -> None:
    template = make_template("loaded", loader=f"{ENTRIES}:keep")
    before = template.fork(timeout=WAIT_S)
    pid = template.load("small")
    template.load("big", b"x" * (3 << 20))  # larger than a control message: a memory file
    template.load("fail")
    after = template.fork(timeout=WAIT_S)
    try:
        assert _report(before) == []
        assert _report(after) == [["small", None], ["big", 3 << 20]]
        assert template.pid == pid  # the failed load did not end the template
        assert after.wait_exit_blocking(WAIT_S).code == 0
    finally:
        for child in (before, after):
            child.wait_exit_blocking(WAIT_S)
            child.close()
