"""A hostile body's frames against its worker: the worker reads them as bounded data only.

A body holds its call process, so it can write whatever it likes on the process's channel
(fd 3): a ``done`` frame of 16 MiB of ``{},{},…``, a status only the worker may give, a
record only the worker sends (whose reason would be unpickled). Each breaks the protocol:
the worker refuses the frame from its bytes, kills the process, and fails that call only;
its memory does not grow by the millions of objects the bytes would make.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import psutil
import pytest

from tests.actors._blobs import tool_blob
from tests.actors._call_worker import call_worker
from toolray_actors._wire import WorkerRequest

MIB = 1024 * 1024
WAIT_S = 60.0


def _send(payload: bytes) -> None:
    os.write(3, len(payload).to_bytes(4, "big") + payload)


def _flood(args: Any, ctx: Any) -> Any:
    payload = b'{"op":"done","token":"' + args["token"].encode() + b'","clean":true,'
    payload += b'"status":"ok","value":[' + b"{}," * 5_500_000 + b"{}]}"
    for _ in range(3):
        _send(payload)
    return "sent"


def _worker_status(args: Any, ctx: Any) -> Any:
    done = {"op": "done", "token": args["token"], "clean": True, "status": "retired"}
    _send(json.dumps(done).encode())
    return "sent"


def _workers_record(args: Any, ctx: Any) -> Any:
    _send(json.dumps({"op": "abort", "token": args["token"], "reason": "gASVAAAA"}).encode())
    return "sent"


def _ident(token: str) -> dict[str, object]:
    return {"call_id": token, "name": "t", "root_call_id": token, "scope": None, "token": token}


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (_flood, "exceeds 1048576 values"),
        (_worker_status, 'status "retired" is not allowed'),
        (_workers_record, 'unknown frame op "abort"'),
    ],
    ids=["a 16 MiB flood", "a worker's status", "a worker's record"],
)
async def test_a_forged_frame_fails_its_own_call_and_costs_its_bytes(body: Any, why: str) -> None:
    host = psutil.Process()
    with call_worker() as worker:
        before = host.memory_info().rss
        request = WorkerRequest("t1", f"k-{body.__name__}", tool_blob(body), {"token": "t1"}, {})
        forged = await asyncio.wait_for(worker.run(_request(request, "t1")), WAIT_S)
        assert forged.status == "lost"
        assert forged.detail.startswith("the call's process broke the protocol (")
        assert why in forged.detail
        assert len(forged.detail) < 300
        assert host.memory_info().rss - before < 64 * MIB
        fine = WorkerRequest("t2", "k-fine", tool_blob(_fine), {}, {})
        after = await asyncio.wait_for(worker.run(_request(fine, "t2")), WAIT_S)
        assert (after.status, after.value) == ("ok", "fine")  # its worker serves on


def _fine(args: Any, ctx: Any) -> Any:
    return "fine"


def _request(request: WorkerRequest, token: str) -> WorkerRequest:
    return WorkerRequest(request.token, request.key, request.blob, request.arguments, _ident(token))
