"""The range a report draws its numbers on, and the tables of scores on a scale: per turn and per group, each
with its interval.

Why apart from report/console.py: a run whose judge rates on a declared scale carries what other runs do not
(the scale, a mean per candidate turn, the judgments behind each number and a 95% interval per group, from
summary.json's `scale`, `turns` and `group_intervals`); the console, the leaderboard and report.html draw them
from here, so all say the same. `score_range` is the one answer to "from what to what do this page's numbers
run": the stated scale, the heatmap's colours and the charts' score axes all take it from the runs' own data,
never from the evaluation shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rubric_engine.text.terminal import shown

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["ScoreRange", "score_range", "scale_tables", "print_scale", "leaderboard_scale_tables", "turn_table"]

Row = tuple[str, Any, Any, Any, Any]  # label, score, lo, hi, count


@dataclass(frozen=True)
class ScoreRange:
    """The bottom and top of the scale a page's question and group scores lie on (after scoring.scale)."""

    lo: float
    hi: float

    @property
    def text(self) -> str:
        """'1–10', '0–100': how a page states its scale."""
        return f"{self.lo:g}–{self.hi:g}"

    @property
    def bounds(self) -> tuple[float, float]:
        return self.lo, self.hi

    def fraction(self, value: float) -> float:
        """Where value lies between the bottom (0) and the top (1) of the range, clipped to it."""
        span = self.hi - self.lo
        return max(0.0, min(1.0, (value - self.lo) / span if span else 0.0))


def score_range(rows: Sequence[Any], scale: float) -> ScoreRange:
    """The range of the rows' runs: the declared range their summaries carry (summary.json `scale`, the judge's
    min and max; the union when runs differ) times scoring.scale, else 0 to scoring.scale (a score that is a
    fraction of points, or a win rate)."""
    declared = [sc for r in rows if getattr(r, "run", None) is not None
                for sc in [(r.run.summary or {}).get("scale") or {}] if sc.get("min") is not None]
    if not declared:
        return ScoreRange(0.0, float(scale))
    lo, hi = min(float(sc["min"]) for sc in declared), max(float(sc["max"]) for sc in declared)
    return ScoreRange(lo * scale, hi * scale)


def _fmt(x: Any) -> str:
    return "—" if x is None else f"{x:.2f}"


def _label(labels: Mapping[str, str], locale: str, default: str) -> str:
    return str(labels.get(locale) or labels.get("en") or default)


def scale_tables(summary: Mapping[str, Any], spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """[{id, title, count (what the count column counts), rows: [(label, score, lo, hi, count)]}]: turns,
    then the scenario (category) table, then every declared breakdown."""
    locale, report = spec.get("locale", "en"), spec.get("report") or {}
    intervals = summary.get("group_intervals") or {}
    out: list[dict[str, Any]] = []
    turns = summary.get("turns") or {}
    if len(turns) > 1 or (summary.get("scale") or {}).get("scope") in ("each_turn", "turn"):
        out.append({"id": "turns", "title": "Turns", "count": "judgments",
                    "rows": [(f"turn {k}", t.get("mean"), t.get("lo"), t.get("hi"), t.get("judgments"))
                             for k, t in turns.items()]})
    declared = report.get("breakdowns") or []
    by_scenario = next((b for b in declared if b.get("by") == "scenario"), None)  # titled as the spec names it,
    scenario_title = _label(by_scenario.get("labels") or {}, locale, "Scenarios") if by_scenario else "Scenarios"
    tables = [("scenarios", scenario_title, summary.get("scenarios") or {}, report.get("scenarios") or {}, "")]
    tables += [(b["id"], _label(b.get("labels") or {}, locale, b["id"]), (summary.get("breakdowns") or {}).get(b["id"]) or {},
                b.get("groups") or {}, b.get("prefix") or "") for b in declared if b is not by_scenario]
    for tid, title, scores, names, prefix in tables:
        if not scores:
            continue
        iv = intervals.get(tid) or {}
        rows = [(_label(names.get(g) or {}, locale, g[len(prefix):] or g), v, (iv.get(g) or {}).get("lo"),
                 (iv.get(g) or {}).get("hi"), (iv.get(g) or {}).get("questions")) for g, v in scores.items()]
        out.append({"id": tid, "title": title, "count": "questions", "rows": rows})
    return out


def print_scale(summary: Mapping[str, Any], spec: Mapping[str, Any], console: "Console") -> None:
    """The score run's tables: each group's mean on the declared scale, its 95% interval and its count."""
    from rich.table import Table

    sc, times = summary.get("scale") or {}, float((spec.get("scoring") or {}).get("scale", 1))
    scale = f"{sc['min'] * times:g}-{sc['max'] * times:g}" if sc.get("min") is not None else ""  # as the means are
    for table in scale_tables(summary, spec):
        t = Table(title=f"{shown(table['title'])} (scale {scale})")
        for col, right in ((shown(table["title"]), False), ("Mean", True), ("95% interval", True),
                           (table["count"], True)):
            t.add_column(col, justify="right" if right else "left")
        for label, value, lo, hi, n in table["rows"]:
            t.add_row(shown(label), _fmt(value), "—" if lo is None else f"{_fmt(lo)}-{_fmt(hi)}",
                      "—" if n is None else str(n))
        console.print(t)
    errors = (summary.get("counts") or {}).get("turn_errors")
    if errors:
        console.print(f"[yellow]{errors} judgment(s) failed after re-asks and are left out of every mean; "
                      "see the `turns` of samples.jsonl.", highlight=False, soft_wrap=True)


def leaderboard_scale_tables(rows: Sequence[Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) for the leaderboard: per-turn and per-category means with their intervals (the
    declared breakdowns have their tables there already)."""
    per_run = [(r.label, [t for t in scale_tables(r.run.summary, r.run.spec) if t["id"] in ("turns", "scenarios")])
               for r in rows if (r.run.summary or {}).get("scale")]
    if not per_run:
        return []
    out = []
    ids = list(dict.fromkeys(t["id"] for _, tables in per_run for t in tables))
    for tid in ids:
        found = [(label, next((t for t in tables if t["id"] == tid), None)) for label, tables in per_run]
        title = next(t["title"] for _, t in found if t is not None)
        groups = list(dict.fromkeys(row[0] for _, t in found if t is not None for row in t["rows"]))
        body = []
        for label, t in found:
            cells = {row[0]: row for row in (t["rows"] if t else [])}
            body.append([label, *[f"{_fmt(cells[g][1])} [{_fmt(cells[g][2])}, {_fmt(cells[g][3])}]" if g in cells
                                  else "—" for g in groups]])
        out.append((title, ["Model", *groups], body))
    return out


def turn_table(rows: Sequence[Any]) -> tuple[list[str], list[list[str]]] | None:
    """(header, rows) for report.html: each run's mean per candidate turn (summary.json `turns`) and its overall,
    each with its interval; None when no run was graded per turn."""
    turns = next((t for t in leaderboard_scale_tables(rows) if t[0] == "Turns"), None)
    if turns is None:
        return None
    by_label = {r.label: r for r in rows}
    return [*turns[1], "overall"], [[*cells, f"{_fmt(by_label[cells[0]].overall)} [{_fmt(by_label[cells[0]].ci_lo)}, "
                                             f"{_fmt(by_label[cells[0]].ci_hi)}]"] for cells in turns[2]]
