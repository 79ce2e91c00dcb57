"""The wheel a stranger installs: built here, installed into fresh venvs outside the repo.

The wheel holds both packages, the shipped configs and, as data, the examples.

With the ``ray`` extra, ``toolray --version`` and ``toolray demo`` work from an empty
directory (the demo starts its own local Ray from the shipped ``local`` config). Without
Ray, every Ray command says so in one line naming the extra and exits 2, while the core and
``toolray trace --in-process`` work. pip's cache makes the installs local copies; they are
made in the background from the start of the run (``_wheels``).
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import toolray
from tests._demo import check_demo
from tests.packaging._wheels import ROOT, made, run

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def wheel() -> Path:
    return made("wheel")


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
@pytest.mark.own_ray
@pytest.mark.timeout(1500)
def test_pip_install_with_ray_then_toolray_demo_from_an_empty_directory(empty_dir: Path) -> None:
    bin_ = made("ray")
    version = run([str(bin_ / "toolray"), "--version"], empty_dir, 60)
    assert (version.returncode, version.stdout) == (0, f"toolray {toolray.__version__}\n")
    demo = run([str(bin_ / "toolray"), "demo"], empty_dir, 400)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "Traceback" not in demo.stderr
    check_demo(demo.stdout, demo.stderr)  # every scenario, as Getting started shows it


@pytest.mark.timeout(900)
def test_without_ray_the_core_works_and_ray_commands_say_which_extra(empty_dir: Path) -> None:
    bin_ = made("core")
    python, toolray_cmd = str(bin_ / "python"), str(bin_ / "toolray")
    probe = run([python, "-c", "import ray"], empty_dir, 60)
    assert probe.returncode != 0  # really no Ray
    for argv in (["demo"], ["bench"], ["chaos"], ["trace"], ["demo", "--config", "cluster"]):
        proc = run([toolray_cmd, *argv], empty_dir, 120)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert proc.stdout == ""
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith("toolray: this needs Ray"), line
        assert line.endswith('pip install "toolray[ray]"'), line
    module = run([python, "-m", "toolray", "demo"], empty_dir, 120)
    assert module.returncode == 2
    assert 'pip install "toolray[ray]"' in module.stderr
    trace = run([toolray_cmd, "trace", "--in-process"], empty_dir, 120)
    assert trace.returncode == 0, trace.stderr
    assert (empty_dir / "trace.json").is_file()
    core = run(
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
