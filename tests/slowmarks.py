"""Which tests start a process: those are `slow`, and `pytest -m "not slow"` (the inner loop) leaves them out.

Why found, not remembered: a test that starts the console script pays Hydra's, the engine's and usually
LiteLLM's imports (seconds of CPU each time), while the in-process tests take milliseconds; one unmarked
console-script test costs the fast subset more than a hundred in-process ones. So conftest marks `slow`
every test whose code, followed through the helpers and fixtures it uses (in its own module, in
conftest.py and in the test modules it imports from, in any directory of tests/), starts a process: `EXE`,
`run_cli`, `kill_after_lines`, `subprocess`, `sys.executable`, or a helper built on them. An explicit
`@pytest.mark.slow` still works; a test that starts a process some other way should carry one.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

__all__ = ["starts_a_process"]

# what starts a process, as written in the tests (a bare name, or the attribute chain it is called through)
_SPAWNS = frozenset({"EXE", "run_cli", "kill_after_lines", "subprocess", "Popen", "sys.executable",
                     "os.fork", "multiprocessing", "ProcessPoolExecutor"})
_TESTS = Path(__file__).resolve().parent


@functools.cache
def _paths() -> dict[str, Path]:
    """Every module of the suite by its bare name (the name it is imported by): the support modules at the
    top of tests/ and the test modules in its concept directories (tests/<concept>/test_*.py)."""
    return {p.stem: p for p in [*_TESTS.glob("*.py"), *_TESTS.glob("*/test_*.py")]}


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


class _Module:
    """One test module's functions (module level and in classes), what each refers to, and its imports."""

    def __init__(self, path: Path) -> None:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        self.uses: dict[str, set[str]] = {}
        self.imported: dict[str, tuple[str, str]] = {}  # local name -> (sibling module, its name)
        for node in ast.walk(tree):  # imports from sibling modules, also those inside a function
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                    and node.module in _paths():
                for alias in node.names:
                    self.imported[alias.asname or alias.name] = (node.module, alias.name)
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:  # CMD = [EXE, ...]
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        self.uses[target.id] = self._refs(node.value)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.uses[node.name] = self._refs(node)
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.uses[f"{node.name}.{item.name}"] = self._refs(item) | {node.name}
                self.uses[node.name] = set().union(*(self._refs(b) for b in node.body)) if node.body else set()

    @staticmethod
    def _refs(node: ast.AST) -> set[str]:
        refs: set[str] = set()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            refs.update(a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs])  # fixtures by name
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                refs.add(sub.id)
            elif isinstance(sub, ast.Attribute):
                dotted = _dotted(sub)
                if dotted:
                    refs.add(dotted)
        return refs


@functools.cache
def _module(name: str) -> _Module | None:
    path = _paths().get(name)
    return _Module(path) if path is not None else None


def _spawns(module: str, name: str, seen: set[tuple[str, str]]) -> bool:
    if (module, name) in seen:
        return False
    seen.add((module, name))
    mod = _module(module)
    if mod is None:
        return False
    if name in mod.imported:
        return _spawns(*mod.imported[name], seen)
    refs = mod.uses.get(name)
    if refs is None:
        return module != "conftest" and _spawns("conftest", name, seen)  # a fixture or helper of conftest
    if refs & _SPAWNS:
        return True
    return any(_spawns(module, ref, seen) for ref in refs if ref != name and "." not in ref)


@functools.cache
def starts_a_process(module: str, function: str) -> bool:
    """Whether the test `function` ("test_x" or "Class.test_x") of the module `module` (tests/<concept>/<module>.py,
    named as it is imported) starts a process."""
    return _spawns(module, function, set())
