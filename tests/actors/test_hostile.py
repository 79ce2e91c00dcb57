"""Hostile input over the wire (issue 15): whatever a model sends, the Ray executor answers
one result per call, in model order, and no actor dies.

Hypothesis generates raw tool calls — random and deep arguments, invalid JSON and escapes,
NaN, non-string values where strings belong, unknown names — and the same batch runs
in-process; both answers must agree call by call (``to_wire()``), and the executor's pid
must not change. Then the extremes: 1 MB strings, 10,000-call batches.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tools import raw_echo_tool
from toolray import AbortController, ToolBatchInput, ToolCall, ToolRegistry

pytestmark = pytest.mark.ray

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=25,
)
_raw_text = st.one_of(
    _json.map(lambda v: json.dumps(v, allow_nan=True)),
    st.text(max_size=40),  # not JSON at all
    st.sampled_from(['{"a": "\\ud800"}', '{"a": "\\x"}', '{"a": NaN}', "[" * 300, "", "{}"]),
)
_arguments = st.one_of(
    _raw_text,
    st.dictionaries(st.text(max_size=8), _json, max_size=4),
    st.integers(),
    st.none(),
    st.lists(st.integers(), max_size=3),
)
_calls = st.lists(
    st.tuples(st.sampled_from(["hostile_echo", "nope", "", "run_code"]), _arguments),
    min_size=1,
    max_size=12,
)


def _batch(pairs: list[tuple[str, Any]], scope: str | None) -> ToolBatchInput:
    calls = [ToolCall(f"h{i}", name, args) for i, (name, args) in enumerate(pairs)]
    return ToolBatchInput(calls, AbortController().signal, scope=scope)


def _wire(out: Any) -> list[tuple[str, Any]]:
    return [(r.call_id, r.result.to_wire()) for r in out.results]


def _echo() -> Any:
    """The echo tool, bounded at 4 MiB: a 1 MiB string echoed back is over the default."""
    return dataclasses.replace(raw_echo_tool("hostile_echo"), max_result_bytes=4 << 20)


@pytest.fixture
def hostile(rt: Any, scope_key: str) -> Any:
    rt.owned.append(rt.registry.register(_echo()))
    local = ToolRegistry()
    local.register(_echo())
    return rt.executor(scope_key), local, scope_key


def test_random_raw_calls_get_the_in_process_answers_and_kill_no_actor(hostile: Any) -> None:
    ex, local, scope = hostile
    ex.execute_batch_sync(_batch([("hostile_echo", "{}")], scope))  # the executor is up

    async def pid_of() -> int:
        return int((await ex.statistics()).pid)

    pid = asyncio.run(pid_of())

    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(_calls)
    def check(pairs: list[tuple[str, Any]]) -> None:
        remote = ex.execute_batch_sync(_batch(pairs, scope))
        here = asyncio.run(local.execute_batch(_batch(pairs, None)))
        assert [r.call_id for r in remote.results] == [f"h{i}" for i in range(len(pairs))]
        assert _wire(remote) == _wire(here)

    check()
    assert asyncio.run(pid_of()) == pid  # the executor never died


def test_a_1_mb_string_and_a_10_000_call_batch_come_back_whole(hostile: Any) -> None:
    ex, _, scope = hostile
    big = "x" * 2**20
    out = ex.execute_batch_sync(_batch([("hostile_echo", {"s": big}), ("nope", big)], scope))
    assert out.results[0].result.value["received"]["s"] == big
    assert out.results[1].result.error.info.code == "UNKNOWN_TOOL"
    many = [("hostile_echo" if i % 3 else "nope", {"i": i}) for i in range(10_000)]
    out = ex.execute_batch_sync(_batch(many, scope))
    assert [r.call_id for r in out.results] == [f"h{i}" for i in range(10_000)]
    assert sum(r.result.is_error for r in out.results) == len(range(0, 10_000, 3))
    assert all(r.result.error.info.code == "UNKNOWN_TOOL" for r in out.results[::3])
