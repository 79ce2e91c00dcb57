"""A driver process for multi-driver tests, driven line by line over stdin/stdout.

Each input line is a command; each answer is one ``ANSWER {json}`` line on stdout:
``{"ok": true, ...}`` or ``{"ok": false, "type", "module", "message"}`` — the module lets a
test assert that no ``ray.exceptions`` type ever reached the caller. Tools are defined in
this module, which runs as ``__main__``, so cloudpickle ships them by value and two driver
processes register byte-identical definitions.

Usage: ``python -m tests.actors._driver <address> <namespace>``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import traceback
from typing import Any

from toolray import AbortController, ToolBatchInput, ToolCall, ToolOutput, define_tool, text_block
from toolray_actors import RayRuntime, RuntimeConfig

_OUT = ToolOutput(schema={"type": "json"}, render=lambda a, v: [text_block(json.dumps(v))])


def echo(args: Any, ctx: Any) -> Any:
    return {"text": args.get("text", ""), "pid": os.getpid()}


def shout(args: Any, ctx: Any) -> Any:
    return {"text": str(args.get("text", "")).upper(), "pid": os.getpid()}


def crash(args: Any, ctx: Any) -> Any:
    os._exit(17)


def tool(variant: str) -> Any:
    if variant == "crash":
        return define_tool(
            name="crash",
            description="Kill the worker",
            parameters={},
            output=_OUT,
            execute=crash,
            is_concurrency_safe=lambda args: True,
        )
    body = echo if variant == "echo" else shout
    return define_tool(
        name="echo",
        description="Echo the text",
        parameters={"text": {"type": "string"}},
        output=_OUT,
        execute=body,
        is_concurrency_safe=lambda args: True,
    )


class Driver:
    def __init__(self, address: str, namespace: str) -> None:
        self.address = address
        self.namespace = namespace
        self.rt: RayRuntime | None = None
        self.disposers: list[Any] = []

    def start(self, control: str = "") -> dict[str, Any]:
        config = RuntimeConfig(
            namespace=self.namespace, kill_grace_ms=300, control_resource=control or None
        )
        self.rt = RayRuntime.start(config, address=self.address)
        return {"pid": os.getpid()}

    def connect(self) -> dict[str, Any]:
        """Attach to Ray without a runtime (an observer holding no lease)."""
        import ray

        ray.init(address=self.address, log_to_driver=False)
        return {}

    def register(self, variant: str, replace: str = "no") -> dict[str, Any]:
        assert self.rt is not None
        self.disposers.append(self.rt.registry.register(tool(variant), replace=replace == "yes"))
        return {}

    def dispose(self) -> dict[str, Any]:
        self.disposers.pop()()
        return {}

    def batch(self, scope: str, n: str = "3") -> dict[str, Any]:
        assert self.rt is not None
        calls = [ToolCall(f"c{i}", "echo", json.dumps({"text": f"t{i}"})) for i in range(int(n))]
        out = self.rt.executor(scope).execute_batch_sync(
            ToolBatchInput(calls, AbortController().signal, scope=scope)
        )
        return {
            "ids": [r.call_id for r in out.results],
            "values": [None if r.result.is_error else r.result.value["text"] for r in out.results],
            "codes": [r.result.error.info.code if r.result.is_error else None for r in out.results],
        }

    def crash(self, scope: str) -> dict[str, Any]:
        """A batch whose body kills its worker process (WORKER_LOST, then a replacement)."""
        assert self.rt is not None
        self.disposers.append(self.rt.registry.register(tool("crash")))
        out = self.rt.executor(scope).execute_batch_sync(
            ToolBatchInput([ToolCall("k1", "crash", "{}")], AbortController().signal, scope=scope)
        )
        return {"codes": [r.result.error.info.code for r in out.results if r.result.is_error]}

    def names(self, scope: str = "") -> dict[str, Any]:
        assert self.rt is not None
        return {"names": self.rt.registry.names(scope or None)}

    def stats(self) -> dict[str, Any]:
        assert self.rt is not None
        st = self.rt.stats()
        return {"kinds": sorted(a.kind for a in st.actors), "executors": list(st.executors)}

    def actors(self) -> dict[str, Any]:
        import ray

        found = ray.util.list_named_actors(all_namespaces=True)
        return {"names": sorted(a["name"] for a in found if a["namespace"] == self.namespace)}

    def where(self) -> dict[str, Any]:
        """The node of every control actor (registry, executors, pools)."""
        assert self.rt is not None
        return {a.name: a.node_id for a in self.rt.stats().actors if a.kind != "worker"}

    def pids(self) -> dict[str, Any]:
        assert self.rt is not None
        return {a.name: a.pid for a in self.rt.stats().actors}

    def shutdown(self) -> dict[str, Any]:
        assert self.rt is not None
        self.rt.shutdown()
        return {}

    def teardown(self) -> dict[str, Any]:
        assert self.rt is not None
        self.rt.teardown()
        return {}

    def exit(self, code: str = "0") -> dict[str, Any]:
        os._exit(int(code))


def answer(payload: dict[str, Any]) -> None:
    sys.stdout.write("ANSWER " + json.dumps(payload) + "\n")
    sys.stdout.flush()


def main() -> None:
    driver = Driver(sys.argv[1], sys.argv[2])
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        try:
            out = getattr(driver, words[0])(*words[1:])
            answer({"ok": True, **out})
        except BaseException as err:
            answer(
                {
                    "ok": False,
                    "type": type(err).__name__,
                    "module": type(err).__module__,
                    "message": str(err),
                    "code": getattr(err, "code", None),
                    "trace": traceback.format_exc()[-2000:],
                }
            )
    if driver.rt is not None:
        driver.rt.shutdown()


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
