"""The experts' page for drafted criteria: one self-contained HTML file, opened from disk, offline.

Why like the raters' review page (validity/review_page.py): every text (dialogue, drafted criterion, reason) is
written into the HTML escaped, on the server side, and the inline script carries no data, only behaviour, so no
drafted text can reach script context. An expert accepts, edits (text, weight, group, polarity in place) or
rejects each criterion; progress lives in the browser's localStorage under the sheet id, and "Save sheet"
downloads a CSV with exactly the columns of the CSV sheets (criteria_review.COLUMNS), which `review merge`
reads like any of them. The CJK glyphs the page uses are embedded by the caller's font face.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape
from typing import Any

from rubric_engine.text.pagefonts import PAGE_FONTS

__all__ = ["render_criteria_page"]

FontFace = Callable[[str], "tuple[str, str]"]

CSS = """
body{font-family:__PAGE_FONTS__;margin:0;background:#f6f7f9;color:#1d2330;line-height:1.5}
header{position:sticky;top:0;background:#fff;border-bottom:1px solid #d8dce3;padding:.6em 1em;z-index:1}
main{max-width:60em;margin:0 auto;padding:1em}
section{background:#fff;border:1px solid #d8dce3;border-radius:6px;padding:1em;margin-bottom:1.2em}
.turn{white-space:pre-wrap;background:#eef1f6;padding:.3em .6em;margin:.3em 0;border-radius:4px}
li.c{margin:.8em 0;padding:.5em;border:1px solid #e2e5ea;border-radius:4px}
li.c.done{border-color:#8fbf8f;background:#f4fbf4}
textarea{width:100%;box-sizing:border-box;font:inherit}
.m{color:#555;font-size:.9em}
button.on[data-v=accept]{background:#2e7d32;color:#fff}
button.on[data-v=edit]{background:#1d4ed8;color:#fff}
button.on[data-v=reject]{background:#c62828;color:#fff}
""".replace("__PAGE_FONTS__", PAGE_FONTS)

SCRIPT = """
(function(){
var body=document.body, sheet=body.getAttribute("data-sheet"), store="rubric-criteria:"+sheet;
var state={expert:"",rows:{}};
try{var s=JSON.parse(localStorage.getItem(store)||"null"); if(s&&s.rows){state=s;}}catch(e){}
function keep(){try{localStorage.setItem(store,JSON.stringify(state));}catch(e){}}
var items=Array.prototype.slice.call(document.querySelectorAll("li.c")), FIELDS=["text","weight","group","polarity"];
function row(li){var k=li.getAttribute("data-key"); return state.rows[k]||(state.rows[k]={});}
function paint(){
  var done=0;
  items.forEach(function(li){
    var r=row(li);
    Array.prototype.forEach.call(li.querySelectorAll("button"),function(b){b.classList.toggle("on",b.getAttribute("data-v")===r.decision);});
    FIELDS.forEach(function(f){var el=li.querySelector("[name="+f+"]"); if(r[f]!==undefined&&document.activeElement!==el){el.value=r[f];}});
    li.classList.toggle("done",!!r.decision); if(r.decision){done++;}
  });
  document.getElementById("done").textContent=String(done);
}
items.forEach(function(li){
  Array.prototype.forEach.call(li.querySelectorAll("button"),function(b){
    b.addEventListener("click",function(){var r=row(li),v=b.getAttribute("data-v"); r.decision=(r.decision===v)?"":v; keep(); paint();});});
  FIELDS.forEach(function(f){li.querySelector("[name="+f+"]").addEventListener("input",function(e){
    var r=row(li); r[f]=e.target.value; r.decision="edit"; keep(); paint();});});
});
var who=document.getElementById("expert"); who.value=state.expert||"";
who.addEventListener("input",function(){state.expert=who.value; keep();});
function cell(v){v=String(v==null?"":v); if(/^[=+\\-@\\t\\r]/.test(v)&&isNaN(Number(v))){v="'"+v;} return '"'+v.replace(/"/g,'""')+'"';}
document.getElementById("save").addEventListener("click",function(){
  var name=(who.value||"").trim();
  if(!name){document.getElementById("status").textContent="Type your name (expert) first."; who.focus(); return;}
  var lines=[["sheet_id","key","id","text","weight","group","polarity","reason","decision","expert","note"].join(",")];
  items.forEach(function(li){
    var r=row(li), v={};
    FIELDS.forEach(function(f){v[f]=li.querySelector("[name="+f+"]").value;});
    lines.push([sheet,li.getAttribute("data-key"),li.getAttribute("data-q"),v.text,v.weight,v.group,v.polarity,
      li.getAttribute("data-reason"),r.decision||"",name,""].map(cell).join(","));
  });
  var blob=new Blob(["\\ufeff"+lines.join("\\r\\n")+"\\r\\n"],{type:"text/csv"});
  var a=document.createElement("a"); a.href=URL.createObjectURL(blob);
  a.download="criteria-"+sheet+"-"+name.replace(/[^A-Za-z0-9_.-]+/g,"_")+".csv";
  document.body.appendChild(a); a.click(); a.remove();
  document.getElementById("status").textContent="Saved "+a.download;
});
paint();
})();
"""


def _criterion(c: dict[str, Any]) -> str:
    e = escape
    polarity = "".join(f'<option{" selected" if p == c["polarity"] else ""}>{p}</option>' for p in ("positive", "pitfall"))
    return (f'<li class="c" data-key="{e(c["key"])}" data-q="{e(c["id"])}" data-reason="{e(c["reason"])}">'
            f'<textarea name="text" rows="2">{e(c["text"])}</textarea>'
            f'<div class="m">{e(c["key"])} &middot; weight <input name="weight" size="3" value="{e(str(c["weight"]))}"> '
            f'&middot; group <input name="group" size="12" value="{e(str(c["group"] or ""))}"> &middot; '
            f'<select name="polarity">{polarity}</select> &middot; why: {e(c["reason"])}</div>'
            '<div><button type="button" data-v="accept">Accept</button><button type="button" data-v="edit">Edit'
            '</button><button type="button" data-v="reject">Reject</button></div></li>')


def render_criteria_page(sheet_id: str, benchmark: str, rows: Sequence[dict[str, Any]],
                         dialogues: dict[str, list[tuple[str, str]]], font_face: FontFace | None = None) -> str:
    """The whole page as a string; every piece of data passes through html.escape."""
    e = escape
    by_q: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_q.setdefault(r["id"], []).append(r)
    parts = [f'<body data-sheet="{e(sheet_id)}"><header><b>Drafted criteria &middot; {e(benchmark)} &middot; sheet '
             f'{e(sheet_id)}</b> <label>Expert <input id="expert" autocomplete="off" placeholder="your name"></label> '
             f'<span><span id="done">0</span> / {len(rows)} decided</span> <button id="save" type="button">Save sheet'
             '</button> <span id="status" class="m"></span><p class="m">Accept, edit (change the text, weight, group '
             'or polarity in place) or reject each criterion. Save sheet downloads a CSV for <code>rubric-engine '
             'review merge</code>.</p></header><main>']
    for qid, crits in by_q.items():
        parts.append(f"<section><h2>{e(qid)}</h2>")
        parts += [f'<div class="turn"><b>{e(who)}</b> {e(text)}</div>' for who, text in dialogues.get(qid, [])]
        parts.append("<ol>" + "".join(_criterion(c) for c in crits) + "</ol></section>")
    parts.append(f"</main><script>{SCRIPT}</script></body></html>\n")
    page = "\n".join(parts)
    font, note = font_face(page) if font_face is not None else ("", "")
    if note:
        page = page.replace("<main>", f'<main><p class="m">{e(note)}</p>', 1)
    return (f'<!doctype html>\n<html><head><meta charset="utf-8"><title>Criteria sheet {e(sheet_id)}</title>'
            f"{font}<style>{CSS}</style></head>\n{page}")
