"""``[code]`` in the runtime configuration: the runtime's keys, with the runtime's defaults."""

from __future__ import annotations

import inspect

import pytest

from toolray.code import PythonRuntime
from toolray_actors import CodeConfig, RuntimeConfig
from toolray_actors.execution._code_pool import CodePool

SHARED = (
    "timeout_s",
    "cpu_s",
    "memory_mb",
    "scratch_mb",
    "read_paths",
    "confinement",
    "warm_ttl_s",
    "max_outstanding_calls",
    "max_run_bytes",
)


def test_code_config_has_the_runtimes_keys_and_defaults() -> None:
    defaults = {name: p.default for name, p in inspect.signature(PythonRuntime).parameters.items()}
    config = CodeConfig()
    for key in SHARED:
        assert getattr(config, key) == defaults[key] or (key, getattr(config, key)) == (
            "read_paths",
            (),
        ), key
    assert all(field.description for field in CodeConfig.model_fields.values())


def test_code_config_reads_the_new_keys_from_toml(tmp_path) -> None:
    path = tmp_path / "code.toml"
    path.write_text(
        "[code]\nconfinement = 'strict'\nscratch_mb = 8\nread_paths = ['/usr/share']\n"
        "warm_ttl_s = 5.0\nmax_outstanding_calls = 4\nmax_run_bytes = 1048576\n"
    )
    code = RuntimeConfig.from_toml(path).code
    assert (code.confinement, code.scratch_mb, code.read_paths) == ("strict", 8, ("/usr/share",))
    assert (code.warm_ttl_s, code.max_outstanding_calls, code.max_run_bytes) == (5.0, 4, 2**20)
    with pytest.raises(Exception, match="confinement"):
        CodeConfig(confinement="on")  # type: ignore[arg-type]


def test_the_pool_passes_every_key_to_its_runtime() -> None:
    pool = CodePool(CodeConfig(confinement="off", scratch_mb=8, warm_ttl_s=5.0, size=1))
    try:
        assert pool.confinement() is None  # nothing started before the first program
        runtime = pool.runtime()
        assert runtime.confinement().mode == "off"
        assert repr(runtime) == (
            "PythonRuntime(timeout_s=30.0, memory_mb=512, cpu_s=10.0, confinement='off')"
        )
    finally:
        pool.close()
