"""Each example of ``examples/integrations`` runs end to end in-process (on Ray: test_ray.py)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests._scripts import load_script

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "integrations"
NAMES = ["pydantic_ai_weather", "langgraph_weather", "openai_agents_weather"]
ANSWER = "Paris: sunny, 21 °C; Oslo: rain, 12 °C; Atlantis: Error: no weather station in Atlantis"


def load_example(name: str, prefix: str = "example") -> ModuleType:
    """Import ``examples/integrations/<name>.py`` as a module of its own."""
    return load_script(EXAMPLES / f"{name}.py", f"{prefix}_{name}")


def test_there_is_one_example_per_framework() -> None:
    assert sorted(p.stem for p in EXAMPLES.glob("*.py")) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_example_runs_in_process(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert load_example(name).main([]) == ANSWER
    assert capsys.readouterr().out == f"tools offered: ['get_weather']\nanswer: {ANSWER}\n"
