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
            "toolray._faults",
            "toolray._clock",
            "toolray._disposer",
            "toolray._latch",
            "toolray._held",
            "toolray._content",
            "toolray._waterfall",
        ),
    ),
    (
        "values",
        (
            "toolray._json",
            "toolray._signals",
            "toolray._body_timer",
            "toolray.presentation",
            "toolray._eventlog",
            "toolray._arguments",
            "toolray._trace",
            "toolray.scheduler",
            "toolray.scheduler._plan",
        ),
    ),
    (
        "farm controls",
        (
            "toolray.farm._values",
            "toolray.farm._bucket",
            "toolray.farm._bounds",
            "toolray.farm._limiter",
            "toolray.farm._controls",
            "toolray.farm",
        ),
    ),
    (
        "schemas",
        (
            "toolray.schema._equality",
            "toolray.schema._plain",
            "toolray.schema._validate",
            "toolray.schema._subset",
            "toolray.schema._codegen",
            "toolray.schema._dsl",
            "toolray.schema",
            "toolray.schema._unions",
            "toolray.schema._convert",
            "toolray.schema._params",
            "toolray.schema._pydantic",
        ),
    ),
    (
        "code mode SDK",
        (
            "toolray.codemode",
            "toolray.codemode._sdk_types",
            "toolray.codemode._sdk_ts",
            "toolray.codemode._sdk",
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
    ("execution identity", ("toolray._execution", "toolray._context", "toolray._nested")),
    (
        "definitions",
        (
            "toolray._definition",
            "toolray.environments",
            "toolray.environments._definition",
            "toolray.codemode._run_code",
            "toolray._decorator",
        ),
    ),
    (
        "environments",
        (
            "toolray.environments._events",
            "toolray.environments._turns",
            "toolray.environments._backend",
            "toolray.environments._record",
            "toolray.environments._instances",
            "toolray.environments._local",
            "toolray.environments._handle",
        ),
    ),
    (
        "registry: layers and views",
        ("toolray.registry", "toolray.registry._layers", "toolray.registry._view"),
    ),
    ("registry: state and lookup", ("toolray.registry._state", "toolray.registry._lookup")),
    (
        "registry: read side, write side, admission",
        ("toolray.registry._read", "toolray.registry._write", "toolray.registry._admission"),
    ),
    (
        "pipeline",
        (
            "toolray.pipeline",
            "toolray.pipeline._deadline",
            "toolray.pipeline._observe",
            "toolray.pipeline._call",
            "toolray.pipeline._policy",
            "toolray.pipeline._dispatch",
            "toolray.pipeline._throttle",
            "toolray.pipeline._retry",
            "toolray.pipeline._finish",
            "toolray.pipeline._stages",
            "toolray.policies._timeout",
            "toolray.policies",
        ),
    ),
    ("scheduler", ("toolray.scheduler._chain", "toolray.scheduler._engine")),
    (
        "batch",
        ("toolray.batch", "toolray.batch._types", "toolray.batch._run", "toolray.batch._executor"),
    ),
    ("code mode", ("toolray.codemode._program", "toolray.codemode._prompt")),
    ("facade", ("toolray.registry._registry",)),
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
        "observability (on the public API)",
        ("toolray.otel._spans", "toolray.otel._server", "toolray.otel"),
    ),
    (
        "process substrate (standard library and errors only)",
        (
            "toolray.procs._values",
            "toolray.procs._frames",
            "toolray.procs._zygote",
            "toolray.procs._child",
            "toolray.procs._keeper",
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
            "toolray.code._child_wire",
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
        "per-call isolation (on the public API)",
        (
            "toolray.isolation._reaper",
            "toolray.isolation._outcome",
            "toolray.isolation._data",
            "toolray.isolation._context",
            "toolray.isolation._bodies",
            "toolray.isolation._env_messages",
            "toolray.isolation._messages",
            "toolray.isolation._child",
            "toolray.isolation._instance",
            "toolray.isolation._entry",
            "toolray.isolation._sandbox",
            "toolray.isolation._link",
            "toolray.isolation",
        ),
    ),
    (
        "provider adapters (on the public API)",
        (
            "toolray.adapters",
            "toolray.adapters._common",
            "toolray.adapters._strict",
            "toolray.adapters._openai_out",
            "toolray.adapters._mcp_connect",
            "toolray.adapters._mcp_import",
            "toolray.adapters._mcp_serve",
            "toolray.adapters._mcp_auth",
            "toolray.adapters._mcp_sessions",
            "toolray.adapters._mcp_core",
            "toolray.adapters._mcp_gate",
            "toolray.adapters._mcp_http",
            "toolray.adapters.anthropic",
            "toolray.adapters.mcp",
            "toolray.adapters.openai",
        ),
    ),
    (
        "agent-framework integrations (on the public API and the adapters)",
        (
            "toolray.integrations",
            "toolray.integrations._source",
            "toolray.integrations._render",
            "toolray.integrations._lane",
            "toolray.integrations.pydantic_ai",
            "toolray.integrations.langgraph",
            "toolray.integrations.openai_agents",
        ),
    ),
)
"""Every core module, bottom-up: a module may import only modules listed before it."""

RANK = {module: rank for rank, module in enumerate(m for _, group in LAYERS for m in group)}

PUBLIC_CORE = (
    "errors",
    "farm",
    "testing",
    "policies",
    "lowlevel",
    "presentation",
    "schema",
    "code",
    "adapters",
    "procs",
    "isolation",
)
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
        "if TYPE_CHECKING:\n    from .registry._registry import ToolRegistry\n"
        "def f():\n    import ray\n    from .registry import _state\n"
        "def g():\n    import importlib\n    importlib.import_module('toolray_actors.cli')\n"
    )
    found = set(_targets("toolray._probe", source))
    assert found == {
        "typing",
        "toolray.registry._registry",
        "ray",
        "toolray.registry._state",
        "importlib",
        "toolray_actors.cli",
    }


# ---------------------------------------------------------------- the core's size and surface
MAX_TOP_LEVEL_MODULES = 35
"""Modules directly in ``src/toolray``; the rest live in sub-packages along the seams."""

MAX_PUBLIC_NAMES = 90
"""Names in ``toolray.__all__``: what a user types in the first week."""


def test_the_core_keeps_its_modules_in_packages_along_the_seams() -> None:
    top = sorted(path.name for path in CORE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, f"{len(top)} modules in src/toolray: {top}"


def _all_of(path: Path) -> tuple[str, ...]:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, tuple)
            return value
    raise AssertionError(f"{path} has no __all__")


def test_the_public_surface_is_small() -> None:
    names = _all_of(CORE / "__init__.py")
    assert len(names) <= MAX_PUBLIC_NAMES, f"toolray.__all__ has {len(names)} names"


# ---------------------------------------------------------------- one scheduler
ENGINE = "toolray.scheduler._engine"
STAGE_FUNCTIONS = ("prepare", "dispatch", "complete")


def test_one_engine_schedules_calls() -> None:
    """Only the scheduler drives the pipeline stage by stage; a lane elsewhere (one ordering
    whole calls, e.g. a framework's) groups them with the planner, never by its own rule."""
    drivers = sorted(
        module
        for module in core_modules()
        if not module.startswith("toolray.pipeline")
        for node in ast.walk(ast.parse(modules()[module].read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").endswith("pipeline._stages")
        and {alias.name for alias in node.names} & set(STAGE_FUNCTIONS)
    )
    assert drivers == [ENGINE]
    restated = sorted(
        f"{module}.{node.name}"
        for module in modules()
        for node in ast.walk(ast.parse(modules()[module].read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and node.name.endswith("Lane")
        if not _plans_with_the_planner(module)
    )
    assert restated == [], f"a lane that restates the stage rule: {restated}"


def _plans_with_the_planner(module: str) -> bool:
    """Whether ``module`` groups calls with the planner's own ``next_stage`` and ``joins``."""
    names = {
        alias.name
        for node in ast.walk(ast.parse(modules()[module].read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom)
        and node.module in ("toolray.lowlevel", "toolray.scheduler._plan")
        for alias in node.names
    }
    return {"next_stage", "joins"} <= names


# ---------------------------------------------------------------- the product is self-contained
SELF_CONTAINED = (
    "src",
    "actors",
    "tests",
    "benchmarks",
    "docs",
    "examples",
    "scripts",
    "configs",
    "README.md",
    "ARCHITECTURE.md",
    "CHANGELOG.md",
    "pyproject.toml",
    "mkdocs.yml",
    "Makefile",
)
"""Paths that may cite no document outside the repository: all of it."""

THE_CHECKS = ("tests/test_architecture.py", "tests/docs/test_site.py")
"""The two checks themselves, which name what they look for."""

UNSHIPPED = re.compile(
    r"API-v\d|API\.md|RAY-NOTES|ISOLATION-NOTES|BEHAVIOUR-|DESIGN\.md|STYLE\.md|shared/spec"
    r"|dsh-tools|\bthe original\b",
    re.IGNORECASE,
)

BEHAVIOUR_DOC = ROOT / "docs" / "reference" / "behaviour.md"
CITED = re.compile(r"\b([RPBC]-[A-Z]{2,6})-(\d+)((?:(?:/|\.\.)\d+)*)")
CITED_FAMILY = re.compile(r"\b([RPBC]-[A-Z]{2,6})\b(?!-\d)")
CITED_IN_A_NAME = re.compile(r"(?<![a-z])([rpbc])_([a-z]{2,6})_(\d+(?:_\d+)*)")
DEFINED = re.compile(r"^- \*\*([RPBC]-[A-Z]{2,6})-(\d+)\*\*", re.M)
FAMILY_HEADING = re.compile(r"^### ([RPBC]-[A-Z]{2,6}) —", re.M)


SOURCE_SUFFIXES = (".py", ".md", ".toml")
TEXT_SUFFIXES = (*SOURCE_SUFFIXES, ".yml", ".yaml", ".txt", ".cfg", ".json", ".sh", "")
"""Every text file the product ships: sources, docs, configs, scripts without a suffix."""


def _files(*roots: str, suffixes: tuple[str, ...] = SOURCE_SUFFIXES) -> Iterator[Path]:
    for root in roots:
        path = ROOT / root
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        for found in candidates:
            relative = found.relative_to(ROOT).as_posix()
            if "__pycache__" in found.parts or not found.is_file():
                continue
            if found.suffix in suffixes and not relative.startswith(THE_CHECKS):
                yield found


def test_the_product_cites_no_document_it_does_not_ship() -> None:
    offenders = sorted(
        f"{path.relative_to(ROOT)}:{number}: {match.group(0)}"
        for path in _files(*SELF_CONTAINED, suffixes=TEXT_SUFFIXES)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for match in UNSHIPPED.finditer(line)
    )
    assert offenders == []


def _cited(text: str) -> Iterator[tuple[str, int]]:
    """Every behaviour id ``text`` cites: ``P-ERR-4``, ``C-CODE-1/3``, ``R-VIS-01..05``."""
    for family, first, rest in CITED.findall(text):
        numbers = [int(first)]
        for separator, number in re.findall(r"(/|\.\.)(\d+)", rest):
            if separator == "..":
                numbers.extend(range(numbers[-1] + 1, int(number) + 1))
            else:
                numbers.append(int(number))
        yield from ((family, n) for n in numbers)


def _cited_in_names(text: str) -> Iterator[tuple[str, int]]:
    """Ids in test names: ``test_b_sched_7_b_abort_3_…``, ``test_p_pre_8_9_10_…``."""
    for name in re.findall(r"def (test_\w+)", text):
        for letter, word, numbers in CITED_IN_A_NAME.findall(name):
            family = f"{letter}-{word}".upper()
            yield from ((family, int(n)) for n in numbers.split("_"))


@cache
def _defined() -> tuple[frozenset[tuple[str, int]], frozenset[str]]:
    text = BEHAVIOUR_DOC.read_text(encoding="utf-8")
    ids = frozenset((family, int(number)) for family, number in DEFINED.findall(text))
    return ids, frozenset(FAMILY_HEADING.findall(text))


def test_every_cited_behaviour_id_is_defined_in_the_shipped_reference() -> None:
    ids, families = _defined()
    missing: set[str] = set()
    for path in _files("src", "tests"):
        text = path.read_text(encoding="utf-8")
        for family, number in (*_cited(text), *_cited_in_names(text)):
            if (family, number) not in ids:
                missing.add(f"{family}-{number} ({path.relative_to(ROOT)})")
        missing.update(
            f"{family} ({path.relative_to(ROOT)})"
            for family in CITED_FAMILY.findall(text)
            if family not in families
        )
    assert sorted(missing) == []


def test_the_citation_checker_reads_every_form() -> None:
    assert sorted(_cited("see R-VIS-01..03, C-CODE-1/3 and P-ERR-4")) == [
        ("C-CODE", 1),
        ("C-CODE", 3),
        ("P-ERR", 4),
        ("R-VIS", 1),
        ("R-VIS", 2),
        ("R-VIS", 3),
    ]
    source = "def test_b_sched_7_b_abort_3_x() -> None: ...\ndef test_p_pre_8_9_y(): ..."
    assert sorted(_cited_in_names(source)) == [
        ("B-ABORT", 3),
        ("B-SCHED", 7),
        ("P-PRE", 8),
        ("P-PRE", 9),
    ]
    ids, families = _defined()
    assert ("R-REG", 14) in ids
    assert "C-CODE" in families


# ---------------------------------------------------------------- the Ray layer's wire
MAX_ANY = 198
"""``Any`` in the Ray layer's code (names, not comments): a ratchet, lowered as handles get
types; it never grows."""


def _ray_trees() -> Iterator[tuple[str, ast.AST]]:
    for module in ray_modules():
        yield module, ast.parse(modules()[module].read_text(encoding="utf-8"))


def _constant_index(node: ast.Subscript) -> bool:
    index = node.slice
    if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
        index = index.operand
    return (
        isinstance(index, ast.Constant)
        and isinstance(index.value, int)
        and not isinstance(index.value, bool)
    )


def positional_reads(tree: ast.AST) -> list[str]:
    """Subscripts with an integer constant (``item[0]``, ``rec[-1]``): positional reads."""
    return [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript) and _constant_index(node)
    ]


def any_tuples(tree: ast.AST) -> list[str]:
    """``tuple[Any, ...]`` annotations: a record with no names."""
    return [
        f"line {node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript) and ast.unparse(node) in ("tuple[Any, ...]",)
    ]


def any_uses(tree: ast.AST) -> int:
    """``Any`` as a name or ``typing.Any`` (imports and comments do not count)."""
    return sum(
        1
        for node in ast.walk(tree)
        if (isinstance(node, ast.Name) and node.id == "Any")
        or (isinstance(node, ast.Attribute) and node.attr == "Any")
    )


def test_the_ray_layer_reads_no_record_by_position() -> None:
    offenders = [f"{m} {hit}" for m, tree in _ray_trees() for hit in positional_reads(tree)]
    assert offenders == [], "name the record's fields (see toolray_actors._wire)"


def test_the_ray_layer_has_no_unnamed_tuple_records() -> None:
    offenders = [f"{m} {hit}" for m, tree in _ray_trees() for hit in any_tuples(tree)]
    assert offenders == []


def test_the_ray_layer_keeps_its_any_budget() -> None:
    count = sum(any_uses(tree) for _, tree in _ray_trees())
    assert count <= MAX_ANY, f"Any is used {count} times in the Ray layer (budget {MAX_ANY})"


def test_the_wire_checkers_see_what_they_look_for() -> None:
    tree = ast.parse(
        "from typing import Any\n"
        "def f(item: tuple[Any, ...], rows: list[int]) -> Any:\n"
        "    first, *_ = rows\n"
        "    return item[0], rows[-1], item['k'], item[first], typing.Any\n"
    )
    assert positional_reads(tree) == ["line 4: item[0]", "line 4: rows[-1]"]
    assert any_tuples(tree) == ["line 2"]
    assert any_uses(tree) == 3


def test_wire_records_are_frozen_slotted_dataclasses_matched_exhaustively() -> None:
    from dataclasses import fields, is_dataclass

    from toolray_actors import _wire

    for name in _wire.__all__:
        value = getattr(_wire, name)
        if isinstance(value, type) and is_dataclass(value):
            params = value.__dataclass_params__  # type: ignore[attr-defined]
            assert params.frozen, f"{name} is not frozen"
            assert hasattr(value, "__slots__"), f"{name} is not slotted"
            assert fields(value), name
    with pytest.raises(TypeError, match="unknown wire record tuple"):
        _wire.unknown(("end", 1), "a batch stream")


# ---------------------------------------------------------------- typed remote calls
ACTOR_CLASS = re.compile(r"\w+(Actor|Manager|Worker)$")
"""Actor classes (a component's methods reach Ray through the actor's own delegates)."""

SENDERS = frozenset({"call", "acall", "_call", "_forwarded", "send", "remote"})
"""The Ray layer's ways to call an actor: each takes the method itself, never its name."""


@cache
def actor_methods() -> frozenset[str]:
    """The methods of the Ray layer's actor classes (``RegistryActor``, ``ToolWorker``, …)."""
    return frozenset(
        item.name
        for _, tree in _ray_trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and ACTOR_CLASS.match(node.name)
        for item in node.body
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
        and not item.name.startswith("_")
    )


def remote_calls_by_name(tree: ast.AST, methods: frozenset[str]) -> list[str]:
    """A remote method named by a string: ``conn.call("x", …)``, ``getattr(h, m).remote``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            first, *_ = node.args
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name not in SENDERS:
                continue
            if isinstance(first, ast.Constant) and first.value in methods:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "remote"
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", None) == "getattr"
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_remote_methods_are_named_by_the_method_not_a_string() -> None:
    """Only the typed sender (``toolray_actors._remote``) turns a method into its remote call."""
    offenders = [
        f"{m} {hit}"
        for m, tree in _ray_trees()
        if m != "toolray_actors._remote"
        for hit in remote_calls_by_name(tree, actor_methods())
    ]
    assert offenders == []


def test_the_remote_call_checker_sees_both_forms() -> None:
    assert {
        "release_lease",
        "run_batch",
        "abort_many",
        "read_get",
        "execute_call",
    } <= actor_methods()
    tree = ast.parse(
        "conn.call('release_lease', 1)\n"
        "getattr(handle, method).remote(1)\n"
        "conn.call(RegistryActor.release_lease, 'lease')\n"
        "_call('c1', 'read_file')\n"
        "found.get('info')\n"
    )
    assert remote_calls_by_name(tree, actor_methods()) == [
        "line 1: conn.call('release_lease', 1)",
        "line 2: getattr(handle, method).remote",
    ]


# ---------------------------------------------------------------- one Ray boundary
BOUNDARY = ("toolray_actors._remote", "toolray_actors._handles")
"""The Ray boundary: ``_remote`` sends, waits, looks up and retries a call (translating Ray's
errors); ``_handles`` applies Ray to the actor classes. Only they call Ray's ``get``,
``wait``, ``get_actor``, ``get_runtime_context`` or ask for ``num_returns``."""

RAW_RAY = {
    "toolray_actors.bench._rawray": "the bench's baseline: plain Ray tasks and actors, measured",
    "toolray_actors.bench._rollout_peers": "a rollout peer on plain Ray tasks (ray.wait, cancel)",
}
"""Modules that use Ray directly on purpose, each with its reason."""

PRIVATE_RAY: dict[str, str] = {}
"""Files that still import ``ray._private``, each with its reason."""

PRODUCT = ("src", "actors", "scripts", "benchmarks")

RAY_CALLS = frozenset({"get", "wait", "get_actor", "get_runtime_context"})


def direct_ray_calls(tree: ast.AST) -> list[str]:
    """``ray.get`` / ``ray.wait`` / ``ray.get_actor`` / ``ray.get_runtime_context`` (used or
    imported) and ``.options(num_returns=…)``: a Ray call outside the boundary."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in RAY_CALLS
            and isinstance(node.value, ast.Name)
            and node.value.id == "ray"
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and node.module == "ray":
            found.extend(
                f"line {node.lineno}: from ray import {alias.name}"
                for alias in node.names
                if alias.name in RAY_CALLS
            )
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "options"
            and any(keyword.arg == "num_returns" for keyword in node.keywords)
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node.func)}(num_returns=…)")
    return found


def private_ray(tree: ast.AST) -> list[str]:
    """Every use of ``ray._private``: imported, as an attribute, or imported by name."""
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            names = [f"{node.value.id}.{node.attr}"]
        elif isinstance(node, ast.Call):
            names = [_literal_import(node) or ""]
        if any(name == "ray._private" or name.startswith("ray._private.") for name in names):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_only_the_boundary_calls_ray_directly() -> None:
    offenders = [
        f"{module} {hit}"
        for module, tree in _ray_trees()
        if module not in BOUNDARY and module not in RAW_RAY
        for hit in direct_ray_calls(tree)
    ]
    assert offenders == [], "call Ray through toolray_actors._remote (send, get, lookup, …)"
    assert set(BOUNDARY) | set(RAW_RAY) <= set(ray_modules())


def test_the_product_uses_no_private_ray_module() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} {hit}"
        for path in _files(*PRODUCT, suffixes=(".py",))
        if path.relative_to(ROOT).as_posix() not in PRIVATE_RAY
        for hit in private_ray(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert offenders == []
    for allowed in PRIVATE_RAY:  # an exception that is no longer needed goes
        assert private_ray(ast.parse((ROOT / allowed).read_text(encoding="utf-8"))), allowed


def test_the_boundary_checkers_see_what_they_look_for() -> None:
    tree = ast.parse(
        "import ray\nfrom ray import get, put\n"
        "def f(h, refs):\n"
        "    ray.get(refs), ray.wait(refs), ray.get_actor('x'), ray.put(1)\n"
        "    ray.get_runtime_context().get_node_id()\n"
        "    h.m.options(num_returns='streaming').remote(), h.m.options(name='x').remote()\n"
        "    found.get('info')\n"
    )
    assert sorted(direct_ray_calls(tree)) == [
        "line 2: from ray import get",
        "line 4: ray.get",
        "line 4: ray.get_actor",
        "line 4: ray.wait",
        "line 5: ray.get_runtime_context",
        "line 6: h.m.options(num_returns=…)",
    ]
    tree = ast.parse(
        "import ray._private.state\nfrom ray._private import worker\nfrom ray import _private\n"
        "import ray.util.state\n"
        "def f():\n"
        "    ray._private.worker._global_node\n"
        "    importlib.import_module('ray._private.services')\n"
    )
    assert sorted(private_ray(tree)) == [
        "line 1: import ray._private.state",
        "line 2: from ray._private import worker",
        "line 3: from ray import _private",
        "line 6: ray._private",
        "line 7: importlib.import_module('ray._private.services')",
    ]


# ---------------------------------------------------------------- composition, not mixins
DECLARING = ("Protocol", "TypedDict", "NamedTuple")


def declared_for_others(tree: ast.AST) -> list[str]:
    """Bare class-level annotations (``mirror: Mirror``) in a plain class: attributes it
    expects another class to set (a mixin's). Dataclasses, Protocols, TypedDicts and
    NamedTuples declare their own fields."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        if any("dataclass" in ast.unparse(d) for d in node.decorator_list):
            continue
        if any(ast.unparse(b).split("[")[0] in DECLARING for b in node.bases):
            continue
        found.extend(
            f"{node.name}.{item.target.id}"
            for item in node.body
            if isinstance(item, ast.AnnAssign)
            and item.value is None
            and isinstance(item.target, ast.Name)
        )
    return found


def test_no_ray_layer_class_declares_attributes_for_another_to_set() -> None:
    offenders = [f"{m} {hit}" for m, tree in _ray_trees() for hit in declared_for_others(tree)]
    assert offenders == [], "hold a component and delegate to it instead of a mixin"


def test_the_mixin_checker_sees_what_it_looks_for() -> None:
    tree = ast.parse(
        "class Reads:\n    mirror: Mirror\n    limit: int = 3\n"
        "@dataclass(frozen=True)\nclass Spec:\n    key: str\n"
        "class Host(Protocol):\n    mirror: Mirror\n"
        "class Service:\n    def __init__(self, mirror: Mirror) -> None:\n"
        "        self.mirror: Mirror = mirror\n"
    )
    assert declared_for_others(tree) == ["Reads.mirror"]
