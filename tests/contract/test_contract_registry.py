"""Contract: the registry API of section 6 on both backends.

The same program against ``ToolRegistry`` and ``rt.registry``: every read method with its
``scope=`` / ``tool_set=`` arguments, ``check_guards``, ``get("run_code")`` under Code Mode
(R-COND-07/10), ``stats``, and a disposed scope refusing contributions. Whatever
each backend answers is recorded with ``backend.agree`` and must be identical. Definitions
are compared by what they say (name, description), not identity: on Ray they are unpickled
copies (R-REG-14 is in-process only).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests import tools
from tests.contract.conftest import SCOPES, Backend
from toolray import (
    AbortController,
    ExecutionToken,
    RegistryStatistics,
    ToolExecution,
    ToolExecutionInput,
)

A, B = SCOPES


def _seen(definition: Any) -> Any:
    return None if definition is None else [definition.name, definition.description]


def _mode(backend: Backend, name: str, scope: str, tool_set: Any = None) -> str:
    inp = ToolExecutionInput(
        "m1", name, {}, AbortController().signal, scope=scope, tool_set=tool_set
    )
    return str(backend.registry.execution_mode(inp))


async def test_every_read_method_with_scope_and_tool_set(backend: Backend) -> None:
    plain_, cond, off, own = (backend.name(n) for n in ("plain", "cond", "off", "own"))
    ours = {plain_, cond, off, own}
    reg = backend.registry
    backend.register(tools.constant_tool(plain_, "plain-ran"))
    backend.register(tools.constant_tool(cond, "cond-ran"), when=tools.when_model("m-1"))
    backend.register(tools.constant_tool(off, "off-ran"), when=tools.when_model("other"))
    backend.register(tools.constant_tool(own, "own-ran"), scope=A)
    step = await backend.resolve(A)
    names = [plain_, cond, off, own, backend.name("nope")]
    reads = backend.agree(
        {
            "get": [_seen(reg.get(n, A)) for n in names],
            "get_set": [_seen(reg.get(n, A, step)) for n in names],
            "get_global": [_seen(reg.get(n)) for n in names],
            "executable": [_seen(reg.executable(n, A)) for n in names],
            "executable_set": [_seen(reg.executable(n, A, step)) for n in names],
            "definitions": [d.name for d in reg.definitions(A) if d.name in ours],
            "definitions_set": [d.name for d in reg.definitions(A, step) if d.name in ours],
            "schemas": [s for s in reg.schemas(A) if s["name"] in ours],
            "schemas_set": [s for s in reg.schemas(A, step) if s["name"] in ours],
            "schemas_b": [s["name"] for s in reg.schemas(B) if s["name"] in ours],
            "view": [n for n in step.view(A) if n in ours],
            "view_b": list(step.view(B)),
            "modes": [_mode(backend, n, A) for n in names],
            "modes_set": [_mode(backend, n, A, step) for n in names],
            "known": [n for n in reg.known_names(A) if n in ours],
        }
    )
    assert reads["get"] == [[n, "Returns " + n.split("_")[0] + "-ran"] for n in names[:4]] + [None]
    assert reads["get_set"][:4] == [*reads["get"][:2], None, reads["get"][3]]
    assert reads["get_global"][3] is None
    assert reads["executable"] == [reads["get"][0], None, None, reads["get"][3], None]
    assert reads["executable_set"] == reads["get_set"]
    assert reads["definitions"] == [plain_, cond, off, own]
    assert reads["definitions_set"] == [plain_, cond, own]
    assert [s["name"] for s in reads["schemas_set"]] == [plain_, cond, own]
    assert reads["schemas"][0] == {
        "name": plain_,
        "description": "Returns plain-ran",
        "parameters": {"type": "object", "properties": {}},
    }
    assert reads["schemas_b"] == [plain_, cond, off]
    assert reads["view"] == [plain_, cond, own]
    assert reads["view_b"] == []  # a set admits nothing for another scope
    assert reads["modes"] == ["parallel", "exclusive", "exclusive", "parallel", "exclusive"]
    assert reads["modes_set"] == ["parallel", "parallel", "exclusive", "parallel", "exclusive"]
    assert reads["known"] == [plain_, cond, off, own]


async def test_check_guards_answers_the_first_denial(backend: Backend) -> None:
    guarded, free = backend.name("guarded"), backend.name("free")
    backend.register(tools.constant_tool(guarded, "g"))
    backend.guard(tools.deny_guard(guarded, "globally denied"))
    backend.guard(tools.deny_guard(free, "denied in A"), scope=A)

    def execution(name: str, scope: str) -> ToolExecution:
        inp = ToolExecutionInput("g1", name, {}, AbortController().signal, scope=scope)
        return ToolExecution(inp, {}, ExecutionToken())

    verdicts = backend.agree(
        [
            backend.registry.check_guards(execution(guarded, A)),
            backend.registry.check_guards(execution(free, A)),
            backend.registry.check_guards(execution(free, B)),
        ]
    )
    assert verdicts == ["globally denied", "denied in A", None]


async def test_run_code_is_one_shared_definition_under_code_mode_r_cond_07(
    backend: Backend,
) -> None:
    echo = backend.name("echo")
    backend.register(tools.constant_tool(echo, "e"))
    backend.own(backend.context(A).present_as("code"))
    backend.own(backend.context(B).present_as("both"))
    reg = backend.registry
    shared = reg.get("run_code", A)
    assert shared is not None
    assert shared is reg.get("run_code", B)
    assert reg.get("run_code") is None  # the deployment is native
    schemas = reg.schemas(A)
    backend.agree(
        {
            "get": _seen(shared),
            "last": schemas[-1],
            "collapsed_get": _seen(reg.get(echo, A)),  # R-COND-10: get ignores the collapse
            "known": reg.known_names(A),
            "executable": _seen(reg.executable("run_code", A)),
            "definitions": [d.name for d in reg.definitions(A) if d.name == "run_code"],
        }
    )
    assert schemas[-1]["name"] == "run_code"
    assert reg.known_names(A) == ["run_code"]
    assert reg.definitions(A, None)
    assert all(d.name != "run_code" for d in reg.definitions(A))


async def test_stats_count_registrations(backend: Backend) -> None:
    before = backend.registry.stats()
    assert isinstance(before, RegistryStatistics)
    backend.register(tools.constant_tool(backend.name("counted"), "c"))
    after = backend.registry.stats()
    assert backend.agree(after.tools - before.tools) == 1
    assert after.epoch > before.epoch


async def test_a_disposed_scope_takes_no_contribution(backend: Backend) -> None:
    key = backend.name("short-lived")
    scope = backend.registry.scope(key, parent=A)
    assert scope.key == key
    assert scope.parent == A
    assert backend.registry.scope(key) is scope  # the same scoped context on every use
    local = backend.name("local")
    scope.register(tools.constant_tool(local, "l"))
    assert [s["name"] for s in backend.registry.schemas(key) if s["name"] == local] == [local]
    scope.dispose()
    assert scope.disposed
    assert scope.parent is None
    assert backend.registry.get(local, key) is None
    errors = []
    for write in (
        lambda: scope.register(tools.constant_tool(local, "l")),
        lambda: scope.restrict(deny=[local]),
        lambda: scope.guard(tools.deny_guard(local, "x")),
        lambda: scope.on_change(lambda: None),
    ):
        with pytest.raises(RuntimeError) as info:
            write()
        errors.append(str(info.value))
    assert backend.agree(errors) == [f'scope "{key}" is disposed'] * 4
    with pytest.raises(ValueError, match="already has parent"):
        backend.registry.scope(A, parent=B)


async def test_misuse_raises_type_error_with_the_same_text(backend: Backend) -> None:
    """Misuse is a ``TypeError`` / ``ValueError`` on both backends, never anything else."""
    from toolray import ToolBatchInput
    from toolray.testing import FakeClock  # any object without the expected shape

    reg, scope = backend.registry, backend.context(A)
    texts = []

    def add(a: int, b: int) -> int:  # a plain function: @tool was forgotten
        return a + b

    for misuse in (
        lambda: reg.register("not a definition"),
        lambda: reg.register(add),  # type: ignore[arg-type]
        lambda: reg.register(tools.constant_tool(backend.name("t"), "t"), when=1),
        lambda: scope.guard(1),
        lambda: scope.on_pre_execute(1),
        lambda: reg.on_change(1),
        lambda: scope.set_executor(FakeClock()),
        lambda: reg.restrict(deny=["x"]),
        lambda: scope.present_as("sideways"),
    ):
        with pytest.raises((TypeError, ValueError)) as info:
            misuse()
        texts.append(f"{type(info.value).__name__}: {info.value}")
    with pytest.raises(TypeError) as resolving:
        await reg.resolve("agent")
    texts.append(str(resolving.value))
    with pytest.raises(TypeError):
        ToolBatchInput(["not a call"], AbortController().signal)
    backend.agree(texts)
    assert texts[0] == "TypeError: register() takes a ToolDefinition, not str"
    assert texts[1] == (
        'TypeError: register() takes a ToolDefinition, not function "add"; decorate it with '
        "@tool (from toolray import tool)"
    )
    assert texts[-1] == "resolve() takes an ActivationContext, not str"
