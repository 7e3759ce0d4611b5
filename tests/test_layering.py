"""The import structure, checked on the source: packages import only downward (``tasks`` ←
``harness`` ← ``analysis`` ← ``benchmarks``), ``harness/`` has no circular import, and no ``harness`` module imports ``analysis`` (the
commands' table, :mod:`harness.shell`, names their modules as entry points are named, and passes
``python -m harness`` its end-of-sweep summary). Every import counts, also one inside a function (a lazy import
is still a dependency), and for the layers and circles so does one under ``if TYPE_CHECKING:`` (a module
that names another's types depends on their meaning: the report's typed values live below the modules
that build and word them, :mod:`analysis.decision` and :mod:`analysis.report_values`); what the render
modules can start is read from the imports that run."""

from __future__ import annotations

import ast
import functools
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("tasks", "harness", "analysis", "benchmarks")  # each imports only those before it
# (importer, imported package): the allowed upward imports, each with its reason
ALLOWED_UP: set[tuple[str, str]] = set()  # none: the shell passes the end-of-sweep summary in


def _module(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Ids of the import nodes inside ``if TYPE_CHECKING:`` blocks."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return found


def imports(layers: tuple[str, ...] = LAYERS, root: Path = ROOT, annotations: bool = True) -> dict[str, set[str]]:
    """Module → the project modules it imports (``from harness import sweep`` counts as
    ``harness.sweep`` where that is a module); ``annotations=False`` leaves out those under
    ``if TYPE_CHECKING:``, which never run (what a module can start at run time)."""
    paths = [p for layer in layers for p in sorted((root / layer).rglob("*.py"))]
    modules = {_module(p, root) for p in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        tree = ast.parse(path.read_text())
        skip = set() if annotations else _type_checking_only(tree)
        found = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                found |= {f"{node.module}.{a.name}" for a in node.names}
        graph[_module(path, root)] = {m for m in found if m in modules} - {_module(path, root)}
    return graph


@functools.lru_cache(maxsize=None)
def repo_imports(annotations: bool = True) -> dict[str, set[str]]:
    """:func:`imports` of this repository, parsed once per test process (the tests below read the
    same source, which does not change while they run; each parse of the ~200 files cost 0.6–2.4
    CPU-s, once per test). Read-only: the checks build their own sets from it."""
    return imports(annotations=annotations)


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Each upward import not in :data:`ALLOWED_UP`, as ``importer -> imported``."""
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    out = []
    for importer, targets in graph.items():
        for target in targets:
            up = rank[target.split(".")[0]] > rank[importer.split(".")[0]]
            if up and (importer, target.split(".")[0]) not in ALLOWED_UP:
                out.append(f"{importer} -> {target}")
    return sorted(out)


def cycle(graph: dict[str, set[str]], package: str) -> list[str] | None:
    """A circular import among ``package``'s modules, or ``None``."""
    inside = {m: {t for t in ts if t.split(".")[0] == package and not t == package}
              for m, ts in graph.items() if m.split(".")[0] == package and m != package}
    try:
        tuple(graphlib.TopologicalSorter(inside).static_order())
    except graphlib.CycleError as err:
        return err.args[1]
    return None


def test_packages_import_only_downward():
    assert violations(repo_imports()) == []


@pytest.mark.parametrize("package", LAYERS)
def test_no_circular_import_inside_a_package(package):
    assert cycle(repo_imports(), package) is None


def test_the_checks_catch_an_upward_import_and_a_circle(tmp_path):
    """The rules fail on a tree that breaks them: harness → analysis from any module (the
    command module included, which once was allowed), and a ↔ b inside harness, also where one
    side imports only for annotations."""
    for layer in LAYERS:
        (tmp_path / layer).mkdir()
        (tmp_path / layer / "__init__.py").write_text("")
    (tmp_path / "analysis" / "plots.py").write_text("")
    (tmp_path / "harness" / "a.py").write_text("def f():\n    from harness import b\n")
    (tmp_path / "harness" / "b.py").write_text("import harness.a\nfrom analysis.plots import x\n")
    (tmp_path / "harness" / "command.py").write_text("from analysis import plots\n")
    graph = imports(root=tmp_path)
    assert violations(graph) == ["harness.b -> analysis.plots", "harness.command -> analysis",
                                 "harness.command -> analysis.plots"]
    assert set(cycle(graph, "harness")) == {"harness.a", "harness.b"}
    (tmp_path / "harness" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                               "    import harness.a\n")  # for annotations only: still a circle
    assert set(cycle(imports(root=tmp_path), "harness")) == {"harness.a", "harness.b"}
    (tmp_path / "harness" / "b.py").write_text("")
    assert cycle(imports(root=tmp_path), "harness") is None


# the modules that start trials: Ray's scheduler and the sweep that feeds it, the trial loop, and
# the analysis shells that run rounds of trials (the report, the scorecard, the zoo)
STARTS_TRIALS = {"harness.scheduler", "harness.sweep", "harness.trial", "harness.pack", "harness.loop",
                 "analysis.reporting", "analysis.report", "analysis.scorecard", "analysis.zoo"}
RENDER = ("analysis.render", "analysis.render_prose", "analysis.render_tables",  # the words of the report
          "analysis.decision")  # and the values they word


def reach(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every project module ``start`` imports, directly or through others."""
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), set()) - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


@pytest.mark.parametrize("module", RENDER)
def test_the_render_module_imports_no_module_that_starts_trials(module):
    """Rendering a report is a function of its values: nothing it imports can start a trial or
    open Ray (issue 60 item 2). What it imports at run time: an import for annotations only
    (``if TYPE_CHECKING:``) runs nothing."""
    graph = repo_imports(annotations=False)
    assert module in graph
    assert reach(graph, module) & STARTS_TRIALS == set()
    source = (ROOT / (module.replace(".", "/") + ".py")).read_text()
    assert "import ray" not in source and "from ray" not in source


def test_reach_finds_an_indirect_import(tmp_path):
    """The check sees a module that starts trials behind another import (render → a → sweep)."""
    for layer in LAYERS:
        (tmp_path / layer).mkdir()
        (tmp_path / layer / "__init__.py").write_text("")
    (tmp_path / "harness" / "sweep.py").write_text("")
    (tmp_path / "analysis" / "a.py").write_text("def f():\n    from harness import sweep\n")
    (tmp_path / "analysis" / "render.py").write_text("from analysis import a\n")
    assert reach(imports(root=tmp_path), "analysis.render") & STARTS_TRIALS == {"harness.sweep"}
