"""The structure of the code, checked from its source (ARCHITECTURE.md is the map).

Every import counts — module level, under ``TYPE_CHECKING``, inside functions, and
``importlib.import_module("…")`` / ``__import__("…")`` with a literal name — so these rules
cannot be met by hiding an import:

- the core (``src/toolray``) imports neither ``ray`` nor ``toolray_actors``;
- every core module has one rank in :data:`LAYERS`, read bottom-up, and imports only modules
  of a strictly lower rank, so the core has no import cycle (there is no exception list);
- no module of either package is over :data:`MAX_LINES` lines;
- the Ray layer (``actors/toolray_actors``) imports only public core namespaces
  (:data:`PUBLIC_CORE`), never a private ``toolray._x`` module, and has no import cycle.
"""

from __future__ import annotations

import ast
import graphlib
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "src" / "toolray"
RAY = ROOT / "actors" / "toolray_actors"
MAX_LINES = 400

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation",
        (
            "toolray.errors",
            "toolray._clock",
            "toolray._disposer",
            "toolray._latch",
            "toolray._content",
            "toolray._waterfall",
        ),
    ),
    (
        "values",
        (
            "toolray._json",
            "toolray._signals",
            "toolray._presentation",
            "toolray._eventlog",
            "toolray._plan",
            "toolray._arguments",
        ),
    ),
    (
        "schemas",
        (
            "toolray._schema._equality",
            "toolray._schema._plain",
            "toolray._schema._validate",
            "toolray._schema._subset",
            "toolray._schema._codegen",
            "toolray._schema._dsl",
            "toolray._schema",
            "toolray._jsonschema_unions",
            "toolray._jsonschema_convert",
            "toolray._jsonschema_params",
            "toolray._pydantic_schema",
            "toolray._sdk_types",
            "toolray._sdk_ts",
            "toolray._sdk",
        ),
    ),
    (
        "outcomes",
        (
            "toolray._outcomes",
            "toolray._decisions",
            "toolray._approval",
            "toolray._activation",
            "toolray._normalize",
        ),
    ),
    ("execution identity", ("toolray._execution", "toolray._nested")),
    ("definitions", ("toolray._definition", "toolray._run_code", "toolray._decorator")),
    ("layers and views", ("toolray._layers", "toolray._view")),
    ("registry state and lookup", ("toolray._state", "toolray._lookup")),
    (
        "read side, write side, admission",
        ("toolray._read", "toolray._context", "toolray._admission"),
    ),
    ("call record", ("toolray._call",)),
    (
        "pipeline stages",
        (
            "toolray._policy",
            "toolray._dispatch",
            "toolray._finish",
            "toolray._pipeline",
            "toolray.policies._timeout",
            "toolray.policies",
        ),
    ),
    ("batch run and executor", ("toolray._batch_types", "toolray._batch_run", "toolray._batch")),
    ("code mode", ("toolray._ptc_lane", "toolray._ptc", "toolray._prompt")),
    ("facade", ("toolray._registry",)),
    (
        "public namespaces",
        (
            "toolray.testing._clock",
            "toolray.testing._gates",
            "toolray.testing",
            "toolray.lowlevel",
            "toolray",
            "toolray.__main__",
        ),
    ),
    (
        "process substrate (standard library and errors only)",
        (
            "toolray.procs._values",
            "toolray.procs._frames",
            "toolray.procs._zygote",
            "toolray.procs._child",
            "toolray.procs._template",
            "toolray.procs",
        ),
    ),
    (
        "code mode runtime (on the public API)",
        (
            "toolray.code._types",
            "toolray.code._child_guard",
            "toolray.code._child_sandbox",
            "toolray.code._child_landlock",
            "toolray.code._child_seccomp",
            "toolray.code._child_boot",
            "toolray.code._failures",
            "toolray.code._frames",
            "toolray.code._confinement",
            "toolray.code._checks",
            "toolray.code._cgroup",
            "toolray.code._process",
            "toolray.code._child",
            "toolray.code._channel",
            "toolray.code._session",
            "toolray.code._runtime",
            "toolray.code",
        ),
    ),
    (
        "provider adapters (on the public API)",
        (
            "toolray.adapters",
            "toolray.adapters._common",
            "toolray.adapters._strict",
            "toolray.adapters._openai_out",
            "toolray.adapters._mcp_import",
            "toolray.adapters._mcp_serve",
            "toolray.adapters.anthropic",
            "toolray.adapters.mcp",
            "toolray.adapters.openai",
        ),
    ),
)
"""Every core module, bottom-up: a module may import only modules listed before it."""

RANK = {module: rank for rank, module in enumerate(m for _, group in LAYERS for m in group)}

PUBLIC_CORE = ("errors", "testing", "policies", "lowlevel", "code", "adapters", "procs")
"""The core namespaces the Ray layer may import, besides ``toolray`` itself."""


@cache
def modules() -> dict[str, Path]:
    """Every module of both packages, by dotted name."""
    found: dict[str, Path] = {}
    for package in (CORE, RAY):
        for path in sorted(package.rglob("*.py")):
            parts = list(path.relative_to(package.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _literal_import(node: ast.Call) -> str | None:
    """``importlib.import_module("x")`` / ``__import__("x")`` with a literal name."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def _targets(module: str, source: str, *, is_package: bool = False) -> Iterator[str]:
    """The dotted names ``module`` imports (a relative import is resolved against it)."""
    known = modules()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                yield candidate if candidate in known else base
        elif isinstance(node, ast.Call):
            literal = _literal_import(node)
            if literal is not None:
                yield literal


@cache
def imports() -> dict[str, frozenset[str]]:
    """Every import of every module (targets as dotted names)."""
    return {
        module: frozenset(
            _targets(
                module, path.read_text(encoding="utf-8"), is_package=path.name == "__init__.py"
            )
        )
        for module, path in modules().items()
    }


def _is_core(name: str) -> bool:
    return name == "toolray" or name.startswith("toolray.")


def _top(name: str) -> str:
    return name.partition(".")[0]


def core_modules() -> list[str]:
    return [m for m in modules() if _is_core(m)]


def ray_modules() -> list[str]:
    return [m for m in modules() if _top(m) == "toolray_actors"]


# ---------------------------------------------------------------- the core
def test_the_core_never_imports_ray_or_the_ray_layer() -> None:
    offenders = sorted(
        f"{module} imports {target}"
        for module in core_modules()
        for target in imports()[module]
        if _top(target) in ("ray", "toolray_actors")
    )
    assert offenders == []


def test_every_core_module_has_exactly_one_rank() -> None:
    listed = [module for _, group in LAYERS for module in group]
    assert len(listed) == len(set(listed)), "a module is listed twice in LAYERS"
    unranked = sorted(set(core_modules()) - set(listed))
    assert unranked == [], f"give these modules a rank in LAYERS: {unranked}"
    gone = sorted(set(listed) - set(core_modules()))
    assert gone == [], f"LAYERS lists modules that do not exist: {gone}"


def test_core_modules_import_only_lower_ranks() -> None:
    upward = sorted(
        f"{module} (rank {RANK[module]}) imports {target} (rank {RANK[target]})"
        for module in core_modules()
        if module in RANK
        for target in imports()[module]
        if _is_core(target) and target in RANK and RANK[target] >= RANK[module]
    )
    assert upward == []


def _cycle(modules_: list[str]) -> list[str]:
    """One import cycle among ``modules_`` (as a path), or ``[]``."""
    inside = set(modules_)
    graph = {m: {t for t in imports()[m] if t in inside and t != m} for m in inside}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as err:
        return list(err.args[1])
    return []


def test_the_core_has_no_import_cycle() -> None:
    assert _cycle(core_modules()) == []


# ---------------------------------------------------------------- both packages
@pytest.mark.parametrize("module", sorted(modules()))
def test_no_module_is_over_the_line_budget(module: str) -> None:
    lines = len(modules()[module].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{module} has {lines} lines (budget {MAX_LINES}): split it"


# ---------------------------------------------------------------- the Ray layer
def _private_core(target: str) -> bool:
    if not _is_core(target) or target == "toolray":
        return False
    parts = target.split(".")[1:]
    return parts[0] not in PUBLIC_CORE or any(part.startswith("_") for part in parts)


def test_the_ray_layer_uses_only_public_core_namespaces() -> None:
    offenders = sorted(
        f"{module} imports {target}"
        for module in ray_modules()
        for target in imports()[module]
        if _private_core(target)
    )
    assert offenders == []


def test_the_ray_layer_has_no_import_cycle() -> None:
    assert _cycle(ray_modules()) == []


# ---------------------------------------------------------------- the map
def test_architecture_md_has_one_line_per_module() -> None:
    """ARCHITECTURE.md names every module of both packages, and only modules that exist."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    named = re.findall(r"^- `((?:toolray|toolray_actors)/[\w/]+\.py)`", text, re.M)
    files = sorted(
        str(path.relative_to(package.parent))
        for package in (CORE, RAY)
        for path in package.rglob("*.py")
    )
    assert len(named) == len(set(named)), "a module has two lines in ARCHITECTURE.md"
    assert sorted(named) == files


def test_architecture_md_reads_the_core_in_rank_order() -> None:
    """Its module lines list the core in the order of LAYERS (the bottom-up reading order)."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    named = re.findall(r"^- `(toolray/[\w/]+)\.py`", text, re.M)
    dotted = [name.replace("/", ".").removesuffix(".__init__") for name in named]
    assert sorted(dotted, key=RANK.__getitem__) == dotted


# ---------------------------------------------------------------- the checker itself
def test_the_checker_sees_every_kind_of_import() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ._registry import ToolRegistry\n"
        "def f():\n    import ray\n    from . import _state\n"
        "def g():\n    import importlib\n    importlib.import_module('toolray_actors.cli')\n"
    )
    found = set(_targets("toolray._probe", source))
    assert found == {
        "typing",
        "toolray._registry",
        "ray",
        "toolray._state",
        "importlib",
        "toolray_actors.cli",
    }
