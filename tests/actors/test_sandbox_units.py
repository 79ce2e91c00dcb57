"""Sandboxes without Ray: the config's paths, ``confinement="strict"``, the report.

``TOOLRAY_CODE_REFUSE_LAYERS`` (Code Mode's test switch, the same substrate) makes a layer
missing as if this host could not give it: ``"strict"`` then refuses every call, naming the
layer and why; ``"auto"`` runs them and reports it missing.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from typing import Any

import pytest

from tests.actors._blobs import tool_blob
from toolray.errors import SandboxUnavailableError
from toolray.isolation import NestedAnswer, NestedRequest, sandbox_config, sandbox_confinement
from toolray_actors.execution._call_code import SandboxSpec
from toolray_actors.execution._children import CallProcesses

WAIT_S = 30.0
IDENT = {"call_id": "c1", "name": "t", "root_call_id": "c1", "scope": None, "token": "tok-1"}


def _uid(args: Any, ctx: Any) -> Any:
    return os.getuid()


async def _nested(ident: Any, request: NestedRequest) -> NestedAnswer:
    raise AssertionError("no nested call here")


async def _run(config: dict[str, Any], strict: bool) -> Any:
    procs = CallProcesses(
        memory_mb=256,
        warm=1,
        limit=2,
        nested=_nested,
        sandbox=SandboxSpec(config=config, strict=strict),
    )
    try:
        return await asyncio.wait_for(procs.run("t1", "k", tool_blob(_uid), {}, IDENT), WAIT_S)
    finally:
        procs.close()


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "auto"])
async def test_strict_refuses_calls_where_a_layer_is_missing(strict: bool) -> None:
    config = sandbox_config(refused=["landlock"])
    outcome = await _run(config, strict)
    if strict:
        assert outcome.status == "error"
        assert outcome.error.name == "SandboxUnavailableError"
        assert outcome.error.message.startswith("sandbox unavailable: landlock: ")
    else:
        assert (outcome.status, outcome.value) == ("ok", 65534)
    report = sandbox_confinement(config, "strict" if strict else "auto")
    assert report.landlock_abi == 0
    assert report.missing == ("landlock: refused",)


async def test_with_every_layer_strict_runs_the_call() -> None:
    outcome = await _run(sandbox_config(), strict=True)
    assert (outcome.status, outcome.value) == ("ok", 65534)


def test_paths_must_be_absolute_and_leave_the_scratch_alone() -> None:
    with pytest.raises(ValueError, match="must be absolute"):
        sandbox_config(read_paths=["relative/dir"])
    with pytest.raises(ValueError, match="its scratch lives there"):
        sandbox_config(write_paths=[tempfile.gettempdir()])
    config = sandbox_config()
    home = os.path.realpath(os.path.expanduser("~"))
    assert all(not home.startswith(path.rstrip("/") + "/") for path in config["read_paths"])
    assert "/tmp" not in config["read_paths"]


def test_the_refusal_is_a_toolray_error() -> None:
    assert issubclass(SandboxUnavailableError, Exception)
