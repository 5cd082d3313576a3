"""docs/authoring.md's key table names every key of `benchmark.yaml`: a walk over the spec schema's pydantic models
(spec/schema.py, the models it nests) checks each key path, so a key added to the schema without a row fails here.

A path is documented when a row of the table names it in its first cell, or names an ancestor there and every
remaining part of the path in a code span of that row (`data.fields` | ... `turn_role` ... documents
data.fields.turn_role)."""

from __future__ import annotations

import re
import types
import typing
from typing import Any

from pydantic import BaseModel

from conftest import REPO
from rubric_engine.spec.schema import BenchmarkSpec

AUTHORING = REPO / "docs" / "authoring.md"
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models inside a field's type (X, X | None, list[X], dict[str, X])."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, list, dict):
        args = typing.get_args(annotation)
        args = args[1:] if typing.get_origin(annotation) is dict else args  # a dict's values, not its keys
        return [m for a in args for m in _models(a)]
    return []


def key_paths(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every key path of the schema, as the YAML spells it (aliases), lists and dict values walked into."""
    out = []
    for name, field in model.model_fields.items():
        path = (*prefix, field.alias or name)
        out.append(path)
        for sub in _models(field.annotation):
            out += key_paths(sub, path)
    return out


def _table_rows() -> list[tuple[set[str], set[str]]]:
    """(keys named in the first cell, words of every code span of the row) for each row of the key table."""
    text = AUTHORING.read_text(encoding="utf-8")
    table = text[text.index("## 2. The keys of `benchmark.yaml`"):text.index("## 3. ")]
    rows = []
    for line in table.splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        keys = {k.split(":")[0].strip() for k in re.findall(r"`([^`]+)`", first)}
        words = {w for span in re.findall(r"`([^`]+)`", line) for w in _WORD.findall(span)}
        rows.append((keys, words))
    return rows


def documented(path: tuple[str, ...], rows: list[tuple[set[str], set[str]]]) -> bool:
    """Named by a row (itself, or an ancestor plus the rest in the row's code spans); a mapping such as `scoring`
    is documented through rows of its keys (`scoring.formula`)."""
    dotted = ".".join(path)
    if any(k.startswith(dotted + ".") for keys, _ in rows for k in keys):
        return True
    for keys, words in rows:
        for cut in range(len(path), 0, -1):
            if ".".join(path[:cut]) in keys and set(path[cut:]) <= words:
                return True
    return False


def test_every_key_of_the_schema_is_in_the_key_table() -> None:
    rows = _table_rows()
    missing = [".".join(p) for p in key_paths(BenchmarkSpec) if not documented(p, rows)]
    assert not missing, f"docs/authoring.md section 2 has no row (or mention in its row) for: {missing}"


def test_the_walk_sees_nested_keys_and_the_check_can_fail() -> None:
    paths = {".".join(p) for p in key_paths(BenchmarkSpec)}
    assert {"judge.repeats", "judge.tie", "report.breakdowns.groups", "data.fields.turn_role",
            "report.decay.from", "judge.model.revision"} <= paths
    assert not documented(("judge", "no_such_key"), _table_rows())
