"""The question-level views of report.html: the questions table (sortable by any model's score and by the
difference between two chosen models, filterable to errors or to fired failure rules), each question's
criteria side by side across models, and the pass rate of each kind of criterion per model.

Why one module: the three views read the same compact grid (one streamed pass over each run's samples.jsonl
keeps per question and model only the score, the error, the fired rules, the verdicts and the reply), so the
page reads every record once for all of them. Each view is a pure function from the grid to escaped HTML;
SCRIPT (inline, no library, no network) adds the model pickers and the filters, and with scripts off every
row and column is shown.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from rubric_engine.record.types import CriterionVerdict
from rubric_engine.results.leaderboard import fmt

if TYPE_CHECKING:
    from rubric_engine.results.leaderboard import Leaderboard, Row

__all__ = ["Cell", "Grid", "collect", "column_labels", "questions_section", "criteria_compare", "criteria_rates", "SCRIPT", "CSS"]

CSS = """
td.y{color:#0a6b0a;font-weight:600;text-align:center}td.n{color:#777;text-align:center}td.z{text-align:center}
td.y.pen,td.y.rule{color:#b00000}.qf label{margin-right:1em;white-space:nowrap}
"""


@dataclass(frozen=True)
class Cell:
    """One model's result on one question, reduced to what the views show."""

    score: float | None  # 0-1, None when not scored
    error: str | None  # "judge error: ..." / "candidate error: ..."
    rules: tuple[str, ...]  # failure rules that fired
    catastrophic: bool
    hits: Mapping[int, bool | None]  # criterion index -> the verdict
    response: str | None


@dataclass(frozen=True)
class Crit:
    """A criterion of a question as the record states it."""

    index: int
    text: str
    weight: float | None
    group: str  # what the pass-rate table groups by: the ability's label, the rule, or the item's label
    kind: str  # "reward" | "penalty" | "rule"


@dataclass
class Grid:
    labels: list[str]  # one per row with a run, in rank order
    qids: list[str] = field(default_factory=list)
    cells: list[dict[str, Cell]] = field(default_factory=list)  # per model: question id -> cell
    criteria: dict[str, list[Crit]] = field(default_factory=dict)  # question id -> its criteria (first run's)


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def column_labels(rows: Sequence["Row"]) -> list[str]:
    """A column name per row: its label, with its judge when the label repeats (a sweep over judges ranks each
    candidate once per judge), so no two columns read the same."""
    labels = [r.label for r in rows]
    return [f"{r.label} ({r.judge})" if labels.count(r.label) > 1 else r.label for r in rows]


def _crit(c: CriterionVerdict, lb: "Leaderboard") -> Crit:
    w = c.weight
    weight = float(w) if isinstance(w, (int, float)) and not isinstance(w, bool) else None
    if c.rule:
        group, kind = f"rule: {c.rule}", "rule"
    else:
        group = lb.taxonomy.label(str(c.ability)) if c.ability else str(c.label or ", ".join(c.tags) or "—")
        kind = "penalty" if weight is not None and weight < 0 else "reward"
    return Crit(int(c.index or 0), str(c.text or ""), weight, group, kind)


def collect(lb: "Leaderboard") -> Grid:
    """One pass over each ranked run's samples.jsonl; rows without a run directory are left out. Replies are kept
    only when there are two models to put side by side (a single run's page shows them in its drill-down)."""
    rows = [r for r in lb.rows if r.run is not None]
    replies = len(rows) > 1
    grid = Grid(labels=column_labels(rows))
    seen: dict[str, None] = {}
    for r in rows:
        cells: dict[str, Cell] = {}
        for s in r.run.iter_records():  # type: ignore[union-attr]
            qid = str(s.id)
            seen.setdefault(qid)
            crits = list(s.criteria)
            if crits and qid not in grid.criteria:
                grid.criteria[qid] = [_crit(c, lb) for c in crits]
            err = (f"candidate error: {s.candidate_error}" if s.candidate_error else
                   f"judge error: {s.judge_error}" if s.judge_error else None)
            score = s.score
            cells[qid] = Cell(float(score) if isinstance(score, (int, float)) else None, err,
                              tuple(str(x) for x in s.failed_rules), bool(s.catastrophic),
                              {int(c.index or 0): c.hit for c in crits}, s.response if replies else None)
        grid.cells.append(cells)
    grid.qids = list(seen)
    return grid


def _score(cell: Cell | None, scale: float) -> tuple[str, str]:
    """(text, data-v) of a score cell; data-v is '' when there is no number."""
    if cell is None or cell.score is None:
        return "—", ""
    v = cell.score * scale
    return _e(fmt(v)), f"{v:.6g}"


def questions_section(grid: Grid, lb: "Leaderboard") -> str:
    """Every question: each model's score, A − B (first two models; the script lets the reader choose A and B),
    the models with an error and the failure rules that fired. A row links to its side-by-side entry."""
    if not grid.qids:
        return ""
    scale, n = lb.taxonomy.scale, len(grid.labels)
    diff = n > 1
    head = ['<th class="t">Question</th>', *(f'<th data-m="{i}">{_e(x)}</th>' for i, x in enumerate(grid.labels))]
    if diff:
        head.append(f'<th class="diff">{_e(grid.labels[0])} − {_e(grid.labels[1])}</th>')
    head += ['<th class="t">Errors</th>', '<th class="t">Failure rules fired</th>']
    body = []
    for k, q in enumerate(grid.qids):
        cells = [m.get(q) for m in grid.cells]
        scores = [_score(c, scale) for c in cells]
        errs = [f"{grid.labels[i]}: {c.error}" for i, c in enumerate(cells) if c is not None and c.error]
        rules = [f"{grid.labels[i]}: {', '.join(c.rules)}" for i, c in enumerate(cells) if c is not None and c.rules]
        link = f'<a href="#sbs-{k}">{_e(q)}</a>' if diff else _e(q)
        tds = [f'<td class="t">{link}</td>', *(f'<td data-v="{v}">{t}</td>' for t, v in scores)]
        if diff:
            a, b = scores[0][1], scores[1][1]
            tds.append(f"<td class=\"diff\">{_e(fmt(float(a) - float(b))) if a and b else '—'}</td>")
        tds += [f'<td class="t err">{_e("; ".join(errs))}</td>' if errs else '<td class="t"></td>',
                f'<td class="t">{_e("; ".join(rules))}</td>']
        body.append(f'<tr data-err="{int(bool(errs))}" data-rules="{int(bool(rules))}">{"".join(tds)}</tr>')
    names = _e(json.dumps(grid.labels, ensure_ascii=False))
    return ("<h2 id=\"questions\">Questions</h2><p class=\"note\">One row per question: each model's score"
            + (", the difference between two models (with scripts on, pick them above the table)" if diff else "")
            + ", the errors and the failure rules that fired. Click a header to sort; with scripts on, the "
              "checkboxes keep only questions with an error or with a fired failure rule, here, in the side-by-side "
              "view and in the drill-down.</p>"
            + f'<div class="tw"><table class="sortable" id="qtable" data-models="{names}"><thead><tr>{"".join(head)}'
              f'</tr></thead><tbody>{"".join(body)}</tbody></table></div>')


def criteria_compare(grid: Grid, qid: str) -> str:
    """One question's criteria, one column per model (met / not met / — unjudged) and how many models met each."""
    crits = grid.criteria.get(qid)
    if not crits:
        return ""
    head = ('<tr><th class="t">#</th><th class="t">Criterion</th><th>Weight</th>'
            + "".join(f'<th data-m="{i}">{_e(x)}</th>' for i, x in enumerate(grid.labels)) + "<th>Met by</th></tr>")
    rows = []
    for c in crits:
        marks, met, judged = [], 0, 0
        for i, m in enumerate(grid.cells):
            cell = m.get(qid)
            hit = cell.hits.get(c.index) if cell is not None else None
            judged += hit is not None
            met += hit is True
            cls = "z" if hit is None else "n" if not hit else {"penalty": "y pen", "rule": "y rule"}.get(c.kind, "y")
            marks.append(f'<td data-m="{i}" class="{cls}">{"—" if hit is None else "met" if hit else "no"}</td>')
        w = "rule" if c.kind == "rule" else _e("—" if c.weight is None else f"{c.weight:g}")
        rows.append(f'<tr><td class="t">{c.index}</td><td class="t">{_e(c.text)}</td><td>{w}</td>{"".join(marks)}'
                    f"<td>{met}/{judged}</td></tr>")
    return (f'<p class="note">Criteria (met on a penalty item or a rule is bad news, in red):</p><div class="tw">'
            f'<table class="crit"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table></div>')


def criteria_rates(grid: Grid) -> str:
    """Per kind of criterion (ability, rule, or the item's label) and model: the share of judged criteria met."""
    if not grid.criteria:
        return ""
    counts: dict[tuple[str, str], list[list[int]]] = {}
    for q, crits in grid.criteria.items():
        for c in crits:
            per = counts.setdefault((c.group, c.kind), [[0, 0] for _ in grid.labels])
            for i, m in enumerate(grid.cells):
                cell = m.get(q)
                hit = cell.hits.get(c.index) if cell is not None else None
                if hit is not None:
                    per[i][0] += hit is True
                    per[i][1] += 1
    head = ('<tr><th class="t">Criteria</th><th class="t">Kind</th>'
            + "".join(f"<th>{_e(x)}</th>" for x in grid.labels) + "</tr>")
    rows = []
    order = {"reward": 0, "penalty": 1, "rule": 2}  # stable: taxonomy groups in first-seen order within a kind
    for (group, kind), per in sorted(counts.items(), key=lambda kv: order.get(kv[0][1], 3)):
        if not any(n for _, n in per):  # never judged (scores on a scale keep their items without verdicts)
            continue
        cells = "".join(f"<td>{100 * k / n:.1f}% <small>({k}/{n})</small></td>" if n else "<td>—</td>" for k, n in per)
        rows.append(f'<tr><td class="t">{_e(group)}</td><td class="t">{_e(kind)}</td>{cells}</tr>')
    if not rows:
        return ""
    return ('<h2 id="criteria">Criterion pass rates</h2><p class="note">Per kind of criterion and model: the share '
            "of judged criteria the replies met (k/n: met / judged; unjudged criteria of questions with an error "
            "are not counted). For penalty items and failure rules a lower rate is better.</p>"
            f'<div class="tw"><table class="sortable"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table></div>')


# The pickers of A and B fill the difference column; the filters hide questions without an error / a fired rule in
# the questions table and the side-by-side view (data-err / data-rules) and the drill-down (details.q's classes
# err / rules).
SCRIPT = r"""
(function(){
var tb=document.getElementById('qtable');if(!tb)return;
var names=JSON.parse(tb.getAttribute('data-models')),body=tb.tBodies[0];
var box=document.createElement('div');box.className='ctl qf';
function check(id,text){var l=document.createElement('label');var c=document.createElement('input');
  c.type='checkbox';c.id=id;l.appendChild(c);l.appendChild(document.createTextNode(' '+text));box.appendChild(l);
  c.addEventListener('change',filter);return c;}
var onlyErr=check('only-errors','Only questions with an error');
var onlyRules=check('only-rules','Only questions where a failure rule fired');
function has(el,k){return el.getAttribute('data-'+k)==='1'||el.classList.contains(k==='err'?'err':'rules');}
function keep(el){return (!onlyErr.checked||has(el,'err'))&&(!onlyRules.checked||has(el,'rules'));}
function filter(){
  Array.prototype.forEach.call(body.rows,function(r){r.classList.toggle('off',!keep(r));r.hidden=r.classList.contains('off')||r.classList.contains('nomatch');});
  document.querySelectorAll('details.sbs, details.q').forEach(function(d){d.classList.toggle('off',!keep(d));d.hidden=d.classList.contains('off');});
}
if(names.length>1){
  var sel=[];var head=tb.tHead.rows[0].querySelector('th.diff');
  [0,1].forEach(function(k){var s=document.createElement('select');s.id='q-'+(k?'b':'a');
    s.setAttribute('aria-label','Difference model '+(k?'B':'A'));
    names.forEach(function(n,i){var o=document.createElement('option');o.value=String(i);o.textContent=n;s.appendChild(o);});
    s.value=String(k);s.addEventListener('change',diff);sel.push(s);
    box.appendChild(document.createTextNode(k?' − ':' Difference: '));box.appendChild(s);});
  function diff(){var a=+sel[0].value,b=+sel[1].value;
    head.textContent=names[a]+' \u2212 '+names[b];
    Array.prototype.forEach.call(body.rows,function(r){
      var x=r.cells[1+a].getAttribute('data-v'),y=r.cells[1+b].getAttribute('data-v');
      r.querySelector('td.diff').textContent=(x&&y)?(parseFloat(x)-parseFloat(y)).toFixed(2):'\u2014';});}
  diff();
}
var at=tb.parentNode;at.parentNode.insertBefore(box,at);
function openTarget(){var t=location.hash?document.getElementById(location.hash.slice(1)):null;
  if(t&&t.tagName==='DETAILS')t.open=true;}
window.addEventListener('hashchange',openTarget);openTarget();
})();
"""
