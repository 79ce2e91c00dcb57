"""The core imports no provider SDK; the adapter packages export curated names."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

SDKS = ("openai", "anthropic", "mcp")


def test_import_toolray_imports_no_provider_sdk() -> None:
    code = (
        "import sys\n"
        "import toolray, toolray.adapters, toolray.testing, toolray.policies\n"
        f"print(sorted(m for m in {SDKS!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("toolray.adapters.openai", {"calls_from_openai", "tools_for_openai", "results_to_openai"}),
        (
            "toolray.adapters.anthropic",
            {"calls_from_anthropic", "tools_for_anthropic", "results_to_anthropic"},
        ),
        (
            "toolray.adapters.mcp",
            {
                "SCOPE_CLAIM",
                "BearerTokens",
                "CancelNotice",
                "CancelNotices",
                "HttpConnector",
                "LocalSessions",
                "McpConnectError",
                "McpConnector",
                "McpHttpApp",
                "McpServerStats",
                "McpSession",
                "McpToolError",
                "SessionStore",
                "TenantStats",
                "TokenFileError",
                "build_mcp_server",
                "child_scope",
                "close_http_sessions",
                "http_connector",
                "mcp_http_app",
                "open_http_sessions",
                "import_mcp_tools",
                "list_mcp_tools",
                "mcp_tool_definitions",
                "serve_mcp",
                "serve_mcp_async",
            },
        ),
    ],
)
def test_adapter_modules_export_the_api_names(module: str, names: set[str]) -> None:
    adapter = importlib.import_module(module)
    assert isinstance(adapter.__all__, tuple)
    assert set(adapter.__all__) == names
    assert all(getattr(adapter, name) is not None for name in names)


def test_json_schema_parameters_is_a_core_name() -> None:
    import toolray

    assert "json_schema_parameters" in toolray.__all__
    assert "JsonSchemaParameters" in toolray.__all__
