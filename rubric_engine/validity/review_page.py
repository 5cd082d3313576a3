"""The blind review page: one self-contained HTML file a reviewer opens from disk, offline.

Why it is built this way: every text (dialogue, reply, criterion) is untrusted and is written
into the HTML escaped, on the server side; the inline script carries no data, only behaviour, so
no reply can reach script context. Nothing of the judge (verdict, reasoning) nor the candidate's
name is passed to this module, so the page cannot leak it. Progress lives in the browser's
localStorage under the sheet id; "Save labels" downloads a JSONL file that `agree labels=` reads.
Raters often read Chinese on a machine without a CJK font: the caller passes the function that embeds the
glyphs the page uses (report/fonts.font_face_head, the one report.html uses), and the face leads the font list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from rubric_engine.text.pagefonts import PAGE_FONTS

__all__ = ["ReviewQuestion", "ReviewCriterion", "render_review_page", "FontFace"]

FontFace = Callable[[str], "tuple[str, str]"]  # page text -> (what <head> holds for its CJK glyphs, note if none)


@dataclass(frozen=True)
class ReviewCriterion:
    key: str
    index: int
    text: str
    weight: float | None


@dataclass(frozen=True)
class ReviewQuestion:
    qid: str
    dialogue: Sequence[tuple[str, str, str]]  # (role label, role kind, text)
    reply: str
    criteria: Sequence[ReviewCriterion]


CSS = """
body{font-family:__PAGE_FONTS__;margin:0;background:#f6f7f9;color:#1d2330;line-height:1.5}
header{position:sticky;top:0;background:#fff;border-bottom:1px solid #d8dce3;padding:.6em 1em;z-index:1}
header h1{font-size:1.1em;margin:0 0 .3em}
.bar{display:flex;gap:1em;flex-wrap:wrap;align-items:center}
main{max-width:60em;margin:0 auto;padding:1em}
section.q{background:#fff;border:1px solid #d8dce3;border-radius:6px;padding:1em;margin-bottom:1.2em}
.turn{margin:.3em 0;padding:.4em .6em;border-radius:4px;background:#eef1f6;white-space:pre-wrap}
.turn.user{background:#e7f0ff}
.role{font-weight:600;margin-right:.4em}
.reply{white-space:pre-wrap;border-left:4px solid #5b7bd5;padding:.5em .8em;background:#fbfcff}
ol.items{list-style:none;padding-left:0}
li.item{margin:.8em 0;padding:.5em;border:1px solid #e2e5ea;border-radius:4px}
li.item.done{border-color:#8fbf8f;background:#f4fbf4}
.crit{white-space:pre-wrap;margin:0 0 .3em}
.w{color:#555;font-size:.9em}
button{font:inherit;padding:.2em .8em;margin-right:.3em;border:1px solid #9aa3b2;border-radius:4px;background:#fff;cursor:pointer}
button.on[data-v=met]{background:#2e7d32;color:#fff}
button.on[data-v=not_met]{background:#c62828;color:#fff}
button.on[data-v=unsure]{background:#6d6d6d;color:#fff}
input.note{width:100%;box-sizing:border-box;margin-top:.3em;font:inherit}
#save{background:#1d4ed8;color:#fff}
.muted{color:#666;font-size:.9em}
""".replace("__PAGE_FONTS__", PAGE_FONTS)

SCRIPT = """
(function(){
var body=document.body, sheet=body.getAttribute("data-sheet"), bench=body.getAttribute("data-benchmark");
var idField=body.getAttribute("data-id-field")||"id";
var store="rubric-review:"+sheet, state={rater:"",labels:{}};
try{var s=JSON.parse(localStorage.getItem(store)||"null"); if(s&&s.labels){state=s;}}catch(e){}
function keep(){try{localStorage.setItem(store,JSON.stringify(state));}catch(e){}}
var items=Array.prototype.slice.call(document.querySelectorAll("li.item"));
var rater=document.getElementById("rater");
function paint(){
  var done=0;
  items.forEach(function(li){
    var l=state.labels[li.getAttribute("data-key")]||{};
    Array.prototype.forEach.call(li.querySelectorAll("button"),function(b){
      var on=b.getAttribute("data-v")===l.v; b.classList.toggle("on",on); b.setAttribute("aria-pressed",on?"true":"false");});
    li.classList.toggle("done",!!l.v); if(l.v){done++;}
    var note=li.querySelector("input.note"); if(document.activeElement!==note){note.value=l.note||"";}
  });
  document.getElementById("done").textContent=String(done);
}
items.forEach(function(li){
  var key=li.getAttribute("data-key");
  Array.prototype.forEach.call(li.querySelectorAll("button"),function(b){
    b.addEventListener("click",function(){
      var l=state.labels[key]||{}; var v=b.getAttribute("data-v");
      l.v=(l.v===v)?null:v; state.labels[key]=l; keep(); paint();});
  });
  li.querySelector("input.note").addEventListener("input",function(e){
    var l=state.labels[key]||{}; l.note=e.target.value; state.labels[key]=l; keep(); paint();});
});
rater.value=state.rater||"";
rater.addEventListener("input",function(){state.rater=rater.value; keep();});
document.getElementById("save").addEventListener("click",function(){
  var who=(rater.value||"").trim();
  if(!who){document.getElementById("status").textContent="Type your name (rater) first."; rater.focus(); return;}
  var lines=[];
  items.forEach(function(li){
    var l=state.labels[li.getAttribute("data-key")]||{};
    if(!l.v&&!(l.note||"").trim()){return;}
    var met=l.v==="met"?true:(l.v==="not_met"?false:(l.v==="unsure"?"unsure":null));
    var row={sheet_id:sheet,benchmark:bench,item_key:li.getAttribute("data-key")};
    row[idField]=li.getAttribute("data-q");
    row.criterion_index=parseInt(li.getAttribute("data-i"),10); row.rater=who; row.met=met; row.note=l.note||"";
    lines.push(JSON.stringify(row));
  });
  var blob=new Blob([lines.join("\\n")+(lines.length?"\\n":"")],{type:"application/x-ndjson"});
  var a=document.createElement("a"); a.href=URL.createObjectURL(blob);
  a.download="labels-"+sheet+"-"+who.replace(/[^A-Za-z0-9_.-]+/g,"_")+".jsonl";
  document.body.appendChild(a); a.click(); a.remove();
  document.getElementById("status").textContent="Saved "+lines.length+" label(s) to "+a.download;
});
paint();
})();
"""


def _weight(w: float | None) -> str:
    if w is None:
        return "failure rule (met = the failure happened)"
    value = int(w) if float(w).is_integer() else w
    return f"weight {value:+}" + (" (met = points lost)" if w < 0 else "")


def render_review_page(sheet_id: str, benchmark: str, questions: Sequence[ReviewQuestion], lang: str = "en",
                       id_field: str = "id", font_face: FontFace | None = None) -> str:
    """The whole page as a string; every piece of data passes through html.escape. `font_face` embeds the CJK
    glyphs the page uses (None: the reader's system fonts only)."""
    e = escape
    n_items = sum(len(q.criteria) for q in questions)
    parts = [
        f'<body data-sheet="{e(sheet_id)}" data-benchmark="{e(benchmark)}" data-id-field="{e(id_field)}">',
        f"<header><h1>Blind review &middot; {e(benchmark)} &middot; sheet {e(sheet_id)}</h1>",
        '<div class="bar"><label>Rater <input id="rater" autocomplete="off" placeholder="your name"></label>',
        f'<span><span id="done">0</span> / {n_items} labelled</span>',
        '<button id="save" type="button">Save labels</button><span id="status" class="muted"></span></div>',
        '<p class="muted">For each criterion decide whether the reply meets it: Met, Not met or Unsure. '
        "Your progress is kept in this browser; Save labels downloads a file for "
        "<code>rubric-engine agree labels=FILE</code>.</p></header><main>",
    ]
    for qn, q in enumerate(questions, 1):
        parts.append(f'<section class="q" id="q{qn}"><h2>Question {qn} of {len(questions)} '
                     f'<span class="muted">{e(q.qid)}</span></h2><div class="dialogue">')
        for role, kind, text in q.dialogue:
            who = kind.capitalize() or "Turn"
            parts.append(f'<div class="turn {e(kind)}"><span class="role">{who} ({e(role)})</span>{e(text)}</div>')
        parts.append(f'</div><h3>Reply under review</h3><div class="reply">{e(q.reply)}</div><ol class="items">')
        for c in q.criteria:
            parts.append(
                f'<li class="item" data-key="{e(c.key)}" data-q="{e(q.qid)}" data-i="{c.index}">'
                f'<p class="crit">{e(c.text)}</p><div><span class="w">#{c.index} &middot; {e(_weight(c.weight))}</span></div>'
                '<div><button type="button" data-v="met" aria-pressed="false">Met</button>'
                '<button type="button" data-v="not_met" aria-pressed="false">Not met</button>'
                '<button type="button" data-v="unsure" aria-pressed="false">Unsure</button></div>'
                '<input class="note" type="text" placeholder="note (optional)"></li>')
        parts.append("</ol></section>")
    parts.append(f"</main><script>{SCRIPT}</script></body></html>\n")
    body = "\n".join(parts)
    font, note = font_face(body) if font_face is not None else ("", "")
    if note:
        body = body.replace("<main>", f'<main><p class="muted">{e(note)}</p>', 1)
    return "\n".join(["<!doctype html>", f'<html lang="{e(lang)}"><head><meta charset="utf-8">',
                      '<meta name="viewport" content="width=device-width, initial-scale=1">',
                      f"<title>Review sheet {e(sheet_id)}</title>{font}<style>{CSS}</style></head>", body])
