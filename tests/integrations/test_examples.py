"""Each example of ``examples/integrations`` runs end to end in-process (on Ray: test_ray.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "integrations"
NAMES = ["pydantic_ai_weather", "langgraph_weather", "openai_agents_weather"]
ANSWER = "Paris: sunny, 21 °C; Oslo: rain, 12 °C; Atlantis: Error: no weather station in Atlantis"


def load_example(name: str, prefix: str = "example") -> ModuleType:
    """Import ``examples/integrations/<name>.py`` as a module of its own."""
    spec = importlib.util.spec_from_file_location(f"{prefix}_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_there_is_one_example_per_framework() -> None:
    assert sorted(p.stem for p in EXAMPLES.glob("*.py")) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_example_runs_in_process(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert load_example(name).main([]) == ANSWER
    assert capsys.readouterr().out == f"tools offered: ['get_weather']\nanswer: {ANSWER}\n"
