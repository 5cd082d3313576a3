"""Parts of report.html beyond the plain tables: a breakdown's heatmap with counts, the side-by-side view, dialogues,
the judge-human agreement section and the small inline script that sorts, filters and searches.

Why apart from report/html_page.py: that module lays out the page; this one holds the views a reader works
with, each a pure function from a built Leaderboard (or agreement.json) to escaped HTML. The script
only enhances: it creates its own controls, so with scripts off the page shows every row, every
column of the side-by-side view and no dead buttons. Nothing here points to a URL.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from rubric_engine.report.questions_view import Grid, column_labels, criteria_compare
from rubric_engine.report.scales import ScoreRange, score_range
from rubric_engine.results.leaderboard import fmt
from rubric_engine.scoring.aggregate import NO_SCENARIO, ability_ids, group_members, scenario_order

if TYPE_CHECKING:
    from rubric_engine.results.leaderboard import Leaderboard, Row

__all__ = ["SCRIPT", "CSS", "breakdown_title", "heatmap", "side_by_side", "dialogue", "dialogues", "agreement_section",
           "find_agreement", "load_agreement", "load_json_section", "subset_intervals", "AGREEMENT_FILE"]

AGREEMENT_FILE = "agreement.json"

CSS = """
.tw{overflow-x:auto;max-width:100%}
table.heat td.c{min-width:4.5em}table.heat small{display:block;color:#333;font-size:0.8em}
.dialogue{border-left:3px solid #c9d3e6;padding-left:8px;margin:6px 0}
.turn{margin:2px 0}.turn b{display:block;font-size:0.8em;color:#445}.turn pre{margin:1px 0 4px;padding:4px 8px}
.sbs-grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));gap:8px}
.sbs-grid>div{border:1px solid #e4e4e4;border-radius:4px;padding:4px 8px;min-width:0}
.ctl{margin:6px 0}.ctl input,.ctl select{font:inherit;padding:2px 6px;max-width:100%}#search{width:32em}
th.sort{cursor:pointer;user-select:none}th.sort:after{content:" \\2195";color:#999;font-size:0.8em}
[hidden]{display:none !important}
@media (max-width:600px){body{margin:8px auto;padding:0 8px}th,td{padding:3px 4px}}
"""

# Plain ES5-ish DOM code, no library, no network. Every control is created here, so a page opened
# with scripts off has none of them and shows all rows.
SCRIPT = r"""
(function(){
function num(t){t=t.trim();var m=t.match(/^[-\u2212]?\d+(\.\d+)?/);return m?parseFloat(m[0].replace('\u2212','-')):null;}
function txt(el){return (el.textContent||'').toLowerCase();}
document.querySelectorAll('table.sortable').forEach(function(tb){
  var body=tb.tBodies[0];if(!body)return;
  var heads=tb.tHead?tb.tHead.rows[0].cells:[];
  Array.prototype.forEach.call(heads,function(th,i){
    th.classList.add('sort');th.title='Sort by this column';
    th.addEventListener('click',function(){
      var asc=th.getAttribute('data-dir')!=='asc';
      Array.prototype.forEach.call(heads,function(h){h.removeAttribute('data-dir');});
      th.setAttribute('data-dir',asc?'asc':'desc');
      var rows=Array.prototype.slice.call(body.rows);
      rows.sort(function(a,b){
        var x=a.cells[i]?a.cells[i].textContent:'',y=b.cells[i]?b.cells[i].textContent:'';
        var nx=num(x),ny=num(y);
        if(nx!==null&&ny!==null)return asc?nx-ny:ny-nx;
        if(nx===null&&ny!==null)return 1;if(ny===null&&nx!==null)return -1;
        return asc?x.localeCompare(y):y.localeCompare(x);
      });
      rows.forEach(function(r){body.appendChild(r);});
    });
  });
  if(body.rows.length<3)return;
  var box=document.createElement('div');box.className='ctl';
  var inp=document.createElement('input');inp.type='search';inp.placeholder='Filter rows';
  inp.setAttribute('aria-label','Filter rows of this table');inp.className='filter';
  inp.addEventListener('input',function(){var q=inp.value.toLowerCase();
    Array.prototype.forEach.call(body.rows,function(r){r.classList.toggle('nomatch',q!==''&&txt(r).indexOf(q)<0);
      r.hidden=r.classList.contains('nomatch')||r.classList.contains('off');});});
  box.appendChild(inp);var at=tb.parentNode.classList.contains('tw')?tb.parentNode:tb;
  at.parentNode.insertBefore(box,at);
});
var drill=document.getElementById('drill');
if(drill){
  var box=document.createElement('div');box.className='ctl';
  var inp=document.createElement('input');inp.type='search';inp.id='search';
  inp.placeholder='Search questions, replies, criteria, reasoning';inp.size=40;
  inp.setAttribute('aria-label','Search the drill-down');
  inp.addEventListener('input',function(){var q=inp.value.toLowerCase();
    drill.querySelectorAll('details.model').forEach(function(m){var any=false;
      m.querySelectorAll('details.q').forEach(function(d){var ok=(q===''||txt(d).indexOf(q)>=0)&&!d.classList.contains('off');
        d.hidden=!ok;any=any||ok;});
      m.open=q!==''&&any;});});
  box.appendChild(inp);drill.parentNode.insertBefore(box,drill);
}
var sbs=document.getElementById('sbs');
if(sbs){
  var names=JSON.parse(sbs.getAttribute('data-models'));
  var box=document.createElement('div');box.className='ctl';var sel=[];
  [0,1].forEach(function(k){var s=document.createElement('select');s.id='sbs-'+(k?'b':'a');
    s.setAttribute('aria-label','Model '+(k?'B':'A'));
    names.forEach(function(n,i){var o=document.createElement('option');o.value=String(i);o.textContent=n;s.appendChild(o);});
    s.value=String(Math.min(k,names.length-1));s.addEventListener('change',show);sel.push(s);
    box.appendChild(document.createTextNode(k?' vs ':'Compare '));box.appendChild(s);});
  function show(){var keep=[sel[0].value,sel[1].value];
    sbs.querySelectorAll('[data-m]').forEach(function(c){c.hidden=keep.indexOf(c.getAttribute('data-m'))<0;});}
  sbs.parentNode.insertBefore(box,sbs);show();
}
})();
"""


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _values(lb: "Leaderboard", r: "Row", bid: str, by: str) -> dict[str, float | None]:
    """A row's scores of one breakdown: summary.json's own table when it has one, else the fixed tables."""
    if bid in r.breakdowns:
        return dict(r.breakdowns[bid])
    return dict({"ability": r.abilities, "dimension": r.dimensions, "subset": r.subsets,
                 "scenario": r.scenarios}.get(by, {}))


def _heat(score: float | None, scale: ScoreRange) -> str:
    """A background from red (the bottom of the scale) through amber to green (its top); dark text stays
    readable on all of them."""
    if score is None:
        return ""
    x = scale.fraction(score)
    return f' style="background:hsl({int(120 * x)},70%,{82 - 6 * x:.0f}%)"'


def breakdown_title(lb: "Leaderboard", by: str, default: str) -> str:
    """The label the spec declares for its breakdown by `by` (the first such), else `default`: charts and tables
    head a breakdown the way the spec names it."""
    return next((title for _, title, kind in lb.taxonomy.breakdowns if kind == by), default)


def heatmap(lb: "Leaderboard", title: str, by: str, bid: str) -> str:
    """One breakdown as group x model, each cell its score (coloured) and n, the scored questions in the group for
    that model (questions with an error are not counted); '' when no run has a group of it."""
    t = lb.taxonomy
    values = {r.label: _values(lb, r, bid, by) for r in lb.rows}
    counts = {r.label: {g: len(ids) for g, ids in group_members(r.scored, by, t.dimensions).items()}
              for r in lb.rows}
    groups = list(dict.fromkeys(g for v in values.values() for g in v))
    if by == "ability":
        groups = [*[a for a in ability_ids(t.dimensions) if a in groups], *[g for g in groups if g not in
                                                                             set(ability_ids(t.dimensions))]]
    elif by == "scenario":  # rows may list scenarios in different orders: one order for the whole table
        groups = scenario_order(groups)
    if not groups:
        return ""

    def name(g: str) -> str:
        if by in ("ability", "dimension"):
            return t.label(g)
        if by == "subset":
            return t.subset_labels.get(g, g)
        if by == "scenario":
            return "(none)" if g == NO_SCENARIO else t.scenario_labels.get(g, g)
        return g

    head = "".join(f'<th>{_e(name)}</th>' for name in column_labels(lb.rows))
    scale = score_range(lb.rows, t.scale)
    body = []
    for g in groups:
        cells = []
        for r in lb.rows:
            v, n = values[r.label].get(g), counts[r.label].get(g, 0)
            cells.append(f'<td class="c"{_heat(v, scale)}>{_e(fmt(v, 1))}<small>n={n}</small></td>')
        body.append(f'<tr><td class="t">{_e(name(g))}</td>{"".join(cells)}</tr>')
    return (f'<div class="tw"><table class="heat sortable"><thead><tr><th class="t">{_e(title)}</th>{head}</tr>'
            f'</thead><tbody>{"".join(body)}</tbody></table></div>'
            '<p class="note">Each cell: the score and n, the scored questions in the group. Colour runs from red '
            f"({scale.lo:g}) to green (top of the scale); few questions make a score unstable.</p>")


def dialogue(turns: Sequence[tuple[str, str, str]] | None) -> str:
    """The question's dialogue, one block per turn, role first; empty when the run kept none."""
    if not turns:
        return '<p class="note">Dialogue: not in this run directory (no answers.jsonl rows).</p>'
    body = "".join(f'<div class="turn"><b>{_e(role)}{" · " + _e(kind) if kind and kind != role else ""}</b>'
                   f"<pre>{_e(text)}</pre></div>" for role, kind, text in turns)
    return f'<p class="note">Dialogue:</p><div class="dialogue">{body}</div>'


def dialogues(lb: "Leaderboard") -> dict[str, list[tuple[str, str, str]]]:
    """Question id -> turns, from the runs' answers.jsonl per the spec's data fields (first run wins)."""
    from rubric_engine.store.runs import read_dialogues  # one reader of answers.jsonl for review and report

    out: dict[str, list[tuple[str, str, str]]] = {}
    for r in lb.rows:
        if r.run is None:
            continue
        try:
            for qid, turns in read_dialogues(r.run).items():
                out.setdefault(qid, turns)
        except Exception:  # noqa: BLE001 - a damaged answers.jsonl costs the dialogue, not the report
            continue
    return out


def side_by_side(lb: "Leaderboard", turns: Mapping[str, Sequence[tuple[str, str, str]]], grid: Grid) -> str:
    """Every question with each model's reply and score in columns, then its criteria side by side (which model
    met which); the script narrows both to two models. `grid`: questions_view.collect(lb)."""
    if len(grid.labels) < 2:
        return ""
    t = lb.taxonomy
    out = []
    for k, q in enumerate(grid.qids):
        cols, err_any, rules_any = [], False, False
        for i, (label, m) in enumerate(zip(grid.labels, grid.cells)):
            s = m.get(q)
            if s is None:
                cols.append(f'<div data-m="{i}"><b>{_e(label)}</b><p class="note">not in this run</p></div>')
                continue
            err_any, rules_any = err_any or bool(s.error), rules_any or bool(s.rules)
            head = f"{_e(label)} · score {_e(fmt(None if s.score is None else s.score * t.scale))}"
            cls = ' class="err"' if s.error else ""
            cols.append(f'<div data-m="{i}"{cls}><b>{head}</b>'
                        + (f'<p class="err">{_e(s.error)}</p>' if s.error else "")
                        + (f'<p class="warn">Failure rules fired: {_e(", ".join(s.rules))}</p>' if s.rules else "")
                        + f"<pre>{_e(s.response)}</pre></div>")
        out.append(f'<details class="sbs" id="sbs-{k}" data-q="{_e(q)}" data-err="{int(err_any)}" '
                   f'data-rules="{int(rules_any)}"><summary>{_e(q)}</summary>{dialogue(turns.get(q))}'
                   f'<div class="sbs-grid">{"".join(cols)}</div>{criteria_compare(grid, q)}</details>')
    models = _e(json.dumps(grid.labels, ensure_ascii=False))
    return ("<h2 id=\"side-by-side\">Side by side</h2><p class=\"note\">Open a question to read the models' replies "
            "next to each other, then which criteria each model met (with scripts on, pick the two models to "
            f'compare).</p><div id="sbs" data-models="{models}">{"".join(out)}</div>')


def find_agreement(paths: Iterable[Path]) -> Path | None:
    """The first agreement.json among the given files or directories (the agree command's output)."""
    for p in paths:
        p = Path(p)
        cand = p / AGREEMENT_FILE if p.is_dir() else p
        if cand.is_file() and cand.name.endswith(".json"):
            return cand
    return None


def _pct(x: Any) -> str:
    return "—" if x is None else f"{100 * float(x):.1f}%"


def _num(x: Any, ci: Any = None) -> str:
    s = "—" if x is None else f"{float(x):.2f}"
    return s + (f" [{float(ci[0]):.2f}, {float(ci[1]):.2f}]" if isinstance(ci, list) and len(ci) == 2
                and None not in ci else "")


def agreement_section(result: Mapping[str, Any], source: str = "") -> str:
    """Headline per judge and the pair table of agreement.json; a malformed file is named, never guessed."""
    try:
        heads = dict(result.get("headline") or {})
        rows = []
        for p in result.get("pairs") or []:
            ci = p.get("ci") or {}
            rows.append("<tr>" + "".join(f'<td class="t">{_e(x)}</td>' for x in (p["a"], p["b"]))
                        + "".join(f"<td>{_e(x)}</td>" for x in (
                            p.get("n"), _pct(p.get("raw")), _pct(p.get("chance_floor")),
                            _num(p.get("cohen_kappa"), ci.get("cohen_kappa")),
                            _num(p.get("gwet_ac1"), ci.get("gwet_ac1")),
                            _num(p.get("krippendorff_alpha"), ci.get("krippendorff_alpha")),
                            _pct(p.get("false_pass")), _pct(p.get("false_fail")))) + "</tr>")
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        return (f'<h2>Judge–human agreement</h2><p class="warn">{_e(source)}: not an agreement.json written by '
                f"`rubric-engine agree` ({_e(type(exc).__name__)}: {_e(exc)}); re-run agree to rebuild it.</p>")
    head = ("<tr><th class=\"t\">A</th><th class=\"t\">B</th><th>Items</th><th>Raw</th><th>Chance floor</th>"
            "<th>Cohen κ</th><th>Gwet AC1</th><th>Krippendorff α</th><th>False pass</th><th>False fail</th></tr>")
    return ("<h2>Judge–human agreement</h2>"
            + "".join(f'<p><b>{_e(j)}</b>: {_e(text)}</p>' for j, text in heads.items())
            + f'<div class="tw"><table class="sortable"><thead>{head}</thead><tbody>{"".join(rows)}</tbody>'
              "</table></div>"
            + f'<p class="note">From {_e(source or AGREEMENT_FILE)} (written by <code>rubric-engine agree</code>; '
              "agreement.md there has the breakdowns and disputed items). Brackets: bootstrap intervals.</p>")


def load_json_section(path: Path, title: str, render: Callable[[dict[str, Any], str], str]) -> str:
    """render(the JSON object in path, its file name): a section of the page built from a stored result;
    unreadable JSON becomes a one-line warning under `title` (an <h2> of the page)."""
    path = Path(path)
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f'<h2>{_e(title)}</h2><p class="warn">{_e(path.name)}: unreadable ({_e(exc)})</p>'
    if not isinstance(result, dict):
        return f'<h2>{_e(title)}</h2><p class="warn">{_e(path.name)}: not a JSON object</p>'
    return render(result, path.name)


def load_agreement(path: Path) -> str:
    """agreement_section() of a file; unreadable JSON becomes a one-line warning in the page."""
    return load_json_section(path, "Judge–human agreement", agreement_section)


def subset_intervals(lb: "Leaderboard") -> dict[str, dict[str, tuple[float, float] | None]]:
    """Per model and subset, the percentile bootstrap interval of the subset score (the run's declared
    aggregation re-run on resampled questions of that subset); None where the subset has no question."""
    from rubric_engine.stats.bootstrap import bootstrap_overall

    t = lb.taxonomy
    out: dict[str, dict[str, tuple[float, float] | None]] = {}
    for r in lb.rows:
        per: dict[str, tuple[float, float] | None] = {}
        for s in dict.fromkeys([*t.subsets, *r.subsets]):
            qs = [q for q in r.scored if q.subset == s]
            try:
                _, lo, hi = bootstrap_overall(qs, t.dimensions, lb.n_boot, lb.seed, lb.alpha, scale=t.scale, how=t.how)
                per[s] = (lo, hi)
            except ValueError:  # no scored question in the subset: no interval, shown as a dash
                per[s] = None
        out[r.label] = per
    return out
