"""Per-tenant MCP metrics through ``ray.util.metrics``, from each replica of an MCP app.

Tags are bounded: the tenant (a scope named by the tokens — never a session's own scope)
and the outcome. Each replica hands over what its server counted about once a second:

- ``toolray_mcp_requests_total{tenant}`` — MCP requests answered (``initialize``,
  ``tools/list``, ``tools/call``, …);
- ``toolray_mcp_calls_total{tenant,outcome}`` — tool calls (``outcome``: ``ok`` or ``error``);
- ``toolray_mcp_sessions_opened_total{tenant}`` — MCP sessions opened;
- ``toolray_mcp_calls_in_flight`` — calls this replica runs now (set every flush).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import final

from ray.util import metrics

from toolray.adapters.mcp import McpServerStats, TenantStats

__all__ = ("McpMetrics",)


@final
class McpMetrics:
    """One replica's MCP metrics, fed from its server's ``stats()``."""

    def __init__(self, stats: Callable[[], McpServerStats]) -> None:
        self._stats = stats
        self._seen: dict[str, TenantStats] = {}
        self.requests = metrics.Counter(
            "toolray_mcp_requests_total",
            description="MCP requests answered, by tenant.",
            tag_keys=("tenant",),
        )
        self.calls = metrics.Counter(
            "toolray_mcp_calls_total",
            description="Tool calls over MCP, by tenant and outcome (ok or error).",
            tag_keys=("tenant", "outcome"),
        )
        self.sessions = metrics.Counter(
            "toolray_mcp_sessions_opened_total",
            description="MCP sessions opened, by tenant.",
            tag_keys=("tenant",),
        )
        self.in_flight = metrics.Gauge(
            "toolray_mcp_calls_in_flight",
            description="Tool calls over MCP running now (per replica).",
        )

    def flush(self) -> None:
        """Hand over what was counted since the last flush (as increments)."""
        now = self._stats()
        for tenant, counts in now.tenants.items():
            before = self._seen.get(tenant, TenantStats())
            tags = {"tenant": tenant}
            _inc(self.requests, counts.requests - before.requests, tags)
            errors = counts.call_errors - before.call_errors
            _inc(self.calls, counts.calls - before.calls - errors, {**tags, "outcome": "ok"})
            _inc(self.calls, errors, {**tags, "outcome": "error"})
            _inc(self.sessions, counts.sessions_opened - before.sessions_opened, tags)
            self._seen[tenant] = counts
        self.in_flight.set(now.calls_in_flight)


def _inc(counter: metrics.Counter, by: int, tags: dict[str, str]) -> None:
    if by > 0:
        counter.inc(by, tags=tags)
