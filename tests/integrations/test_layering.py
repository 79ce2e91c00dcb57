"""Importing toolray imports no framework; each integration imports only its own."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

FRAMEWORKS = {
    "pydantic_ai": ("pydantic_ai",),
    "langgraph": ("langgraph", "langchain_core"),
    "openai_agents": ("agents",),
}
EVERY = tuple(name for names in FRAMEWORKS.values() for name in names)


def _loaded_after(statement: str) -> list[str]:
    code = f"import sys\n{statement}\nprint(sorted(m for m in {EVERY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return eval(out.stdout)  # a list literal of module names


def test_import_toolray_and_the_integrations_package_imports_no_framework() -> None:
    assert _loaded_after("import toolray, toolray.integrations, toolray.adapters") == []


@pytest.mark.parametrize("module", sorted(FRAMEWORKS))
def test_each_integration_imports_only_its_own_framework(module: str) -> None:
    loaded = _loaded_after(f"import toolray.integrations.{module}")
    assert loaded  # its own framework (LangGraph's node is built on langchain_core alone)
    assert set(loaded) <= set(FRAMEWORKS[module])


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("toolray.integrations", set()),
        ("toolray.integrations.pydantic_ai", {"ToolrayToolset"}),
        ("toolray.integrations.langgraph", {"ToolrayToolNode"}),
        ("toolray.integrations.openai_agents", {"function_tools"}),
    ],
)
def test_the_modules_export_the_api_names(module: str, names: set[str]) -> None:
    integration = importlib.import_module(module)
    assert isinstance(integration.__all__, tuple)
    assert set(integration.__all__) == names
