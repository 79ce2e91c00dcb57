"""Farm controls of the Ray layer without Ray: pool plans, the sizing rule, chaos checks."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from toolray import Placement, RateLimit
from toolray_actors import RuntimeConfig
from toolray_actors._placement import placement_key, pool_plan
from toolray_actors.bench._chaos_check import check, rate_windows_over
from toolray_actors.execution._elastic import ElasticPolicy


def test_a_fixed_pool_keeps_its_key_and_is_not_elastic() -> None:
    config = RuntimeConfig()
    plan = pool_plan(Placement(size=2), config)
    assert (plan.size, plan.min_size, plan.max_size, plan.elastic) == (2, 2, 2, False)
    assert placement_key(Placement(size=2)) != placement_key(Placement(size=2, max_size=4))


def test_an_elastic_placement_starts_within_its_bounds() -> None:
    plan = pool_plan(Placement(min_size=2, max_size=5, idle_s=3), RuntimeConfig())
    assert (plan.size, plan.min_size, plan.max_size, plan.idle_s) == (2, 2, 5, 3.0)
    assert plan.elastic
    grow_only = pool_plan(Placement(max_size=4), RuntimeConfig())
    assert (grow_only.min_size, grow_only.max_size) == (1, 4)


def test_a_named_pool_takes_its_elastic_keys_from_the_config() -> None:
    config = RuntimeConfig.model_validate(
        {"pools": {"charts": {"size": 1, "min_size": 1, "max_size": 6, "idle_s": 5}}}
    )
    plan = pool_plan(Placement(pool="charts"), config)
    assert (plan.min_size, plan.max_size, plan.idle_s) == (1, 6, 5.0)


def test_a_gpu_pool_keeps_no_spare_unless_asked() -> None:
    config = RuntimeConfig.model_validate({"pool": {"spare": 1}})
    assert pool_plan(Placement(num_gpus=1), config).spare == 0
    assert pool_plan(Placement(num_gpus=1, spare=1), config).spare == 1


def test_rate_limit_tables_validate() -> None:
    config = RuntimeConfig.model_validate(
        {"rate_limits": {"web_search": {"per_second": 25, "burst": 5}}}
    )
    table = config.rate_limits["web_search"]
    assert RateLimit(**table.model_dump()) == RateLimit(25, burst=5)
    assert config.max_result_bytes == 1 << 20
    assert config.max_content_chars is None
    with pytest.raises(ValueError, match="per_second"):
        RuntimeConfig.model_validate({"rate_limits": {"t": {"per_second": 0}}})
    with pytest.raises(ValueError, match=r"rate_limits\.t\.rate"):
        RuntimeConfig.model_validate({"rate_limits": {"t": {"per_second": 1, "rate": 2}}})


def test_the_sizing_rule() -> None:
    policy = ElasticPolicy(min_size=1, max_size=4, idle_s=10, per_worker=2)
    assert policy.grow_by(members=1, starting=0, waiting=5) == 3  # capped at max_size
    assert policy.grow_by(members=1, starting=1, waiting=2) == 0  # one is coming already
    assert policy.grow_by(members=4, starting=0, waiting=9) == 0
    idle = {"w1": 30.0, "w2": 11.0, "w3": 2.0}
    assert policy.to_retire(idle, members=3) == ["w1", "w2"]
    assert policy.to_retire(idle, members=2) == ["w1"]  # never below min_size


def test_the_campaign_counts_windows_over_the_limit() -> None:
    steady = [i / 10 for i in range(50)]  # 10/s for 5 s
    assert rate_windows_over(steady, 10, 1) == 0
    assert rate_windows_over([0.0] * 12 + steady, 10, 1) > 0


def test_a_call_below_a_killed_process_is_not_collateral(tmp_path: Path) -> None:
    """A call forked by a worker after the kill of its pool was aimed died with that worker.

    ``killed`` is what the campaign saw below its victims when it struck; the ledger's
    lineage (the run's process and its ancestors) finds a call forked after that.
    """
    ledger = tmp_path / "ledger.sqlite"
    db = sqlite3.connect(ledger)
    db.execute("CREATE TABLE runs (call_id TEXT, pid INTEGER, at REAL, lineage TEXT)")
    db.executemany(
        "INSERT INTO runs VALUES (?, ?, ?, ?)",
        [
            ("a-1", 501, 1.0, "501 500 400"),  # forked late below worker 500 (killed)
            ("a-2", 601, 1.0, "601 600 400"),  # below a worker nobody killed
            ("a-3", 502, 1.0, "502 500 400"),  # a success below the killed worker
        ],
    )
    db.commit()
    db.close()
    (tmp_path / "logs").mkdir()
    records = [
        {
            "agent": "a",
            "phase": "chaos",
            "ids": ["a-1", "a-2", "a-3"],
            "result_ids": ["a-1", "a-2", "a-3"],
            "codes": ["WORKER_LOST", "WORKER_LOST", None],
        }
    ]
    figures = check(records, str(ledger), tmp_path / "logs", killed={500})
    assert figures["collateral"] == 1
    assert figures["collateral_calls"] == ["a-2 in [400, 600, 601]"]
    assert check(records, str(ledger), tmp_path / "logs", killed={400})["collateral"] == 0
