"""`rubric-engine items`, its files: items.csv, items.md, items.html, items.json and hard_set.ids.

Why apart from validity/itemsdiag.py: that module reads runs and computes; this one runs the command and only
renders the typed result. items.md opens with one paragraph on how many criteria carry no signal and where;
items.html is the same report as one self-contained page (the renderer `agree` uses, which escapes every
text); items.json is what the leaderboard's report.html shows as its "Rubric items" section. CSV cells go
through text/csvcells.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rubric_engine.stats.rubricitems import DEAD, FLAT_R, FLAT_SPREAD, SATURATED, CriterionStats
from rubric_engine.store.layout import write_json, write_text
from rubric_engine.text.csvcells import csv_row
from rubric_engine.validity.itemsdiag import ItemsResult, compute_items

__all__ = ["write_items", "summary_paragraph", "render_markdown", "csv_text", "ids_override", "items_command", "ITEMS_FILES"]

ITEMS_FILES = ("items.csv", "items.md", "items.html", "items.json")
TOP = 25  # criteria listed in the review-first table of items.md (items.csv has them all)
_PLAIN_ID = re.compile(r"^[A-Za-z0-9_.-]+$")


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def _r(x: float | None) -> str:
    return "—" if x is None else f"{x:+.2f}"


def _where(rows: list[CriterionStats], key: str, top: int = 3) -> str:
    totals = Counter(getattr(c, key) for c in rows)
    bad = Counter(getattr(c, key) for c in rows if c.no_signal)
    worst = sorted(bad, key=lambda g: (-bad[g] / totals[g], -bad[g], g))[:top]
    return ", ".join(f"{g} ({bad[g]} of {totals[g]})" for g in worst)


def summary_paragraph(result: ItemsResult) -> str:
    """The one paragraph at the top of items.md: how many criteria carry no signal, why, and where."""
    rows = result.criteria
    n, dead = len(rows), sum(c.flag == "dead" for c in rows)
    sat = sum(c.flag == "saturated" for c in rows)
    flat = sum(c.no_signal and not c.flag for c in rows)
    none = dead + sat + flat
    text = (f"{none} of {n} criteria ({_pct(none / n if n else None)}) carry no signal in {result.replies} judged "
            f"replies of {len(result.models)} model(s): {sat} saturated (met by at least {SATURATED:.0%} of "
            f"replies), {dead} dead (met by at most {DEAD:.0%}), {flat} that do not separate models (best-worst "
            f"model spread under {FLAT_SPREAD * 100:.0f} points and corrected item-total r under {FLAT_R:.2f}).")
    if none:
        text += (f" Most affected abilities: {_where(rows, 'group')}; questions: {_where(rows, 'qid')}."
                 " Review them first (the order below).")
    negative = sum(c.discrimination is not None and c.discrimination < 0 for c in rows)
    if negative:
        text += f" {negative} criteria go against the rest of their rubric (negative r)."
    return text


def ids_override(ids: list[str]) -> str:
    """The ids as one `ids=[...]` command-line override (ids with other characters quoted)."""
    quoted = [i if _PLAIN_ID.match(i) else "'" + i.replace("\\", "\\\\").replace("'", "\\'") + "'" for i in ids]
    return f"ids=[{','.join(quoted)}]"


def _criteria_table(result: ItemsResult, rows: list[CriterionStats]) -> list[str]:
    head = "| # | question | criterion | text | weight | ability | replies | pass | " + " | ".join(
        _cell(m) for m in result.models) + " | r | spread | flag | flip | jurors | humans | score |"
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    for c in rows:
        flip = "—" if c.flip_rate is None else f"{_pct(c.flip_rate)} ({c.flip_units})"
        jur = "—" if c.juror_disagreement is None else f"{_pct(c.juror_disagreement)} ({c.juror_units})"
        hum = "—" if c.human_disagreement is None else f"{_pct(c.human_disagreement)} ({c.human_units})"
        flag = c.flag or ("no separation" if c.no_signal else "")
        w = "rule" if c.weight is None else f"{c.weight:g}"
        out.append(f"| {c.review_rank} | {_cell(c.qid)} | {c.index} | {_cell(c.text[:120])} | {w} | {_cell(c.group)} | "
                   f"{c.replies} | {_pct(c.pass_rate)} | " + " | ".join(_pct(c.per_model.get(m)) for m in result.models)
                   + f" | {_r(c.discrimination)} | {_pct(c.spread)} | {flag} | {flip} | {jur} | {hum} | "
                   f"{c.review_score:.2f} |")
    return out


def _hard_section(result: ItemsResult) -> list[str]:
    h = result.hard
    if h is None:
        return []
    lines = ["", f"## Proposed hard set (hard={h.fraction:g})", "",
             f"{len(h.ids)} of {h.eligible} questions scored by every model (target {h.target}; {h.discriminating} "
             f"discriminate, best-worst model spread at least 5 points), chosen for the lowest mean score of the "
             f"strongest model(s): {_cell(', '.join(h.strong_models))}. Run it with the override in hard_set.ids.", "",
             "| question | strong models' score |", "|---|---:|"]
    lines += [f"| {_cell(q)} | {h.strong_scores[q] * result.scale:.1f} |" for q in h.ids]
    for row in result.hard_compare:
        lines += ["", f"Against the declared subset {_cell(row['subset'])!s}: {row['overlap']} of {row['proposed']} "
                  f"proposed questions are in it ({row['published']} questions); Jaccard {row['jaccard']:.2f}."]
        if "decay_published" in row:
            lines += ["", f"| model | decay on {_cell(row['subset'])} (declared) | decay on the proposal |",
                      "|---|---:|---:|"]
            for m in result.models:
                a, b = row["decay_published"].get(m), row["decay_proposed"].get(m)
                lines.append(f"| {_cell(m)} | {'—' if a is None else f'{a:.1f}%'} | {'—' if b is None else f'{b:.1f}%'} |")
            lines += ["", f"Decay: (mean on the other questions - mean on the set) / mean on the "
                      f"{'set' if row['decay_base'] == row['subset'] else 'other questions'} x 100, as the spec declares."]
    return lines


def render_markdown(result: ItemsResult) -> str:
    lines = [f"# Rubric items: {_cell(result.benchmark)}", "", summary_paragraph(result), ""]
    lines += [f"- warning: {_cell(w)}" for w in result.warnings]
    lines += ["", f"Runs: {len(result.runs)}; models: {_cell(', '.join(result.models))}; replies judged: "
              f"{result.replies}" + (f"; labels: {_cell(', '.join(result.labels))}" if result.labels else ""), "",
              f"## Review first (top {min(TOP, len(result.criteria))} of {len(result.criteria)}; all in items.csv)", "",
              "pass: share of replies the judge marked met; r: corrected item-total point-biserial; spread: best minus "
              "worst model pass rate; flip: repeats of one juror that disagree; jurors: replies the jury split on; "
              "humans: judge verdicts against the human majority; score: the review-first score.", ""]
    lines += _criteria_table(result, result.criteria[:TOP])
    lines += ["", "## Questions", "", "difficulty: mean over models of the model's mean score; r: the reply's score "
              "against its model's mean score on the other questions.", "",
              "| question | subset | replies | difficulty | spread | r | criteria without signal |", "|---|---|---:|---:|---:|---:|---:|"]
    for q in result.questions:
        diff = "—" if q.mean_score is None else f"{q.mean_score * result.scale:.1f}"
        spread = "—" if q.spread is None else f"{q.spread * result.scale:.1f}"
        lines.append(f"| {_cell(q.qid)} | {_cell(q.subset)} | {q.replies} | {diff} | {spread} | {_r(q.discrimination)} | "
                     f"{q.no_signal_criteria} of {q.criteria} |")
    lines += ["", "## Internal consistency by group", "", "Cronbach's alpha over the group's criteria with the models "
              "as examinees (KR-20 where every cell is 0 or 1); 95% bootstrap interval over models.", "",
              "| group | kind | criteria | models | alpha | 95% interval |", "|---|---|---:|---:|---:|---|"]
    for g in result.groups:
        iv = g.interval
        ci = "—" if iv.lo is None else f"[{iv.lo:.2f}, {iv.hi:.2f}]"
        alpha = "—" if iv.alpha is None else f"{iv.alpha:.2f}" + (" (KR-20)" if iv.binary else "")
        lines.append(f"| {_cell(g.group)} | {g.kind} | {g.criteria} | {g.models} | {alpha} | {ci} |")
    lines += _hard_section(result)
    return "\n".join(lines) + "\n"


def csv_text(result: ItemsResult) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["review_rank", "question", "criterion_index", "text", "weight", "ability", "tags", "replies",
                "pass_rate", *[f"pass_rate:{m}" for m in result.models], "discrimination_r", "model_spread", "flag",
                "no_signal", "flip_rate", "flip_units", "juror_disagreement", "juror_units", "human_disagreement",
                "human_units", "review_score"])
    for c in result.criteria:
        w.writerow(csv_row([c.review_rank, c.qid, c.index, c.text, c.weight, c.group, ";".join(c.tags), c.replies,
                            c.pass_rate, *[c.per_model.get(m) for m in result.models], c.discrimination, c.spread,
                            c.flag, c.no_signal, c.flip_rate, c.flip_units, c.juror_disagreement, c.juror_units,
                            c.human_disagreement, c.human_units, round(c.review_score, 4)]))
    return buf.getvalue()


def write_items(result: ItemsResult, out: Path) -> dict[str, Path]:
    from rubric_engine.validity.agree_report import render_html

    out.mkdir(parents=True, exist_ok=True)
    markdown = render_markdown(result)
    files = {name: out / name for name in ITEMS_FILES}
    write_text(files["items.csv"], csv_text(result))
    write_text(files["items.md"], markdown)
    write_text(files["items.html"], render_html(markdown, f"Rubric items: {result.benchmark}"))
    write_json(files["items.json"], {**json.loads(json.dumps(result.to_dict(), default=str)),
                                     "summary": summary_paragraph(result)})
    if result.hard is not None:
        files["hard_set.ids"] = out / "hard_set.ids"
        write_text(files["hard_set.ids"], ids_override(result.hard.ids) + "\n")
    return files


def items_command(dirs: Sequence[Path], out: Path, label_files: Sequence[Path] = (), hard: float | None = None,
                  n_boot: int = 1000, seed: int = 0) -> ItemsResult:
    """Compute and write items.csv, items.md, items.html, items.json (and hard_set.ids) into `out`."""
    result = compute_items(dirs, label_files, hard, n_boot, seed)
    write_items(result, out)
    return result
