"""The package's shape, enforced: a line budget per module, a light scoring core, no import circle.

Why tests: these rules (docs/development.md, "Structure budget") erode one reasonable-looking change at
a time; a failing test names the module and the rule, so the fix is a split, not an argument.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

import rubric_engine

PACKAGE = Path(rubric_engine.__file__).resolve().parent
MODULES = sorted(p for p in PACKAGE.rglob("*.py"))
LINE_BUDGET = 450  # docs/development.md: aim for ~400, never over this
HEAVY = ("rich", "diskcache", "jinja2", "pydantic", "litellm")


@pytest.mark.parametrize("module", [pytest.param(p, id=str(p.relative_to(PACKAGE))) for p in MODULES])
def test_module_within_line_budget(module: Path) -> None:
    lines = len(module.read_text(encoding="utf-8").splitlines())
    assert lines <= LINE_BUDGET, (f"{module.relative_to(PACKAGE.parent)} has {lines} lines (budget {LINE_BUDGET}): "
                                  "split it by responsibility (docs/development.md, Structure budget)")


def test_scoring_core_imports_no_io_or_ui_library() -> None:
    """`import rubric_engine.scoring.aggregate` in a fresh process loads none of the heavy libraries."""
    code = ("import json, sys\nimport rubric_engine.scoring.aggregate, rubric_engine.stats.bootstrap, rubric_engine.scoring.question\n"
            f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r}))))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1]) == []


def module_names(root: Path) -> dict[str, Path]:
    """Every module of the package at `root` by its dotted name (a package by its own name)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = (root.name, *path.relative_to(root).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def top_level_imports(name: str, path: Path, known: Iterable[str], deferred: bool = False,
                      type_checking: bool = False) -> set[str]:
    """The package's modules (dotted names) that module `name` imports when it is imported: module-level
    import statements, also inside module-level if/try, never under `if TYPE_CHECKING:` (unless
    type_checking=True); with deferred=True also the imports inside functions and classes (a circle through
    a lazy import is still a circle). `from pkg.sub import x` counts as pkg.sub.x when that is a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    known = set(known)
    top = name.split(".")[0]
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def target(module: str, names: list[str]) -> None:
        subs = [f"{module}.{n}" for n in names if f"{module}.{n}" in known]
        found.update(subs)
        if len(subs) < len(names) and module in known:
            found.add(module)

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if deferred and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(node.body)
                continue
            if deferred and isinstance(node, (ast.For, ast.While, ast.With, ast.AsyncWith)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                continue
            if isinstance(node, ast.If):
                test = node.test
                if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"):
                    if type_checking:
                        visit(node.body)
                    visit(node.orelse)
                    continue
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                for block in (node.body, node.orelse, node.finalbody, *[h.body for h in node.handlers]):
                    visit(block)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == top and alias.name in known:
                        found.add(alias.name)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                    module = f"{base}.{node.module}" if node.module else base
                else:
                    module = node.module or ""
                if module.split(".")[0] == top:
                    target(module, [a.name for a in node.names])

    visit(tree.body)
    found.discard(name)
    return found


def package_graph(root: Path, deferred: bool = False, type_checking: bool = False) -> dict[str, set[str]]:
    """module -> the package's modules it imports (see top_level_imports)."""
    modules = module_names(root)
    return {m: top_level_imports(m, p, modules, deferred, type_checking) for m, p in modules.items()}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (or a module importing itself), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm; the package has ~60 modules, recursion is fine
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph.get(v, ()):
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(out)


def test_cycle_checker_finds_a_planted_circle(tmp_path: Path) -> None:
    """The checker itself: a circle through a relative import, an absolute one and a `from . import x`,
    across a subpackage."""
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "sub" / "__init__.py").write_text("")
    (root / "a.py").write_text("from .sub.b import x\n")
    (root / "sub" / "b.py").write_text("import os\n\ndef f():\n    import pkg.c\n")
    (root / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import d\n"
                               "from . import a\n")
    (root / "d.py").write_text("from .a import y\n")
    assert import_cycles(package_graph(root)) == []  # b imports c only inside a function
    assert import_cycles(package_graph(root, deferred=True)) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    # d imports a, but only a TYPE_CHECKING import reaches d; counting those, d joins the circle
    assert import_cycles(package_graph(root, deferred=True, type_checking=True)) == [
        ["pkg.a", "pkg.c", "pkg.d", "pkg.sub.b"]]


@pytest.mark.parametrize("deferred", [False, True], ids=["module-level", "with-deferred"])
def test_no_import_cycle_among_package_modules(deferred: bool) -> None:
    """No circle of module-level imports, and none through imports deferred into functions either (the
    leaderboard, leaderboard_output and html_report circle was one of those)."""
    cycles = import_cycles(package_graph(PACKAGE, deferred))
    assert not cycles, "import circles: " + "; ".join(" <-> ".join(c) for c in cycles)
