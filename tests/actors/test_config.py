"""RuntimeConfig: every file in configs/ loads and validates; bad input gets one clear error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolray_actors import ConfigError, RuntimeConfig, load_config

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.toml"))


def test_the_shipped_configs_are_local_cluster_and_ci() -> None:
    assert {p.stem for p in CONFIGS} >= {"local", "cluster", "ci"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_config_file_validates(path: Path) -> None:
    config = load_config(path)
    assert isinstance(config, RuntimeConfig)
    assert config.pool.size >= 1
    assert config.kill_grace_ms > 0
    assert RuntimeConfig.from_toml(path) == config


def test_cluster_config_attaches_and_detaches() -> None:
    config = load_config(Path(CONFIGS[0]).parent / "cluster.toml")
    assert config.address == "auto"
    assert config.detached is True
    assert config.executors.mode == "sharded"  # a farm: many scopes per executor actor


def test_executors_default_to_one_actor_per_scope() -> None:
    assert RuntimeConfig().executors.mode == "per_scope"
    for name in ("local", "ci"):
        assert load_config(Path(CONFIGS[0]).parent / f"{name}.toml").executors.mode == "per_scope"


def test_defaults_without_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLRAY_CONFIG", raising=False)
    assert load_config() == RuntimeConfig()


def test_toolray_config_environment_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('namespace = "mine"\n[pool]\nsize = 3\n')
    monkeypatch.setenv("TOOLRAY_CONFIG", str(path))
    config = load_config()
    assert (config.namespace, config.pool.size) == ("mine", 3)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("namespace = \n", "cannot read config"),
        ("unknown_key = 1\n", "unknown_key: Extra inputs are not permitted"),
        ("[pool]\nsize = 0\n", "pool.size"),
        ("kill_grace_ms = -1\n", "kill_grace_ms"),
    ],
)
def test_a_bad_config_names_the_file_and_the_field(
    tmp_path: Path, text: str, fragment: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_a_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found") as info:
        load_config(tmp_path / "nope.toml")
    assert str(tmp_path / "nope.toml") in str(info.value)


def test_the_shipped_configs_are_the_repository_files_byte_for_byte() -> None:
    """One source: the package ships exactly ``configs/*.toml`` (copy them when they change)."""
    from toolray_actors._config import packaged_configs

    shipped = packaged_configs()
    assert sorted(shipped) == sorted(p.stem for p in CONFIGS) == ["ci", "cluster", "local"]
    for path in CONFIGS:
        assert shipped[path.stem].read_bytes() == path.read_bytes(), path.name
    packaged_dir = shipped["local"].parent
    assert sorted(p.name for p in packaged_dir.glob("*.toml")) == sorted(p.name for p in CONFIGS)


def test_cluster_by_name_from_any_directory_is_the_sharded_farm_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config("cluster")
    assert config == load_config(CONFIGS[0].parent / "cluster.toml")
    assert config.executors.mode == "sharded"
    assert config.detached is True


@pytest.mark.parametrize("name", ["configs/cluster.toml", "cluster.toml", "./local", "Cluster"])
def test_only_bare_names_select_shipped_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """A path that does not exist is an error, never silently replaced by a shipped file."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="config file not found") as info:
        load_config(name)
    assert name.lstrip("./") in str(info.value)


def test_a_bare_name_wins_over_a_file_of_that_name_and_a_path_object_is_a_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ci").write_text('namespace = "mine"\n')
    assert load_config("ci").namespace == "toolray-ci"
    assert load_config(Path("ci")).namespace == "mine"


def test_toolray_config_may_name_a_shipped_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLRAY_CONFIG", "cluster")
    assert load_config().executors.mode == "sharded"


def test_the_local_config_keeps_rays_newcomer_defaults() -> None:
    """Dashboard when installed (Ray decides), and what a tool prints reaches the driver."""
    local = load_config("local").ray
    assert local.include_dashboard is None
    assert local.log_to_driver is True
    ci = load_config("ci").ray
    assert (ci.include_dashboard, ci.log_to_driver) == (False, False)


def test_ray_options_reach_ray_init(monkeypatch: pytest.MonkeyPatch) -> None:
    """``[ray]`` passes runtime_env (attach and local start) and the local-start options."""
    import ray

    from toolray_actors.driver import _ray_init

    seen: list[dict[str, object]] = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: seen.append(kw))
    cfg = RuntimeConfig.model_validate(
        {
            "address": "local",
            "ray": {
                "runtime_env": {"working_dir": ".", "env_vars": {"A": "1"}},
                "num_gpus": 0,
                "resources": {"toolslot": 4},
                "dashboard_port": 8300,
                "log_to_driver": False,
            },
        }
    )
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # no auth set-up in this unit test
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))  # restored afterwards
    assert _ray_init.connect_ray(cfg) is True
    (kwargs,) = seen
    assert kwargs["runtime_env"] == {"working_dir": ".", "env_vars": {"A": "1"}}
    assert kwargs["resources"] == {"toolslot": 4}
    assert kwargs["num_gpus"] == 0
    assert kwargs["dashboard_port"] == 8300
    assert kwargs["log_to_driver"] is False
    assert "include_dashboard" not in kwargs  # unset: Ray's own default
    seen.clear()
    monkeypatch.setattr(_ray_init, "probe", lambda address: None)
    attach = cfg.model_copy(update={"address": "10.0.0.1:6379"})
    _ray_init.connect_ray(attach)
    (kwargs,) = seen
    assert kwargs["address"] == "10.0.0.1:6379"
    assert kwargs["runtime_env"] == {"working_dir": ".", "env_vars": {"A": "1"}}
    assert "resources" not in kwargs  # local-start options never reach a cluster


def test_an_unreachable_cluster_address_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A refused ``host:port`` fails at once (no Ray start, no minute of retries)."""
    from toolray_actors.cli import main

    path = tmp_path / "unreachable.toml"
    path.write_text('address = "127.0.0.1:1"\n')
    assert main(["--config", str(path), "demo"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("toolray: cannot reach the Ray cluster at '127.0.0.1:1'")


def test_toolray_actors_all_is_curated() -> None:
    import toolray_actors

    names = toolray_actors.__all__
    assert isinstance(names, tuple)
    assert len(names) == len(set(names))
    assert all(hasattr(toolray_actors, n) for n in names)
    assert {"RayRuntime", "RuntimeConfig", "ExecutorHandle", "RuntimeStats"} <= set(names)
