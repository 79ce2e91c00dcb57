"""RuntimeConfig: every file in configs/ loads and validates; bad input gets one clear error."""

from __future__ import annotations

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
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml")


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
