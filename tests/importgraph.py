"""The package's import graph, read from the source (no import is run): for tests/project/test_structure.py.

Why its own module: the structure rules (circles, the one-way order of subpackages, private names) all read
the same graph; keeping the reader apart lets the rules stay short and the reader be tested on a planted package.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path


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


def unit(module: str) -> str:
    """The subpackage a module belongs to ('rubric_engine.run.runner' -> 'run'); a top-level module is its own."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def private_imports(root: Path) -> Iterator[tuple[str, str]]:
    """(module, 'other.module._name') for every `_private` name a module takes from another subpackage: by
    `from x import _name`, or as `alias._name` on a module it imported under that alias."""
    modules = module_names(root)
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules:
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    if full in modules:
                        aliases[a.asname or a.name] = full
                    elif _private(a.name) and unit(node.module) != unit(name):
                        yield name, full
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname and a.name in modules:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and _private(node.attr) and unit(aliases[node.value.id]) != unit(name)):
                yield name, f"{aliases[node.value.id]}.{node.attr}"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def first_paragraph(path: Path) -> str:
    """A module's docstring up to its first blank line, as one line ('' without a docstring)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(doc.split("\n\n")[0].split())
