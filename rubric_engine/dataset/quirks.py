"""Whole-file data checks and counted warnings, gathered row by row while a data file is validated.

Why apart from row parsing (dataset/load.py): a row is checked on its own, but some problems only show
across rows (a column only some rows lack) and every known quirk is reported once, with a count,
never silently fixed.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rubric_engine.datatypes import Question
from rubric_engine.errors import DataError, SpecError
from rubric_engine.spec.facts import facts_of
from rubric_engine.spec.aggregation import rules_of

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["DataQuirks"]


@dataclass
class DataQuirks:
    """What the whole-file checks and the counted warnings need, gathered row by row."""

    empty_scen: dict[str, list[str]] = field(default_factory=dict)
    absent: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    weighted_rule: list[str] = field(default_factory=list)
    only_negative: int = 0
    no_rule: list[str] = field(default_factory=list)
    last_not_user: list[str] = field(default_factory=list)
    item_tags: set[str] = field(default_factory=set)
    example_tags: set[str] = field(default_factory=set)
    columns: set[str] = field(default_factory=set)  # of the rows, and of their rubric items
    item_columns: set[str] = field(default_factory=set)

    def note(self, spec: BenchmarkSpec, q: Question) -> None:
        self.columns.update(q.source_row)
        items = q.source_row.get(spec.data.fields.rubric)
        if isinstance(items, list):
            self.item_columns.update(k for item in items if isinstance(item, dict) for k in item)
        if not facts_of(spec).conversation and spec.data.roles[q.dialogue[-1].role] != "user":  # a conversation
            # goes on after its prefix (and may have none), so a prefix ending on the assistant is expected
            self.last_not_user.append(q.id)
        signs: dict[str, bool] = {}
        for c in q.criteria:
            if c.ability is not None:
                signs[c.ability] = signs.get(c.ability, False) or (c.weight or 0) > 0
            self.item_tags.update(c.tags)
        self.example_tags.update(q.tags)
        self.only_negative += sum(1 for positive in signs.values() if not positive)
        if spec.failure_rules and not any(rules_of(c.rule, c.tags, spec.failure_rules) for c in q.criteria):
            self.no_rule.append(q.id)

    def check_mapped(self, spec: BenchmarkSpec, file: Path) -> None:
        """A data.fields mapping a report breakdown depends on names a column no row has but one close to it
        (a misspelt field): one error naming the spec's key, the bad name and the closest of the data's columns,
        not a warning that leaves a table empty. A column no row has and none resembles (a per-subset file
        without its subset column) stays the counted warning of `finish`."""
        f = spec.data.fields
        needs = {"subset": ("subset", f.subset, self.columns), "scenario": ("scenario", f.scenario, self.columns),
                 "example_tag": ("example_tags", f.example_tags, self.columns),
                 "item_tag": ("item_tags", f.item_tags, self.item_columns)}
        uses = [(i, b.id, b.by) for i, b in enumerate(spec.report.breakdowns)]
        uses += [(None, "report.decay", "subset")] if spec.report.decay is not None else []
        for i, what, by in uses:
            key, name, columns = needs.get(by, (None, None, set()))
            close = difflib.get_close_matches(name, sorted(columns), n=1) if name and name not in columns else []
            if not close:
                continue
            origin = spec.origin(("data", "fields", key))
            where = f"{origin[0]}:{origin[1]}" if origin else str(spec.files[-1] if spec.files else spec.name)
            user = f"report.breakdowns[{i}] ({what}, by: {by})" if i is not None else what
            raise SpecError(where, f"data.fields.{key}", f"no row of {file} has this column, and {user} depends on "
                            "it", value=name, fix=f"did you mean {close[0]!r}? the data's "
                            f"{'item ' if key == 'item_tags' else ''}columns: {', '.join(sorted(columns))}")

    def finish(self, file: Path, rows: int) -> list[str]:
        """A column only some rows lack is an error; the rest are counted warnings, never silent fixes."""
        out = []
        for (k, name), lines in self.absent.items():
            if len(lines) < rows:
                raise DataError(str(file), f"missing field {name!r} (other rows have it)", line=lines[0],
                                fix=f"add it to every row, or fix data.fields.{k} in the spec")
            out.append(f"no row has the field {name!r} (data.fields.{k}): {k} left empty for all "
                       f"{rows} questions, so nothing can be selected or reported by it")
        out += [f"{len(ids)} question(s) have an empty {name!r}: {_ids(ids)}" for name, ids in self.empty_scen.items()]
        if self.only_negative:
            out.append(f"{self.only_negative} (question, ability) pair(s) have only negative-weight items (max = 0): "
                       "such an ability can only lose points in that question")
        if self.no_rule:
            out.append(f"{len(self.no_rule)} question(s) have no failure-rule item, so no failure rule can fire "
                       f"there: {_ids(self.no_rule)}")
        if self.weighted_rule:
            out.append(f"{len(self.weighted_rule)} failure-rule item(s) carry a weight "
                       f"(question:weight {_ids(self.weighted_rule)})")
        if self.last_not_user:
            out.append(f"{len(self.last_not_user)} dialogue(s) do not end with a 'user' turn: "
                       f"{_ids(self.last_not_user)}")
        return out


def _ids(ids: Sequence[str], n: int = 5) -> str:
    return ", ".join(ids[:n]) + (f", ... (+{len(ids) - n})" if len(ids) > n else "")
