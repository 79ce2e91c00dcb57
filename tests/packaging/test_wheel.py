"""The wheel a stranger installs: built here, installed into fresh venvs outside the repo.

The wheel holds both packages, the shipped configs and, as data, the examples.

With the ``ray`` extra, ``toolray --version`` and ``toolray demo`` work from an empty
directory (the demo starts its own local Ray from the shipped ``local`` config). Without
Ray, every Ray command says so in one line naming the extra and exits 2, while the core and
``toolray trace --in-process`` work. pip's cache makes the installs local copies.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import toolray
from tests._demo import check_demo

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _run(argv: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS")}
    env.pop("TOOLRAY_CONFIG", None)
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    # installed without compiling (most of Ray is never imported): the modules a process
    # imports are compiled once and kept, as on a user's machine, not again in every process
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = _run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(out)],
        out,
        300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (built,) = out.glob("toolray-*.whl")
    return built


def _venv(where: Path, requirement: str) -> Path:
    assert not where.resolve().is_relative_to(ROOT)  # outside the repository
    proc = _run([sys.executable, "-m", "venv", str(where)], where.parent, 120)
    assert proc.returncode == 0, proc.stderr
    pip = [str(where / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile"]
    proc = _run([*pip, requirement], where.parent, 900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return where / "bin"


@pytest.fixture
def empty_dir(tmp_path: Path) -> Iterator[Path]:
    cwd = tmp_path / "empty"
    cwd.mkdir()
    yield cwd
    leftovers = sorted(p.name for p in cwd.iterdir())
    assert leftovers in ([], ["trace.json"]), leftovers


def test_the_wheel_holds_both_packages_and_the_shipped_configs(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert wheel.name.startswith(f"toolray-{toolray.__version__}-")
    for config in ("local", "cluster", "ci"):
        shipped = zipfile.ZipFile(wheel).read(f"toolray_actors/configs/{config}.toml")
        assert shipped == (ROOT / "configs" / f"{config}.toml").read_bytes()
    assert "toolray/py.typed" in names
    assert "toolray_actors/cli/__init__.py" in names
    assert not [n for n in names if n.startswith(("tests/", "docs/", "benchmarks/"))]
    # the examples travel as data: <environment>/share/toolray/examples/ once installed
    data = f"toolray-{toolray.__version__}.data/data/share/toolray/examples/"
    for example in ("agent_loop.py", "notebook.ipynb", "integrations/langgraph_weather.py"):
        shipped = zipfile.ZipFile(wheel).read(data + example)
        assert shipped == (ROOT / "examples" / example).read_bytes()
    metadata = next(n for n in names if n.endswith("METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    requires = [line for line in text.splitlines() if line.startswith("Requires-Dist:")]
    base = [line for line in requires if "extra ==" not in line]
    assert sorted(line.split()[1].split(">")[0] for line in base) == [
        "cloudpickle",
        "psutil",
        "pydantic",
    ]
    for extra in (
        "ray",
        "openai",
        "anthropic",
        "mcp",
        "otel",
        "integrations",
        "docs",
        "all",
        "dev",
    ):
        assert f"Provides-Extra: {extra}" in text


@pytest.mark.ray
@pytest.mark.timeout(1500)
def test_pip_install_with_ray_then_toolray_demo_from_an_empty_directory(
    wheel: Path, tmp_path: Path, empty_dir: Path
) -> None:
    bin_ = _venv(tmp_path / "venv-ray", f"{wheel}[ray]")
    version = _run([str(bin_ / "toolray"), "--version"], empty_dir, 60)
    assert (version.returncode, version.stdout) == (0, f"toolray {toolray.__version__}\n")
    demo = _run([str(bin_ / "toolray"), "demo"], empty_dir, 400)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "Traceback" not in demo.stderr
    check_demo(demo.stdout, demo.stderr)  # every scenario, as Getting started shows it


@pytest.mark.timeout(900)
def test_without_ray_the_core_works_and_ray_commands_say_which_extra(
    wheel: Path, tmp_path: Path, empty_dir: Path
) -> None:
    bin_ = _venv(tmp_path / "venv-core", str(wheel))
    python, toolray_cmd = str(bin_ / "python"), str(bin_ / "toolray")
    probe = _run([python, "-c", "import ray"], empty_dir, 60)
    assert probe.returncode != 0  # really no Ray
    for argv in (["demo"], ["bench"], ["chaos"], ["trace"], ["demo", "--config", "cluster"]):
        proc = _run([toolray_cmd, *argv], empty_dir, 120)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert proc.stdout == ""
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith("toolray: this needs Ray"), line
        assert line.endswith('pip install "toolray[ray]"'), line
    module = _run([python, "-m", "toolray", "demo"], empty_dir, 120)
    assert module.returncode == 2
    assert 'pip install "toolray[ray]"' in module.stderr
    trace = _run([toolray_cmd, "trace", "--in-process"], empty_dir, 120)
    assert trace.returncode == 0, trace.stderr
    assert (empty_dir / "trace.json").is_file()
    core = _run(
        [
            python,
            "-c",
            "from toolray import ToolBatchInput, ToolCall, ToolRegistry, tool\n"
            "@tool\ndef hi(name: str) -> str:\n    '''Greet.'''\n    return 'hi ' + name\n"
            "r = ToolRegistry(); r.register(hi)\n"
            "out = r.execute_batch_sync(ToolBatchInput([ToolCall('c1', 'hi', {'name': 'x'})]))\n"
            "print(out.results[0].result.value)",
        ],
        empty_dir,
        120,
    )
    assert core.stdout.strip() == "hi x", core.stderr
