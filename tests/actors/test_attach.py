"""Several drivers share one namespace: a second driver process attaches to the running
cluster (``address=``), registers through the same registry actor, and this driver sees and
runs what it registered."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import ray

from toolray import AbortController, ToolBatchInput, ToolCall

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]

DRIVER = textwrap.dedent(
    """
    import sys
    from toolray import ToolOutput, define_tool, text_block
    from toolray_actors import RayRuntime

    def shout(args, ctx):
        return args.get("text", "").upper()

    rt = RayRuntime.start("configs/ci.toml", address=sys.argv[1])
    scope = rt.scope(sys.argv[2])
    scope.register(define_tool(
        name="shout", description="Upper-case the text",
        parameters={"text": {"type": "string"}},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        execute=shout,
    ))
    print("REGISTERED", rt.registry.info()["contributions"])
    """
)


@pytest.mark.timeout(240)
async def test_a_second_driver_attaches_and_shares_the_registry(rt: Any, scope_key: str) -> None:
    address = ray.get_runtime_context().gcs_address
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, address, scope_key],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=200,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "REGISTERED" in proc.stdout
    try:
        assert "shout" in [s["name"] for s in rt.registry.schemas(scope_key)]
        assert "shout" not in [s["name"] for s in rt.registry.schemas()]
        out = await rt.executor(scope_key).execute_batch(
            ToolBatchInput(
                [ToolCall("c1", "shout", '{"text": "shared"}')],
                AbortController().signal,
                scope=scope_key,
            )
        )
        assert out.results[0].result.value == "SHARED"
    finally:
        rt.scope(scope_key).dispose()
    assert "shout" not in [s["name"] for s in rt.registry.schemas(scope_key)]
