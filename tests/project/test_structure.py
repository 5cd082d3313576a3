"""The package's shape, enforced: a line budget per module, light scoring and statistics, no import
circle, dependencies that point one way, no private name taken across subpackages, a layout table that
cannot drift.

Why tests: these rules (docs/development.md, "Structure budget") erode one reasonable-looking change at
a time; a failing test names the module and the rule, so the fix is a move or a split, not an argument.
Run this file as a script to print the layout table for docs/development.md.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
if __name__ == "__main__":  # run as a script (the layout table): the support modules are at the top of tests/
    sys.path.insert(0, str(TESTS))

from importgraph import first_paragraph, import_cycles, module_names, package_graph, private_imports, unit  # noqa: E402

REPO = TESTS.parent
PACKAGE = REPO / "rubric_engine"
MODULES = sorted(PACKAGE.rglob("*.py"))
SUBPACKAGES = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
LINE_BUDGET = 450  # docs/development.md: aim for ~400, never over this
HEAVY = ("rich", "diskcache", "jinja2", "pydantic", "litellm")
LIGHT = ("scoring", "stats")  # pure computation: importing any of their modules loads no library in HEAVY

# The one-way order (docs/development.md, "Code layout"): a module may import a module of its own
# subpackage or of a layer below its own, never one of its layer or above. The package's __init__.py (the
# public names, resolved lazily) stands above all.
LAYERS: list[tuple[str, ...]] = [
    ("cli",),
    ("cluster",),  # Ray (issue #40): drives run/ and reward/ across nodes; nothing below imports Ray
    ("reward",),  # above run/: a reward loads spec and data and plans its judges as a run does (run/runner, run/plan)
    ("run",),
    ("report",),
    ("results", "validity", "authoring"),
    ("shapes",),  # the evaluation shapes' strategies (issue #36): every layer above asks them; below, facts are passed in
    ("judge", "stats", "store"),
    ("dataset",),
    ("spec",),
    ("scoring", "models"),
    ("record",),  # the typed samples.jsonl record and its codec: every reader of a stored run reads it
    ("errors", "datatypes", "records", "text"),
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


@pytest.mark.parametrize("module", [pytest.param(p, id=str(p.relative_to(PACKAGE))) for p in MODULES])
def test_module_within_line_budget(module: Path) -> None:
    lines = len(module.read_text(encoding="utf-8").splitlines())
    assert lines <= LINE_BUDGET, (f"{module.relative_to(REPO)} has {lines} lines (budget {LINE_BUDGET}): split it "
                                  "by responsibility; a concept that outgrows the budget becomes a subpackage")


def test_light_packages_import_no_io_or_ui_library() -> None:
    """Every module of scoring/ and stats/, imported in a fresh process, loads none of the heavy libraries."""
    names = sorted(m for m in module_names(PACKAGE) if unit(m) in LIGHT)
    code = (f"import importlib, json, sys\nfor m in {names!r}:\n    importlib.import_module(m)\n"
            f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r}))))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1]) == []


def test_every_public_name_resolves() -> None:
    """rubric_engine.__all__ (README, docs/cli.md) names each public object by the module that defines it:
    a module that moved must take its public names' entries along."""
    code = ("import rubric_engine\nfor name in rubric_engine.__all__:\n    getattr(rubric_engine, name)\n"
            "print(len(rubric_engine.__all__))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


def test_every_directory_of_the_package_is_a_subpackage_with_a_light_init() -> None:
    """Each subpackage's __init__.py says what lives there and what it may import, and imports nothing
    (importing rubric_engine.stats.bootstrap must not pay for the rest of stats/)."""
    dirs = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert dirs == SUBPACKAGES, "a folder of rubric_engine/ without __init__.py"
    assert sorted(RANK) == sorted([*SUBPACKAGES, "errors", "datatypes", "records"]), "LAYERS must name every subpackage"
    for name in SUBPACKAGES:
        init = PACKAGE / name / "__init__.py"
        tree = ast.parse(init.read_text(encoding="utf-8"))
        assert "may import" in (ast.get_docstring(tree) or "").lower(), f"{init}: say what may be imported"
        assert len(tree.body) == 1, f"{init}: a docstring only (no imports, no definitions)"


def test_cycle_checker_finds_a_planted_circle(tmp_path: Path) -> None:
    """The checker itself: a circle through a relative import, an absolute one and a `from . import x`,
    across a subpackage; TYPE_CHECKING imports counted only when asked."""
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


def test_private_import_checker_on_a_planted_package(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    for sub in ("one", "two"):
        (root / sub).mkdir(parents=True)
        (root / sub / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "one" / "a.py").write_text("from pkg.one.b import _mine\nfrom pkg.two.c import _theirs, public\n"
                                       "from pkg.two import c as other\n\ndef f():\n    return other._hidden()\n")
    (root / "one" / "b.py").write_text("_mine = 1\n")
    (root / "two" / "c.py").write_text("_theirs = public = 2\n")
    assert sorted(private_imports(root)) == [("pkg.one.a", "pkg.two.c._hidden"), ("pkg.one.a", "pkg.two.c._theirs")]


@pytest.mark.parametrize(("deferred", "type_checking"), [(False, False), (True, False), (True, True)],
                         ids=["module-level", "with-deferred", "with-type-checking"])
def test_no_import_cycle_among_package_modules(deferred: bool, type_checking: bool) -> None:
    """No circle of module-level imports, none through imports deferred into functions (the leaderboard,
    leaderboard_output and html_report circle was one of those), none through TYPE_CHECKING imports."""
    cycles = import_cycles(package_graph(PACKAGE, deferred, type_checking))
    assert not cycles, "import circles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_dependencies_point_one_way() -> None:
    """Every import, deferred and TYPE_CHECKING ones included, goes to the module's own subpackage or to a
    lower layer of LAYERS."""
    graph = package_graph(PACKAGE, deferred=True, type_checking=True)
    wrong = sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                   if a != "rubric_engine" and unit(a) != unit(b) and RANK.get(unit(b), -1) <= RANK[unit(a)])
    assert not wrong, "imports against the layer order (docs/development.md, Code layout):\n" + "\n".join(wrong)


# The offline mock (models/mock.py) answers from the request it is sent (models/request.py: what a valid answer
# looks like rides on the request), so no layer above models/ tells it what to answer or needs to know it exists.
# The one reader left: report/provenance.py names the mock models of a stored run from their ids in summary.json.
MOCK_READERS = frozenset({"rubric_engine.report.provenance"})


def test_only_models_knows_the_mock() -> None:
    """No module outside models/ imports models/mock.py (MOCK_READERS: a stored run's ids, read back)."""
    graph = package_graph(PACKAGE, deferred=True, type_checking=True)
    found = sorted(a for a, targets in graph.items()
                   if "rubric_engine.models.mock" in targets and unit(a) != "models" and a not in MOCK_READERS)
    assert not found, ("modules outside models/ that know the mock (put what a valid answer looks like on the "
                       "request, models/request.py; ask a ModelSpec whether it is `offline`):\n" + "\n".join(found))


def test_no_private_name_imported_from_another_subpackage() -> None:
    """A `_name` is private to its subpackage: what another subpackage needs gets a public name."""
    found = sorted(f"{a} takes {b}" for a, b in private_imports(PACKAGE))
    assert not found, "private names across subpackages:\n" + "\n".join(found)


def test_pyproject_ships_every_subpackage() -> None:
    """pyproject lists the packages for the wheel by hand (conf/, benchmarks/ and data/ are mapped in):
    a subpackage left out would be missing from every installed copy."""
    listed = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    assert sorted(p for p in listed if p.count(".") == 1 and p.split(".")[1] not in ("conf", "benchmarks", "data")) \
        == [f"rubric_engine.{s}" for s in SUBPACKAGES]


# The evaluation shapes (issue #36): which conversation makes a reply and which verdict judges it are decided
# in rubric_engine/shapes/ (one module per shape, one registry) and validated in rubric_engine/spec/. Everywhere
# else asks the shape's strategy (shapes.of(spec)) or is handed a fact, so a new shape is a new module, not a
# new branch in twenty. The rule, by AST: no comparison of a verdict kind or conversation mode with a shape's
# name, no call of a shape predicate (is_score(spec), is_pairwise(spec), multi_turn(spec), ...), no isinstance
# dispatch on a shape's result type, and no test of a stored record for a key only some shape writes
# (`"games" in rec`): the record's reader asks the shape (shape.verdict.stored_games(rec), ...).
SHAPE_NAMES = frozenset({"criteria", "score", "pairwise", "single", "scripted", "simulated"})
SHAPE_FIELDS = frozenset({"kind", "mode", "verdict_kind", "conversation_mode"})
SHAPE_PREDICATES = frozenset({"multi_turn", *(f"is_{name}" for name in SHAPE_NAMES)})
SHAPE_RESULTS = frozenset({"PairResult", "ScoreResult"})
# record keys (records.py) a single verdict kind or conversation mode writes: pairwise, score, conversations
SHAPE_KEYS = frozenset({"games", "baseline_response", "turns", "score_votes", "transcript", "ended", "user_error"})
SHAPE_OWNERS = ("spec", "shapes", "records.py", "record")  # records.py, record/: the record's layout and codec
# Branch points on the shape not yet moved into rubric_engine/shapes/, module -> count. It may only shrink.
SHAPE_BRANCHES_LEFT: dict[str, int] = {}
# Reads of a shape's own record keys (shape_key_reads) outside the owners, module -> count. Not records: these
# dicts share a key's name with a record field (summary.json's sections, template variables, an answers row).
SHAPE_KEYS_NOT_RECORDS: dict[str, int] = {
    "report/console.py": 2,  # summary.json's `pairwise` and `anchored` sections: their counts of games
    "report/scales.py": 1,  # summary.json's `turns` table
    "judge/prompts.py": 1,  # the judge template's variables (`transcript`)
    "run/dialogue.py": 1,  # an answers row's `transcript` (a score-only run judges the session it holds)
}
# Still reading a record's dict by a shape's key (the run's compact values and the statistics the run and rescore
# share; issue #36): may only shrink.
SHAPE_KEY_READS_LEFT: dict[str, int] = {
    "stats/turns.py": 1,  # score_sections: each record's turns
}


def _names(node: ast.AST) -> set[str]:
    return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))}


def shape_branches(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for every place `tree` branches on the evaluation shape by the rule above."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            if (isinstance(node.ops[0], (ast.In, ast.NotIn)) and isinstance(node.left, ast.Constant)
                    and node.left.value in SHAPE_KEYS):
                found.append((node.lineno, f"tests a record for its {node.left.value} key"))
                continue
            sides = [node.left, *node.comparators]
            words = {c.value for side in sides for c in ast.walk(side) if isinstance(c, ast.Constant)
                     and isinstance(c.value, str)}
            fields = {s.attr if isinstance(s, ast.Attribute) else s.id for s in sides
                      if isinstance(s, (ast.Attribute, ast.Name))}
            if words & SHAPE_NAMES and fields & SHAPE_FIELDS:
                found.append((node.lineno, f"compares {'/'.join(sorted(fields & SHAPE_FIELDS))} with "
                                           f"{'/'.join(sorted(words & SHAPE_NAMES))}"))
        elif isinstance(node, ast.Match) and _names(node.subject) & SHAPE_FIELDS:
            words = {c.value for case in node.cases for c in ast.walk(case.pattern)
                     if isinstance(c, ast.Constant) and isinstance(c.value, str)}
            if words & SHAPE_NAMES:
                found.append((node.lineno, f"matches on {'/'.join(sorted(words & SHAPE_NAMES))}"))
        elif isinstance(node, ast.Call):
            func = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if func in SHAPE_PREDICATES:
                found.append((node.lineno, f"calls the shape predicate {func}()"))
            elif func == "isinstance" and len(node.args) == 2 and _names(node.args[1]) & SHAPE_RESULTS:
                found.append((node.lineno, f"isinstance on {'/'.join(sorted(_names(node.args[1]) & SHAPE_RESULTS))}"))
    return sorted(found)


def shape_key_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for every read of a key only one shape writes: `x.get("games")`, `x["turns"]` (a write,
    `rec["transcript"] = ...`, is the record's writer's). Outside the codec (record/) and shapes/, a stored record is
    read through its attributes and the shape's strategy (rec.judgment, shape.verdict.stored_games(rec), ...)."""
    found = []
    for node in ast.walk(tree):
        key = None
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and node.args and isinstance(node.args[0], ast.Constant)):
            key = node.args[0].value
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        if key in SHAPE_KEYS:
            found.append((node.lineno, f"reads the {key} key"))
    return sorted(found)


def test_shape_rule_finds_planted_branches() -> None:
    """The checker itself: each kind of branch is found, a comparison of an unrelated kind is not."""
    code = ('if spec.judge.verdict.kind == "pairwise": pass\n'
            'talk = conv.mode not in ("single", None)\n'
            'x = 1 if is_score(spec) else 2\n'
            'if isinstance(jr, (PairResult, int)): pass\n'
            'ok = c.kind == "rule" or e.kind == "retry" or mode == "rich"\n'
            'kinds = shape.verdict.name\n'
            'match spec.conversation.mode:\n    case "scripted": pass\n    case _: pass\n'
            'match hc.mode:\n    case "rich": pass\n')
    assert [line for line, _ in shape_branches(ast.parse(code))] == [1, 2, 3, 4, 7]


def test_shape_rule_finds_planted_key_tests() -> None:
    """The checker on stored records: a test for a key only one shape writes is a branch on the shape; a
    test for a key every record has, or for a key held in a variable, is not."""
    code = ('if "games" not in sample: pass\n'
            'said = rec["transcript"] if "transcript" in rec else None\n'
            'ok = "id" in rec and key in rec\n'
            'x = [r for r in rows if "user_error" in r]\n'
            'y = rec.get("turns")\n')
    assert shape_branches(ast.parse(code)) == [(1, "tests a record for its games key"),
                                                (2, "tests a record for its transcript key"),
                                                (4, "tests a record for its user_error key")]


def _outside_the_shape_owners(finder: Callable[[ast.AST], list[tuple[int, str]]]) -> tuple[dict[str, int], list[str]]:
    """What `finder` finds in each module outside the shapes' owners: the count per module and a line per hit."""
    counts: dict[str, int] = {}
    lines = []
    for path in MODULES:
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in SHAPE_OWNERS:
            continue
        hits = finder(ast.parse(path.read_text(encoding="utf-8")))
        if hits:
            counts[str(rel)] = len(hits)
        lines += [f"rubric_engine/{rel}:{line}: {what}" for line, what in hits]
    return counts, lines


def test_no_branch_on_the_evaluation_shape_outside_its_owners() -> None:
    """Outside rubric_engine/spec/, rubric_engine/shapes/ and the record codec, no module branches on the
    evaluation shape (see SHAPE_NAMES and SHAPE_KEYS above): it asks its shape (shapes/registry.py) or is given
    a fact. SHAPE_BRANCHES_LEFT may only shrink."""
    counts, lines = _outside_the_shape_owners(shape_branches)
    over = {m: n for m, n in counts.items() if n > SHAPE_BRANCHES_LEFT.get(m, 0)}
    assert not over, ("branches on the evaluation shape outside spec/ and shapes/ (ask the shape's strategy, "
                      "docs/development.md 'How to add a shape'):\n" + "\n".join(lines))
    stale = {m: n for m, n in SHAPE_BRANCHES_LEFT.items() if counts.get(m, 0) < n}
    assert not stale, f"fewer branches left than allowed: shrink SHAPE_BRANCHES_LEFT to {counts}"


def test_shape_key_rule_finds_planted_reads() -> None:
    """The checker on record readers: a read of a shape's own key is found (get or subscript), a write and a read
    of a key every record has are not."""
    code = ('played = rec.get("games") or []\n'
            'said = rec["transcript"]\n'
            'rec["ended"] = "stop"\n'
            'ok = rec.get("score"), rec["id"], rec.judgment\n'
            'n = len(sample.get("score_votes", {}))\n')
    assert shape_key_reads(ast.parse(code)) == [(1, "reads the games key"), (2, "reads the transcript key"),
                                                (5, "reads the score_votes key")]


def test_no_record_read_by_a_shape_key_outside_the_codec_and_the_shapes() -> None:
    """Outside rubric_engine/record/ (the codec and the judgment variants), rubric_engine/shapes/ and spec/, no
    module reads a stored record by a key only one shape writes: it reads the decoded Record's attributes and asks
    the shape (docs/development.md, "How to add a shape"). SHAPE_KEY_READS_LEFT may only shrink."""
    counts, lines = _outside_the_shape_owners(shape_key_reads)
    allowed = {m: SHAPE_KEYS_NOT_RECORDS.get(m, 0) + SHAPE_KEY_READS_LEFT.get(m, 0)
               for m in {*SHAPE_KEYS_NOT_RECORDS, *SHAPE_KEY_READS_LEFT}}
    over = {m: n for m, n in counts.items() if n > allowed.get(m, 0)}
    assert not over, ("a record read by a shape's own key outside record/ and shapes/ (read the decoded Record, "
                      "record/codec.py, and ask the shape):\n" + "\n".join(lines))
    stale = {m: n for m, n in allowed.items() if counts.get(m, 0) < n}
    assert not stale, f"fewer shape-key reads left than allowed: shrink SHAPE_KEY_READS_LEFT to {counts}"


def layout_table() -> str:
    """The code-layout table of docs/development.md, from the package's own docstrings: each subpackage
    (layer by layer, from the command line down) with its __init__ docstring, then its modules."""
    rows = ["| where | what lives there |", "| --- | --- |"]
    for layer in LAYERS:
        for name in layer:
            if (PACKAGE / name).is_dir():
                rows.append(f"| **`{name}/`** | {first_paragraph(PACKAGE / name / '__init__.py')} |")
                rows += [f"| `{name}/{p.name}` | {first_paragraph(p)} |"
                         for p in sorted((PACKAGE / name).glob("*.py")) if p.name != "__init__.py"]
            else:
                rows.append(f"| `{name}.py` | {first_paragraph(PACKAGE / f'{name}.py')} |")
    return "\n".join(rows) + "\n"


def test_layout_table_in_the_docs_matches_the_docstrings() -> None:
    """docs/development.md's layout table is generated, so a new module cannot be missing from it."""
    doc = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- layout: begin[^>]*-->\n(.*?)<!-- layout: end -->", doc, re.S)
    assert found, "docs/development.md lost its layout markers"
    assert found.group(1) == layout_table(), ("the layout table is out of date: paste the output of "
                                              "`python tests/project/test_structure.py` between the markers")


if __name__ == "__main__":
    print(layout_table(), end="")
