"""The index of past runs as one offline HTML page: every run grouped by sweep, a text filter, and a side-by-side
comparison of any runs picked with their checkboxes.

Why apart from results/runindex.py: that module decides what each run directory is (state, numbers); this one only
draws it. Like report.html the page loads nothing (a Content-Security-Policy forbids every URL but the links to the
runs' own reports): one inline style, one inline script, the runs' numbers as a JSON block the script reads. Every
text from a run directory is escaped, and the script writes cells with textContent only, so a model name cannot
become markup.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rubric_engine.report.fonts import font_face_head
from rubric_engine.results.leaderboard import fmt
from rubric_engine.results.runindex import STATES, RunEntry
from rubric_engine.text.pagefonts import PAGE_FONTS

__all__ = ["render_index", "relative_link"]

Link = Callable[[Path], str]  # a report.html on disk -> the href the page uses for it

_CSS = """
body{font-family:__PAGE_FONTS__;margin:24px auto;max-width:1280px;color:#1d1d1f;line-height:1.4;padding:0 12px}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:4px;
overflow-wrap:anywhere}
.tw{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:6px 0;font-size:0.9em}
th,td{border:1px solid #d0d0d0;padding:4px 7px;text-align:left;vertical-align:top}
th{background:#f3f3f5;white-space:nowrap}td.n{text-align:right;white-space:nowrap}
td small,th small{color:#666;display:block;overflow-wrap:anywhere;font-weight:normal;white-space:normal}
.note{color:#555;font-size:0.9em;overflow-wrap:anywhere}
.st{font-weight:600;white-space:nowrap}.finished{color:#0a6b0a}.failed,.rejected{color:#b00000}
.interrupted{color:#8a4b00}.running{color:#0a4fa0}
#bar{display:flex;flex-wrap:wrap;gap:8px;align-items:center;position:sticky;top:0;background:#fff;padding:6px 0;
border-bottom:1px solid #eee;z-index:1}
#filter{flex:1 1 220px;min-width:0;padding:6px;font-size:1em}
button{padding:6px 12px;font-size:1em}
#compare{display:none;margin:12px 0;padding:8px;border:1px solid #ccd;border-radius:6px;background:#fafaff;
scroll-margin-top:64px}
#compare-table th{max-width:18em;white-space:normal;overflow-wrap:anywhere}
#compare.on{display:block}
tr.hide,section.hide{display:none}
""".replace("__PAGE_FONTS__", PAGE_FONTS)

_SCRIPT = r"""
(function(){
var runs=JSON.parse(document.getElementById('runs-data').textContent);
var byId={};runs.forEach(function(r){byId[r.id]=r;});
var boxes=[].slice.call(document.querySelectorAll('input.pick'));
var picked=document.getElementById('picked');
function chosen(){return boxes.filter(function(b){return b.checked;}).map(function(b){return byId[b.value];});}
function count(){picked.textContent=chosen().length+' selected';}
boxes.forEach(function(b){b.addEventListener('change',count);});
function num(x){return x===null||x===undefined?'\u2014':x.toFixed(2);}
function cell(tag,text,cls){var c=document.createElement(tag);c.textContent=text;if(cls)c.className=cls;return c;}
function row(head,values,cls){var tr=document.createElement('tr');tr.appendChild(cell('th',head));
 values.forEach(function(v){tr.appendChild(cell('td',v,cls));});return tr;}
function compare(){
 var pick=chosen(),box=document.getElementById('compare');box.textContent='';
 if(pick.length<1){box.appendChild(cell('p','Pick runs with the checkboxes first.','note'));box.className='on';return;}
 box.appendChild(cell('h2','Comparison of '+pick.length+' run'+(pick.length>1?'s':'')));
 var wrap=document.createElement('div');wrap.className='tw';var t=document.createElement('table');t.id='compare-table';
 var head=document.createElement('tr');head.appendChild(cell('th',''));
 pick.forEach(function(r){var th=cell('th',r.candidate||'?');th.appendChild(cell('small','judge '+(r.judge||'?')));
  th.appendChild(cell('small',r.name));head.appendChild(th);});
 t.appendChild(head);
 t.appendChild(row('State',pick.map(function(r){return r.state;})));
 t.appendChild(row('Benchmark',pick.map(function(r){return r.benchmark;})));
 t.appendChild(row('Overall',pick.map(function(r){return num(r.overall);}),'n'));
 t.appendChild(row('Interval',pick.map(function(r){return r.lo===null?'\u2014':'['+num(r.lo)+', '+num(r.hi)+']';}),'n'));
 var titles=[];pick.forEach(function(r){Object.keys(r.tables).forEach(function(k){if(titles.indexOf(k)<0)titles.push(k);});});
 titles.forEach(function(title){
  var sub=document.createElement('tr');var th=cell('th',title);th.colSpan=pick.length+1;th.className='group';
  sub.appendChild(th);t.appendChild(sub);
  var groups=[];pick.forEach(function(r){Object.keys(r.tables[title]||{}).forEach(function(g){if(groups.indexOf(g)<0)groups.push(g);});});
  groups.forEach(function(g){t.appendChild(row(g,pick.map(function(r){var v=(r.tables[title]||{})[g];
   return v===undefined?'':num(v);}),'n'));});
 });
 wrap.appendChild(t);box.appendChild(wrap);box.className='on';box.scrollIntoView();
}
document.getElementById('compare-btn').addEventListener('click',compare);
var filter=document.getElementById('filter');
filter.addEventListener('input',function(){
 var words=filter.value.toLowerCase().split(/\s+/).filter(Boolean);
 [].slice.call(document.querySelectorAll('section.group')).forEach(function(sec){
  var shown=0;[].slice.call(sec.querySelectorAll('tr[data-text]')).forEach(function(tr){
   var text=tr.getAttribute('data-text');var ok=words.every(function(w){return text.indexOf(w)>=0;});
   tr.className=ok?'':'hide';if(ok)shown++;});
  sec.className='group'+(shown?'':' hide');});
});
count();
})();
"""


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def relative_link(index: Path) -> Link:
    """Links relative to the index file's directory (the page opened from disk)."""
    base = Path(index).resolve().parent

    def link(target: Path) -> str:
        return quote(Path(os.path.relpath(Path(target).resolve(), base)).as_posix())
    return link


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(int(round(seconds)), 60)
    return f"{minutes} min {sec} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def _cost(e: RunEntry) -> str:
    return "—" if e.cost is None else f"{e.cost:.4f}" + (" + ?" if e.cost_partial else "")


def _when(iso: str | None) -> str:
    return "—" if not iso else iso.replace("T", " ").replace("+00:00", " UTC")


def _row(i: int, e: RunEntry, link: Link) -> str:
    text = " ".join([e.state, e.benchmark, e.candidate, e.candidate_model, e.judge, e.judge_model, str(e.dir),
                     e.reason]).lower()
    overall = "—" if e.overall is None else (f"<b>{_e(fmt(e.overall))}</b>"
                                              + (f"<small>[{_e(fmt(e.lo))}, {_e(fmt(e.hi))}]</small>"
                                                 if e.lo is not None else ""))
    scored = "—" if e.questions is None else f"{e.scored}/{e.questions}"
    report = f'<a href="{_e(link(e.report))}">report</a>' if e.report is not None else "—"
    return (f'<tr data-text="{_e(text)}"><td><input type="checkbox" class="pick" value="{i}" '
            f'aria-label="pick {_e(e.candidate)} / {_e(e.judge)}"></td>'
            f'<td><span class="st {e.state}">{e.state}</span>' + (f"<small>{_e(e.reason)}</small>" if e.reason else "")
            + f"</td><td>{_e(_when(e.started))}</td><td>{_e(e.benchmark or '—')}</td>"
            f"<td>{_e(e.candidate or '—')}<small>{_e(e.candidate_model)}</small></td>"
            f"<td>{_e(e.judge or '—')}<small>{_e(e.judge_model)}</small></td>"
            f'<td class="n">{overall}</td><td class="n">{scored}</td><td class="n">{_e(_duration(e.wall_seconds))}</td>'
            f'<td class="n">{_e(_cost(e))}</td><td>{report}<small>{_e(e.dir.name)}</small></td></tr>')


_HEAD = ("", "State", "Started", "Benchmark", "Candidate", "Judge", "Overall", "Scored", "Wall time", "Cost $", "Report")


def _group(title: str, note: str, items: Sequence[tuple[int, RunEntry]], link: Link) -> str:
    head = "".join(f"<th>{h}</th>" for h in _HEAD)
    return (f'<section class="group"><h2>{title}</h2><p class="note">{note}</p><div class="tw"><table><thead><tr>{head}'
            f"</tr></thead><tbody>{''.join(_row(i, e, link) for i, e in items)}</tbody></table></div></section>")


def _counts(entries: Sequence[RunEntry]) -> str:
    return ", ".join(f"{n} {s}" for s in STATES if (n := sum(e.state == s for e in entries)))


def _data(entries: Sequence[RunEntry]) -> str:
    """The runs' numbers for the script, safe inside <script>: '<', '>' and '&' are written as JSON escapes."""
    rows = [{"id": str(i), "dir": str(e.dir), "name": e.dir.name, "state": e.state, "benchmark": e.benchmark, "candidate": e.candidate,
             "judge": e.judge, "overall": e.overall, "lo": e.lo, "hi": e.hi, "tables": e.tables}
            for i, e in enumerate(entries)]
    text = json.dumps(rows, ensure_ascii=False, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_index(entries: Sequence[RunEntry], roots: Sequence[Path], link: Link) -> str:
    """The whole page: sweeps (newest first) then single runs, each run a row; `link` makes each report's href."""
    sweeps: dict[Path, list[tuple[int, RunEntry]]] = {}
    singles: list[tuple[int, RunEntry]] = []
    for i, e in enumerate(entries):
        (sweeps.setdefault(e.sweep, []) if e.sweep is not None else singles).append((i, e))
    groups = []
    for sweep, items in sweeps.items():
        board = sweep / "report.html"
        lead = f' · <a href="{_e(link(board))}">leaderboard</a>' if board.is_file() else ""
        groups.append(_group(f"Sweep {_e(sweep)}", f"{len(items)} job(s): {_e(_counts([e for _, e in items]))}{lead}",
                             items, link))
    if singles:
        groups.append(_group("Single runs", f"{len(singles)} run(s): {_e(_counts([e for _, e in singles]))}", singles,
                             link))
    made = datetime.now(timezone.utc).isoformat(timespec="seconds").replace("T", " ").replace("+00:00", " UTC")
    summary = (f"{len(entries)} run(s) under {_e(', '.join(str(r) for r in roots))}"
               + (f": {_e(_counts(entries))}" if entries else "") + f"; written {made}.")
    body = "\n".join([
        "<h1>rubric-engine runs</h1>", f'<p class="note">{summary}</p>',
        '<div id="bar"><input id="filter" type="search" placeholder="filter: benchmark, model, state, directory" '
        'aria-label="filter runs"><button id="compare-btn" type="button">Compare selected</button>'
        '<span id="picked" class="note"></span></div>',
        '<div id="compare" aria-live="polite"></div>',
        *(groups or ['<p class="note">No run directory found.</p>']),
        '<p class="note">States: finished (summary written, run complete); interrupted (stopped before its end: killed, '
        "Ctrl-C or a crash; the same command resumes it); failed (error.txt, or nothing was scored); rejected (refused "
        "before it wrote anything); running (a live process holds the run's lock).</p>",
        f'<script type="application/json" id="runs-data">{_data(entries)}</script>',
        f"<script>{_SCRIPT}</script>"])
    font, note = font_face_head(body)  # model and benchmark names in Chinese: the glyphs embedded (report/fonts.py)
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; font-src data:; "
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>rubric-engine runs</title>{font}<style>{_CSS}</style></head><body>",
        f'<p class="note">{_e(note)}</p>' if note else "", body, "</body></html>"])
