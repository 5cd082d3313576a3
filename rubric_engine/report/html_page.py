"""The leaderboard as one self-contained HTML file.

Self-contained because reports get mailed, attached to CI runs and opened offline: the CSS is
inline, the charts are embedded as base64 PNG data URIs, the CJK glyphs the page uses as a base64 font
(report/fonts.py), small inline scripts (html_views.SCRIPT, questions_view.SCRIPT) add sorting,
filtering, search, the model pickers and the error / failure-rule filters, and nothing points to any URL.
Every piece of text from a run (dialogue, model output, judge reasoning, labels) goes through html.escape,
because model outputs are untrusted text. The drill-down uses <details> so the page stays readable without
JavaScript. Each declared breakdown gets one view under its declared label: a heatmap with numbers, or for
subsets the table with intervals and decay.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from rubric_engine.report import html_views as views
from rubric_engine.report.calls_view import clipped, run_calls
from rubric_engine.report.controls import control_tables
from rubric_engine.report import provenance as prov
from rubric_engine.report import questions_view as qview
from rubric_engine.report.fonts import font_face_head
from rubric_engine.report.items_view import load_items_section
from rubric_engine.report.judges_view import judges_html
from rubric_engine.report.scales import score_range, turn_table
from rubric_engine.report.transcript import transcript_html
from rubric_engine.record.types import Record
from rubric_engine.results import intervals as nested_runs
from rubric_engine.results.leaderboard import fmt
from rubric_engine.scoring.aggregate import ability_ids
from rubric_engine.shapes.base import Shape
from rubric_engine.shapes.registry import stored_shape
from rubric_engine.store import layout as rundir
from rubric_engine.text.pagefonts import PAGE_FONTS

if TYPE_CHECKING:
    from rubric_engine.results.leaderboard import Leaderboard, Row

__all__ = ["render_html", "write_html"]

_CSS = """
body{font-family:__PAGE_FONTS__;margin:24px auto;max-width:1200px;
color:#1d1d1f;line-height:1.4;padding:0 16px}
h1{font-size:1.6em}h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:8px 0;font-size:0.9em}
th,td{border:1px solid #d0d0d0;padding:4px 8px;text-align:right;vertical-align:top}
th{background:#f3f3f5;white-space:nowrap}td.t,th.t{text-align:left}
tr:nth-child(even) td{background:#fafafa}
.note{color:#555;font-size:0.9em}.warn{color:#8a4b00}
.err{background:#ffe9e9 !important;border-left:4px solid #d00}
.cat{background:#fff4dc !important}
details{margin:4px 0}details.model>summary{font-size:1.1em;font-weight:600;cursor:pointer}
details.q{margin-left:16px;border:1px solid #e4e4e4;padding:4px 8px;border-radius:4px}
pre{font-family:inherit;white-space:pre-wrap;word-break:break-word;background:#f7f7f9;padding:8px;border-radius:4px}
.hit{color:#0a6b0a;font-weight:600}.bad{color:#b00000;font-weight:600}.miss{color:#777}
img{max-width:100%;height:auto;border:1px solid #eee}
""".replace("__PAGE_FONTS__", PAGE_FONTS)


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _f(x: float | None, digits: int = 2) -> str:
    return _e(fmt(x, digits))


def _table(head: Iterable[str], rows: Iterable[Iterable[str]], left: Iterable[int] = (0,), sortable: bool = True) -> str:
    """Cells are already-escaped HTML; the `left` columns are text (left-aligned), the rest numbers;
    sortable tables get click-to-sort headers and a filter box from the inline script."""
    text = set(left)

    def cls(i: int) -> str:
        return ' class="t"' if i in text else ""

    sort = ' class="sortable"' if sortable else ""
    out = [f'<div class="tw"><table{sort}><thead><tr>', *(f"<th{cls(i)}>{h}</th>" for i, h in enumerate(head)), "</tr></thead><tbody>"]
    for row in rows:
        out.append("<tr>" + "".join(f"<td{cls(i)}>{c}</td>" for i, c in enumerate(row)) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _vetoes(r: Any, lb: "Leaderboard") -> str:
    """The catastrophic count, and each failure rule's (veto group's) count beside it when the spec has several."""
    rules = lb.taxonomy.rules
    each = ", ".join(f"{_e(label)} {r.vetoes.get(rid, 0)}" for rid, label in rules) if len(rules) > 1 else ""
    return str(r.counts["catastrophic"]) + (f" ({each})" if each and r.vetoes else "")


def _leaderboard(lb: "Leaderboard") -> str:
    ci = f"{100 * (1 - lb.alpha):.0f}% CI"
    cat = lb.taxonomy.has_rules
    head = ["#", "Model", "Judge", "Overall", _e(ci), "Scored", "Judge errors", "Candidate errors",
            *(["Catastrophic"] if cat else []), "Cost $"]
    rows = []
    for r in lb.rows:
        c = r.counts
        rows.append([str(r.rank), _e(r.label), _e(r.judge), f"<b>{_f(r.overall)}</b>",
                     f"[{_f(r.ci_lo)}, {_f(r.ci_hi)}]", f"{c['scored']}/{c['questions']}",
                     f'<span class="{"warn" if c["judge_errors"] else ""}">{c["judge_errors"]}</span>',
                     str(c["candidate_errors"]), *([_vetoes(r, lb)] if cat else []), _e(r.cost_text())])
    pairs = [[_e(p.a), _e(p.b), _f(p.diff), f"[{_f(p.lo)}, {_f(p.hi)}]", "yes" if p.excludes_zero else "no",
              str(p.questions), _e(p.error or ("within judge noise" if p.within_noise else ""))] for p in lb.pairs]
    return (_table(head, rows, left=(1, 2))
            + f'<p class="note">Intervals: percentile bootstrap, questions resampled with replacement '
              f"({lb.n_boot} resamples, seed {lb.seed}); the aggregation is re-run on every resample. "
              "Questions with a judge or candidate error are left out of the scores and counted above. "
              "Cost “+ ?”: the price of one part (candidate or judge) was unknown, so the sum is partial."
              + (" " + _e(nested) if (nested := nested_runs.note([r.run for r in lb.rows])) else "") + "</p>"
            + ("<h3>Paired differences (adjacent ranks)</h3>"
               + _table(["A", "B", "A − B", _e(ci), "Excludes 0", "Questions", "Note"], pairs, left=(0, 1, 6))
               + '<p class="note">Both models are resampled with the same question draws, on the questions '
                 "scored for both; an interval that excludes 0 means the ranking of the pair is resolved.</p>"
               if len(lb.rows) > 1 else ""))


def _subsets(lb: "Leaderboard", ci: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    t = lb.taxonomy
    names = list(dict.fromkeys([*t.subsets, *(s for r in lb.rows for s in r.subsets)]))
    head = ["Model", *[_e(t.subset_labels.get(s, s)) for s in names]]
    note = ""
    if t.decay:
        src, dst, base = (_e(t.subset_labels.get(s, s)) for s in t.decay)
        head.append(f"Decay % (base: {base})")
        note = (f'<p class="note">Decay % = ({src} − {dst}) / {base} × 100. The base matters: the same drop is '
                f"a larger percentage of the lower score. This report uses <b>{base}</b> as the base.</p>")
    def cell(r: "Row", s: str) -> str:
        iv = (ci or {}).get(r.label, {}).get(s)
        return _f(r.subsets.get(s)) + (f' <span class="note">[{_f(iv[0])}, {_f(iv[1])}]</span>' if iv else "")

    rows = [[_e(r.label), *[cell(r, s) for s in names], *([_f(r.decay_pct, 1)] if t.decay else [])]
            for r in lb.rows]
    if ci:
        note += (f'<p class="note">Brackets: {100 * (1 - lb.alpha):.0f}% bootstrap interval of each subset score '
                 "(that subset's questions resampled), drawn as error bars in the subsets chart.</p>")
    return _table(head, rows) + note


def views_of(lb: "Leaderboard") -> list[tuple[str, str, str]]:
    """(id, title, by) of the breakdowns to show: the spec's declared ones under their declared labels, else the
    tables a taxonomy, declared subsets and the data's scenarios give."""
    t = lb.taxonomy
    if t.breakdowns:
        return list(t.breakdowns)
    out = [("dimensions", "Dimensions", "dimension"), ("abilities", "Abilities", "ability")] if t.dimensions else []
    out += [("subsets", "Subsets", "subset")] if t.has_subsets else []
    return out + ([("scenarios", "Scenarios", "scenario")] if any(r.scenarios for r in lb.rows) else [])


def _tables(lb: "Leaderboard", subset_ci: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
    """One view per breakdown (views_of): a heatmap with scores and counts, or for subsets the table with each
    subset's interval and the decay; then the turns and Bradley-Terry tables when the runs have them."""
    out = []
    for bid, title, by in views_of(lb):
        view = _subsets(lb, subset_ci) if by == "subset" else views.heatmap(lb, title, by, bid)
        if view:
            out += [f"<h2>{_e(title)}</h2>", view]
    turns = turn_table(lb.rows)  # scores on a scale graded per turn: turn 1, turn 2, ..., overall with intervals
    if turns is not None:
        out += ["<h2>Turns</h2>", _table(map(_e, turns[0]), [[_e(c) for c in row] for row in turns[1]])]
    if lb.bradley_terry is not None:  # pairwise runs against one baseline
        bt = lb.bradley_terry
        out += [f"<h2>Bradley-Terry ({_e(bt['baseline'])} = {bt['anchor']:g})</h2>",
                _table(["Model", "Rating", "Interval"], [[_e(x["label"]) + (" (baseline)" if x["baseline"] else ""),
                        _f(x["rating"], 1), f"[{_f(x['lo'], 1)}, {_f(x['hi'], 1)}]"] for x in bt["ratings"]]),
                f'<p class="note">{_e(bt["method"])}</p>']
    for title, head, rows in control_tables(lb):  # style_control / length_control (results/style.py)
        out += [f"<h2>{_e(title)}</h2>", _table(map(_e, head), [[_e(c) for c in row] for row in rows])]
    return out


def _images(images: Mapping[str, Path]) -> str:
    out = []
    for name, path in images.items():
        data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
        kind = "image/svg+xml" if Path(path).suffix == ".svg" else "image/png"  # an <img> never runs an SVG's scripts
        out.append(f'<figure><img alt="{_e(name)} chart" src="data:{kind};base64,{data}">'
                   f"<figcaption class=\"note\">{_e(name)}</figcaption></figure>")
    return "".join(out) or '<p class="note">No charts.</p>'


def _criteria(sample: Record, lb: "Leaderboard") -> str:
    rows = []
    for c in sample.criteria:
        hit = c.hit
        what = (lb.taxonomy.label(c.ability) if c.ability else f"rule: {c.rule}" if c.rule else ", ".join(c.tags))
        bad = c.rule is not None or (c.weight is not None and c.weight < 0)
        cls = ("bad" if bad else "hit") if hit else "miss"  # a hit on a penalty item is bad news
        rows.append([_e(c.index), _e(c.label if c.layout.has("label") else None), _e(what), _e(c.weight),
                     _e(c.text if c.layout.has("text") else None),
                     f'<span class="{cls}">{"hit" if hit else ("miss" if hit is False else "—")}</span>'
                     + _credit(c.credit), _e(c.reasoning)])
    if not rows:
        return ""
    return _table(["#", "Label", "Ability / rule / tags", "Weight", "Criterion", "Hit", "Judge reasoning"], rows,
                  left=range(7), sortable=False)


def _credit(credit: float | None) -> str:
    """judge.verdict.use: probability: the share of the item's points its score counted, beside the verdict."""
    return "" if credit is None else f' <span class="note">({credit:.2f} of its points)</span>'


def _games(sample: Record, shape: Shape) -> str:
    """A comparison's baseline reply and its games (the verdict's stored_games); "" for any other record."""
    games = shape.verdict.stored_games(sample)
    if games is None:
        return ""
    rows = [[_e(g.order), _e(g.label or "—"), _e(g.error or g.reasoning)] for g in games]
    return (f"<p class=\"note\">Baseline reply:</p><pre>{_e(shape.verdict.stored_baseline(sample))}</pre>"
            + _table(["Order", "Label", "Judge reply / error"], rows, left=range(3), sortable=False))


def _question(sample: Record, lb: "Leaderboard", shape: Shape, turns: Any = None, calls: str = "") -> str:
    t = lb.taxonomy
    score = sample.score
    err_j, err_c = sample.judge_error, sample.candidate_error
    classes = "q" + (" err" if err_j or err_c else "") + (" cat" if sample.catastrophic else "")
    classes += " rules" if sample.failed_rules else ""  # the questions filter (questions_view.SCRIPT)
    scen = sample.scenario or ""
    flags = " · JUDGE ERROR" if err_j else (" · CANDIDATE ERROR" if err_c else "")
    flags += " · catastrophic" if sample.catastrophic else ""
    rules = dict(t.rules)  # the failure rules (veto groups) that fired, by their labels
    flags += "".join(f" · vetoed by {rules.get(r, r)}" for r in sample.failed_rules) if sample.catastrophic else ""
    sub = sample.subset or ""
    where = [t.subset_labels.get(sub, sub)] if sub else []
    where += [t.scenario_labels.get(scen, scen)] if scen else []
    head = (f"{_e(sample.id)} · " + "".join(f"{_e(w)} · " for w in where) + "score "
            f"{_f(None if score is None else score * t.scale)}{_e(flags)}")
    body = []
    if err_c:
        body.append(f'<p class="err">Candidate error: {_e(err_c)}</p>')
    if err_j:
        body.append(f'<p class="err">Judge error: {_e(err_j)}</p>')
        for raw in sample.judge_raw:
            body.append(f"<p class=\"note\">Judge reply:</p><pre>{_e(raw)}</pre>")
    if sample.failed_rules:
        body.append(f'<p class="warn">Failure rules fired: {_e(", ".join(sample.failed_rules))}</p>')
    abilities = sample.abilities or {}
    if abilities:
        parts = [f"{t.label(a)} {fmt(None if v.get('score') is None else v['score'] * t.scale)}"
                 for a, v in abilities.items() if isinstance(v, Mapping)]
        body.append(f'<p class="note">Ability scores: {_e(", ".join(parts))}</p>')
    session = shape.conversation.stored_transcript(sample)
    if turns or session is None:  # a session may have no fixed prefix to show
        body.append(views.dialogue(turns))
    body.append(transcript_html(session))  # a conversation's turns ('' for a single reply)
    body.append(f"<p class=\"note\">Reply:</p><pre>{_e(clipped(sample.response))}</pre>")
    body.append(_criteria(sample, lb))
    body.append(_games(sample, shape))
    body.append(calls)  # the question's calls from the run's transcripts (report/calls_view.py)
    return f'<details class="{classes}"><summary>{head}</summary>{"".join(body)}</details>'


def _drilldown(lb: "Leaderboard", row: "Row", turns: Mapping[str, Any]) -> str:
    """One model's questions, streamed from its samples.jsonl (no run's records are held between rows)."""
    run = row.run
    errs = [str(s.id) for s in (run.iter_records() if run else ()) if s.judge_error or s.candidate_error]
    summary = (f"{_e(row.label)} — {run.records if run else 0} questions, {row.counts['judge_errors']} judge errors, "
               f"{row.counts['candidate_errors']} candidate errors")
    err_line = f'<p class="err">Questions with errors: {_e(", ".join(errs))}</p>' if errs else ""
    calls = run_calls(run.dir if run else None, len(lb.rows) == 1)  # each question's calls (report/calls_view.py)
    questions = ""
    if run is not None:
        shape = stored_shape(run.spec, str(run.dir / rundir.SPEC_FILE))  # what its records hold (shapes/)
        questions = "".join(_question(s, lb, shape, turns.get(str(s.id)), calls(s)) for s in run.iter_records())
    return (f'<details class="model"><summary>{summary}</summary>{err_line}' + questions
            + "</details>")


def render_html(lb: "Leaderboard", images: Mapping[str, Path] | None = None, *,
                subset_ci: Mapping[str, Mapping[str, Any]] | None = None, agreement: Path | None = None,
                items: Path | None = None) -> str:
    """The whole report as a string; images: caption -> PNG file to embed; subset_ci: label -> subset ->
    (lo, hi); agreement: an agreement.json whose headline and pair table join the page; items: an items.json
    (rubric diagnostics) whose summary and review-first criteria join it."""
    turns = views.dialogues(lb)
    grid = qview.collect(lb)  # one pass over every run's records for the question table, side by side and rates
    title = f"{lb.benchmark} {lb.benchmark_version} " + (f"run: {lb.rows[0].label}" if len(lb.rows) == 1 else "leaderboard")
    warn = "".join(f'<li class="warn">{_e(w)}</li>' for w in lb.warnings)
    body = [
        f"<h1>{_e(title)}</h1>", prov.mock_banner(lb),
        f'<p class="note">{len(lb.rows)} run{"s" if len(lb.rows) != 1 else ""}; ' + (f"{len(ability_ids(lb.taxonomy.dimensions))} abilities in "
        f"{len(lb.taxonomy.dimensions)} dimensions; " if lb.taxonomy.dimensions else "")
        + f"scores {score_range(lb.rows, lb.taxonomy.scale).text}.</p>",
        f"<ul>{warn}</ul>" if warn else "",
        "<h2>Leaderboard</h2>", _leaderboard(lb),
        judges_html(lb),  # a judge sweep: rankings side by side, rank correlation (report/judges_view.py)
        prov.provenance_section(lb),
        *_tables(lb, subset_ci),
        views.load_agreement(Path(agreement)) if agreement is not None else "",
        load_items_section(Path(items)) if items is not None else "",
        "<h2>Charts</h2>", _images(images or {}),
        qview.questions_section(grid, lb),
        qview.criteria_rates(grid),
        views.side_by_side(lb, turns, grid),
        '<h2 id="drilldown">Per-question drill-down</h2>',
        '<p class="note">Open a model, then a question: the dialogue, the reply, each criterion with the judge\'s '
        "reasoning and verdict. Questions with errors are highlighted in red, catastrophic ones in amber.</p>",
        '<div id="drill">', *(_drilldown(lb, r, turns) for r in lb.rows), "</div>",
        f"<script>{views.SCRIPT}{qview.SCRIPT}</script>",
    ]
    page = "\n".join(body)
    font, font_note = font_face_head(page)  # the CJK glyphs this page uses, embedded (report/fonts.py)
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; font-src data:; "
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>{font}<style>{_CSS}{views.CSS}{prov.CSS}{qview.CSS}</style></head><body>",
        f'<p class="warn">{_e(font_note)}</p>' if font_note else "", page, "</body></html>"])


def write_html(lb: "Leaderboard", path: Path, images: Mapping[str, Path] | None = None, **kw: Any) -> Path:
    """Write render_html() to path (UTF-8) and return the path; kw: render_html's keywords."""
    path = Path(path)
    from rubric_engine.store.layout import write_text

    write_text(path, render_html(lb, images, **kw))  # atomic: a full disk never leaves half a page
    return path
