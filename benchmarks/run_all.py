"""Run every benchmark in this folder, then write the one results table, ``RESULTS.md``.

Each benchmark writes its detailed results (``RESULTS-<name>.md``: method, machine, date,
every figure). ``RESULTS.md`` is the one table the docs show (the Benchmarks page includes
it): a headline row per figure, read from the detailed files, so every figure quoted
anywhere has one source. ``--compose`` rebuilds ``RESULTS.md`` from the detailed files
without running anything; ``--quick`` runs the Ray, latency, rollout and MCP benchmarks
in their quick modes.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = [
    "bench_validator.py",
    "bench_registry.py",
    "bench_pipeline.py",
    "bench_batch.py",
    "bench_observability.py",
]
QUICK = (
    "bench_code.py",
    "bench_ray.py",
    "bench_perf.py",
    "rollout.py",
    "bench_scopes.py",
    "bench_mcp.py",
)
"""The scripts that take ``--quick`` (the Ray benchmarks)."""
ARGS = {
    "bench_observability.py": ["--ray"],
    "bench_registry.py": ["--write", str(HERE / "RESULTS-registry.md")],
    "bench_batch.py": ["--write"],
}
"""Options a script always runs with (the observability benchmark's Ray row)."""
OUT = HERE / "RESULTS.md"


@dataclass(frozen=True, slots=True)
class Headline:
    """One row of the table: the row of a detailed table that starts with ``row``."""

    figure: str
    source: str
    row: str
    measured: int
    unit: str = ""
    target: int | str = "—"
    versus: str = ""
    """The figure of the row this target is relative to ("≥ the gather pattern's")."""
    note: str = ""
    """Why the figure misses its target (required exactly when it does)."""


HEADLINES = (
    Headline("argument validation vs jsonschema (4-level nested object, valid)",
             "RESULTS-validator.md", "| nested objects (4 levels) | valid |", 7,
             " faster", "≥ 5× faster"),
    Headline("argument validation vs fastjsonschema (same value)", "RESULTS-validator.md",
             "| nested objects (4 levels) | valid |", 8, " of its time", "≤ 1.5×"),
    Headline("`execute()` of a no-op async tool, no hooks", "RESULTS-pipeline.md",
             "| async no-op |", 3, " µs", "≤ 25 µs"),
    Headline("`execute()` with five pass-through hooks / without", "RESULTS-pipeline.md",
             "| async no-op |", 6, "", "≤ 2×"),
    Headline("`executable(name, scope)`, 1,000 tools, 100 scopes, cached", "RESULTS-registry.md",
             "| `executable(name, scope)` |", 2, " µs", "≤ 2 µs"),
    Headline("in-process batch, 64 × 50 ms safe calls, cap 64", "RESULTS-batch.md",
             "| 64 × 50 ms safe, cap 64 |", 2, "", 5),
    Headline("in-process batch, 100 × 10 ms safe calls, cap 100", "RESULTS-batch.md",
             "| 100 × 10 ms safe, cap 100 |", 2, "", 5),
    Headline("in-process batch, 100 × 10 ms safe calls, cap 10", "RESULTS-batch.md",
             "| 100 × 10 ms safe, cap 10 |", 2, "", 5),
    Headline("in-process batch, 10 × [9 safe + 1 exclusive] × 10 ms", "RESULTS-batch.md",
             "| 10 × [9 safe + 1 exclusive] 10 ms, cap 10 |", 2, "", 5),
    Headline("Ray: 1,000 no-op calls, cap 1000, toolray / raw Ray throughput",
             "RESULTS-ray.md", "| (a) 1,000 no-op safe calls, 2 workers, cap 1000", 2, "", 3),
    Headline("Ray: 1,000 no-op calls, cap 10, toolray / raw Ray throughput",
             "RESULTS-ray.md", "| (a) 1,000 no-op safe calls, 2 workers, cap 10:", 2, "", 3),
    Headline("Ray: 64 × 100 ms sleeps on 8 workers, wall", "RESULTS-ray.md", "| (b) ", 2, "", 3),
    Headline("Ray: one-call batch round trip p50, isolation \"call\": toolray / raw two-hop call",
             "RESULTS-perf.md", "| one-call batch round trip, isolation \"call\"", 2, "", 3),
    Headline("Ray: one-call batch round trip p50, isolation \"shared\": toolray / raw two-hop call",
             "RESULTS-perf.md", "| one-call batch round trip, isolation \"shared\"", 2, "", 3),
    Headline("Ray: 1,000 no-op calls, cap 1000, isolation \"call\": toolray / raw fan-out",
             "RESULTS-perf.md", "| 1,000 no-op calls, cap 1000, isolation \"call\"", 2, "", 3),
    Headline("Ray: 1,000 no-op calls, cap 1000, isolation \"shared\": toolray / raw fan-out",
             "RESULTS-perf.md", "| 1,000 no-op calls, cap 1000, isolation \"shared\"", 2, "", 3),
    *(
        Headline(f"Ray: [{k} safe + 1 exclusive] × n, 300 calls, cap 10, isolation \"{iso}\": "
                 "toolray / raw same schedule", "RESULTS-perf.md",
                 f"| [{k} safe + 1 exclusive] × n, 300 no-op calls, cap 10, isolation \"{iso}\"",
                 2, "", 3)
        for iso in ("call", "shared")
        for k in (9, 3, 1)
    ),
    Headline("Ray: abort → batch settled, p50", "RESULTS-ray.md", "| (c) ", 2, "", 3),
    Headline("Ray: a body ignoring its 200 ms deadline, 300 ms grace: settled",
             "RESULTS-ray.md", "| (d) ", 2, "", 3),
    Headline("Ray: executor actor RSS (per_scope mode)", "RESULTS-ray.md",
             "| (e) executor actor idle RSS", 2, "", 3),
    Headline("Ray: first batch of a new scope (executor created)", "RESULTS-ray.md",
             "| (e) first batch of a new scope", 2, "", 3),
    Headline("Ray: 1,000 new scopes × 5 calls at once, sharded (2 shards): last result",
             "RESULTS-scopes.md", "| 1,000 × 5 | sharded", 4),
    Headline("Ray: executor RSS for 1,000 scopes, sharded (2 shards)", "RESULTS-scopes.md",
             "| 1,000 × 5 | sharded", 7),
    Headline("Ray: 10,000 new scopes × 2 calls at once, sharded (2 shards): last result",
             "RESULTS-scopes.md", "| 10,000 × 2 | sharded", 4, "", "≤ 15 s"),
    Headline("Ray: control actors' RSS with 10,000 scopes in flight", "RESULTS-scopes.md",
             "| 10,000 × 2 | sharded", 9, "", "≤ 1 GB"),
    Headline("Ray: 100,000 new scopes × 2 calls at once, sharded (2 shards): last result",
             "RESULTS-scopes.md", "| 100,000 × 2 | sharded", 4, "", "measured"),
    Headline("Code Mode: trivial `run_code` through the registry, warm, p50 / p99",
             "RESULTS-code.md", "| registry: trivial `run_code`", 2, " ms", 3),
    Headline("Code Mode: trivial run `1 + 1`, warm child, confinement \"auto\", p50 / p95 / p99",
             "RESULTS-code.md", "| trivial run, warm child, \"auto\"", 2, " ms", 3),
    Headline("Ray: 1,000 no-op calls, cap 1000, isolation \"call\": toolray / raw Ray",
             "RESULTS-rollout.md", "| call |", 4, "", 5),
    Headline("Ray: 1,000 no-op calls, cap 1000, isolation \"shared\": toolray / raw Ray",
             "RESULTS-rollout.md", "| shared |", 4, "", 5),
    Headline("rollout 24 × 4 × 4 (4 % faulty), isolation \"call\": good calls failed",
             "RESULTS-rollout.md", "| toolray |", 4, "", "0"),
    Headline("rollout 24 × 4 × 4 (4 % faulty), isolation \"call\": turn p50 / p99",
             "RESULTS-rollout.md", "| toolray |", 6, "", "p99 ≤ 600 ms"),
    Headline("rollout 24 × 4 × 4 (4 % faulty), isolation \"call\": calls/s",
             "RESULTS-rollout.md", "| toolray |", 7, "", "≥ the gather pattern's"),
    Headline("rollout 24 × 4 × 4 (4 % faulty), the gather pattern: calls/s",
             "RESULTS-rollout.md", "| gather |", 7, "", "reference"),
    Headline("rollout 24 × 4 × 4 (4 % faulty), isolation \"shared\": good calls failed",
             "RESULTS-rollout.md", "| toolray-shared |", 4),
    Headline("tracing off: the observer seam per call (nobody observing)",
             "RESULTS-observability.md", "| the seam alone", 2, " µs", "≤ 2 % of a call"),
    Headline("tracing on / off: in-process `execute()` of a no-op tool",
             "RESULTS-observability.md", "| execute() |", 5, "", "reported"),
    Headline("tracing on / off: Ray, batch of 100 no-op calls",
             "RESULTS-observability.md", "| Ray: batch of 100", 5, "", "reported"),
    Headline("MCP over HTTP, 200 clients × 20 calls of 20 ms CPU: `mcp_http_app` on Ray / "
             "the SDK's `MCPServer`, throughput", "RESULTS-mcp.md", "| mcp_http_app on Ray |",
             7, "", "≥ 1.5×",
             note="the clients and every server process share 2 cores: each call cost 31 ms of "
             "server CPU against its 20 ms body (its own process, Ray's actor hops) and 2 ms "
             "of the client's, so two cores give at most ≈ 60 calls/s against the peer's ≈ 44 "
             "on one core (1000 / 22.8 ms): ≤ 1.36× on an idle machine, and other sessions "
             "held the cores (the detailed file's columns and load averages)"),
    Headline("MCP over HTTP, the same load: `toolray serve` (Ray Serve) / `MCPServer`, "
             "throughput", "RESULTS-mcp.md", "| toolray serve |", 7, "", "≥ 1.5×",
             note="Serve's HTTP proxy and replica are two more processes on every call's path "
             "on the same 2 cores: 42 ms of server CPU per call against the 20 ms body, so at "
             "most ≈ 45 calls/s; on a cluster they run on cores of their own (the detailed "
             "file's columns)"),
    Headline("MCP over HTTP, the same load: calls failed or lost, `mcp_http_app` on Ray",
             "RESULTS-mcp.md", "| mcp_http_app on Ray |", 4, "", "0"),
    Headline("MCP over HTTP, the same load: calls failed or lost, `toolray serve`",
             "RESULTS-mcp.md", "| toolray serve |", 4, "", "0"),
    Headline("MCP over HTTP, a body that kills its process: other calls failed or lost, "
             "`toolray serve`", "RESULTS-mcp.md", "| crash: toolray serve |", 4, "", "0"),
    Headline("MCP over HTTP, a body that kills its process: other calls failed or lost, "
             "`MCPServer`", "RESULTS-mcp.md", "| crash: MCPServer (peer) |", 4, "", "reported"),
)  # fmt: skip


def _cells(line: str) -> list[str]:
    return [""] + [cell.strip() for cell in line.strip().strip("|").split("|")]


def headline_row(headline: Headline, here: Path = HERE) -> str:
    """The table row of ``headline`` (its cells are 1-based columns of the detailed row)."""
    path = here / headline.source
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    found = [line for line in lines if line.startswith(headline.row)]
    if not found:
        return f"| {headline.figure} | not measured | — | `{headline.source}` |"
    cells = _cells(found[0])
    target = cells[headline.target] if isinstance(headline.target, int) else headline.target
    measured = cells[headline.measured].replace("**", "") + headline.unit
    if measured == "-":  # an empty cell of a detailed table (e.g. no good call failed)
        measured = "none"
    return f"| {headline.figure} | {measured} | {target} | `{headline.source}` |"


def compose(here: Path = HERE) -> str:
    """The text of ``RESULTS.md`` from the detailed result files in ``here``."""
    rows = "\n".join(headline_row(h, here) for h in HEADLINES)
    return (
        "<!-- generated by benchmarks/run_all.py from the RESULTS-*.md files; do not edit -->\n"
        "| figure | measured | target | detailed results |\n"
        "|---|---:|---|---|\n"
        f"{rows}\n"
    )


def main() -> int:
    failures = 0
    if "--compose" not in sys.argv:
        extra = ["--quick"] if "--quick" in sys.argv else []
        for script in [*SCRIPTS, *QUICK]:
            args = extra if script in QUICK else ARGS.get(script, [])
            print(f"\n===== {script} {' '.join(args)}".rstrip(), flush=True)
            failures += subprocess.call([sys.executable, str(HERE / script), *args]) != 0
    OUT.write_text(compose(), encoding="utf-8")
    print(f"wrote {OUT}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
