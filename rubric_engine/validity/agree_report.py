"""agreement.md and the one-paragraph headline, from the dict agree.compute_agreement returns.

Why separate: the numbers are computed once (validity/agree.py); this module only words and tabulates them,
so the JSON and the Markdown can never disagree.
"""

from __future__ import annotations

import re
from html import escape
from typing import Any

__all__ = ["headline", "render_markdown", "render_html"]

FIELD_NAMES = {"ability": "ability", "dimension": "dimension", "subset": "subset", "candidate": "candidate",
               "weight_sign": "weight sign", "reply_length": "reply length"}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None) -> str:
    return "undefined" if x is None else f"{x:.2f}"


def _ci(ci: list[float] | None, pct: bool = False) -> str:
    if not ci:
        return ""
    f = _pct if pct else _num
    return f" [{f(ci[0])}, {f(ci[1])}]"


def _main_pair(result: dict[str, Any], judge: str) -> dict[str, Any]:
    return next(p for p in result["pairs"] if p["a"] == judge and p["b"] == "human majority")


def _concentration(result: dict[str, Any], judge: str, overall: dict[str, Any]) -> str:
    """The group with the most disagreements beyond its proportional share (groups of 5+ items)."""
    total_dis = sum(overall["disagreements"].values())
    if not total_dis or not overall["n"]:
        return "no disagreement to locate"
    rate = total_dis / overall["n"]
    best, best_excess = None, 0.0
    for field, groups in result["by"][judge].items():
        if len(groups) < 2:
            continue
        for value, g in groups.items():
            dis = sum(g["disagreements"].values())
            excess = dis - rate * g["n"]
            if g["n"] >= 5 and excess > best_excess:
                best, best_excess = (field, g, dis), excess
    if best is None:
        return "disagreement is spread evenly across the breakdowns"
    field, g, dis = best
    fp, ff = g["disagreements"]["a_met_b_not"], g["disagreements"]["a_not_b_met"]
    direction = "mostly false passes" if fp > ff else ("mostly false fails" if ff > fp else "false passes and fails alike")
    return (f"disagreement concentrated in {FIELD_NAMES.get(field, field)} \"{g['label']}\" "
            f"({dis} of {g['n']} items disagree vs {100 * rate:.0f}% overall; {direction})")


def headline(result: dict[str, Any], judge: str) -> str:
    """The paragraph at the top of agreement.md for one judge."""
    p = _main_pair(result, judge)
    ci = p["ci"]
    n_h = len(result["raters"]["humans"])
    parts = [f"{judge} vs the human majority ({p['n']} items in {p['questions']} questions, {n_h} rater(s)): "
             f"raw agreement {_pct(p['raw'])} (a constant rater would get {_pct(p['chance_floor'])})"]
    kappa = f"Cohen's kappa {_num(p['cohen_kappa'])}{_ci(ci['cohen_kappa'])}"
    if p["cohen_kappa"] is None:
        kappa += " (every item one class: read AC1)"
    parts.append(f"{kappa}, Gwet's AC1 {_num(p['gwet_ac1'])}{_ci(ci['gwet_ac1'])}, "
                 f"Krippendorff's alpha {_num(p['krippendorff_alpha'])}{_ci(ci['krippendorff_alpha'])}")
    parts.append(f"false-pass {_pct(p['false_pass'])}{_ci(ci['false_pass'], True)} and false-fail "
                 f"{_pct(p['false_fail'])}{_ci(ci['false_fail'], True)}")
    ceil = p.get("ceiling")
    parts.append(f"humans agree with each other {_pct(ceil['raw'])} (kappa {_num(ceil['cohen_kappa'])}, "
                 f"AC1 {_num(ceil['gwet_ac1'])}) on these items" if ceil else
                 "no human-human ceiling (fewer than two raters on these items)")
    parts.append(_concentration(result, judge, p))
    sl = result["score_level"].get(judge) or {}
    md = sl.get("mean_difference") or {}
    if md.get("mean") is not None:
        side = "higher" if md["mean"] > 0 else "lower"
        parts.append(f"on {sl['replies']} fully labelled replies the judge's question scores are "
                     f"{abs(md['mean']):.1f} points {side} than the humans'{_ci(md.get('ci'))}")
    return "; ".join(parts) + "."


def _table(rows: list[dict[str, Any]], first: str) -> list[str]:
    out = [f"| {first} | n | prevalence (ref) | raw | chance floor | kappa | AC1 | alpha | false-pass | false-fail | ceiling raw |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["ci"]
        ceil = r.get("ceiling")
        out.append(f"| {r['name']} | {r['n']} | {_pct(r['prevalence_b'])} | {_pct(r['raw'])} | {_pct(r['chance_floor'])} | "
                   f"{_num(r['cohen_kappa'])}{_ci(c['cohen_kappa'])} | {_num(r['gwet_ac1'])}{_ci(c['gwet_ac1'])} | "
                   f"{_num(r['krippendorff_alpha'])}{_ci(c['krippendorff_alpha'])} | {_pct(r['false_pass'])} | "
                   f"{_pct(r['false_fail'])} | {_pct(ceil['raw']) if ceil else 'n/a'} |")
    return out


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(result: dict[str, Any]) -> str:
    """agreement.md: headline first, then pairs, humans, breakdowns, score level, disputed items."""
    lines = [f"# Judge-human agreement: {_cell(result['benchmark'])}", ""]
    for j, text in result["headline"].items():
        lines += [_cell(text), ""]
    lines += [f"Intervals: {result['settings']['interval']} ({result['settings']['n_boot']} replicates, "
              f"seed {result['settings']['seed']}). Chance floor: the raw agreement of a rater that always gives "
              "the reference's more common label. False-pass: the judge says met where the reference says not met "
              "(share of the reference's not-met items); false-fail the reverse.", ""]
    if result["warnings"]:
        lines += ["Warnings:", ""] + [f"- {_cell(w)}" for w in result["warnings"]] + [""]
    lines += ["## Pairs", ""]
    lines += _table([dict(p, name=f"{_cell(p['a'])} vs {_cell(p['b'])}") for p in result["pairs"]], "pair")
    notes = [f"- {_cell(p['a'])} vs {_cell(p['b'])}: {'; '.join(p['notes'])}" for p in result["pairs"] if p["notes"]]
    lines += [""] + notes + ([""] if notes else [])
    h = result["humans"]
    lines += ["## Human raters", "", f"{len(h['raters'])} rater(s) ({_cell(', '.join(h['raters']))}), {h['items']} items, "
              f"{h['items_with_2plus']} with two or more labels, {h['ties']} tie(s). Krippendorff's alpha across all "
              f"raters: {_num(h['krippendorff_alpha'])}{_ci(h['ci'])}." + (f" {h['note']}." if h.get("note") else ""), ""]
    for j, fields in result["by"].items():
        lines += [f"## Breakdowns: {_cell(j)} vs the human majority", ""]
        for field, groups in fields.items():
            lines += [f"### By {FIELD_NAMES.get(field, field)}", ""]
            lines += _table([dict(g, name=_cell(g["label"])) for g in groups.values()], FIELD_NAMES.get(field, field))
            lines.append("")
        sl = result["score_level"][j]
        md = sl["mean_difference"]
        lines += [f"## Score level: {_cell(j)}", "",
                  f"{sl['replies']} replies with every criterion labelled. Judge minus human question score: "
                  f"{_num(md['mean'])}{_ci(md['ci'])} points (scale {sl['scale']:g}); Spearman {_num(sl['spearman'])}; "
                  f"Kendall tau between candidate rankings {_num(sl['kendall_tau'])}.", ""]
        for key in ("note", "note_ranking"):
            if sl.get(key):
                lines += [sl[key] + ".", ""]
        if sl["candidates"]:
            lines += ["| candidate | replies | judge score | human score |", "|---|---|---|---|"]
            lines += [f"| {_cell(c)} | {v['replies']} | {v['judge']:.1f} | {v['human']:.1f} |" for c, v in sl["candidates"].items()]
            lines.append("")
        lines += [f"## Most disputed criteria: {_cell(j)}", "", "| criterion | question | n | judge met, humans not | "
                  "humans met, judge not |", "|---|---|---|---|---|"]
        lines += [f"| {_cell(d['criterion'])} | {_cell(d['question'])} | {d['n']} | {d['false_pass']} | {d['false_fail']} |"
                  for d in result["disputed"][j]]
        lines.append("")
    return "\n".join(lines)


_PIPE = re.compile(r"(?<!\\)\|")
_CSS = ('body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","PingFang SC","Microsoft YaHei",'
        '"Noto Sans CJK SC",sans-serif;max-width:1200px;margin:24px auto;padding:0 16px;line-height:1.45;color:#1d2330}'
        'table{border-collapse:collapse;font-size:.9em;margin:8px 0}th,td{border:1px solid #d0d4da;padding:3px 7px}'
        'th{background:#f2f4f7}p.lead{font-size:1.05em;background:#f6f8fb;padding:8px 12px;border-left:4px solid #5b7bd5}')


def render_html(markdown: str, title: str) -> str:
    """agreement.html: the Markdown report as one self-contained page (no script, no URL).

    It converts only what render_markdown writes (headings, paragraphs, lists, pipe tables), and
    escapes every piece of text, so criterion texts from the data stay text.
    """
    out = ["<!doctype html>", f'<html><head><meta charset="utf-8"><title>{escape(title)}</title>'
           f"<style>{_CSS}</style></head><body>"]
    rows: list[list[str]] = []
    items: list[str] = []
    first_para = True

    def cells(line: str) -> list[str]:
        return [escape(c.strip().replace("\\|", "|")) for c in _PIPE.split(line.strip())[1:-1]]

    def flush() -> None:
        if rows:
            head, body = rows[0], [r for r in rows[1:] if not all(set(c) <= set("-") for c in r)]
            out.append("<table><thead><tr>" + "".join(f"<th>{c}</th>" for c in head) + "</tr></thead><tbody>"
                       + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in body)
                       + "</tbody></table>")
            rows.clear()
        if items:
            out.append("<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>")
            items.clear()

    for line in markdown.splitlines():
        if line.startswith("|"):
            rows.append(cells(line))
            continue
        if line.startswith("- "):
            items.append(escape(line[2:]))
            continue
        flush()
        if line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")), 3)
            out.append(f"<h{level}>{escape(line.lstrip('#').strip())}</h{level}>")
        elif line.strip():
            cls = ' class="lead"' if first_para and len(out) > 2 else ""
            first_para = first_para and not cls
            out.append(f"<p{cls}>{escape(line)}</p>")
    flush()
    out.append("</body></html>\n")
    return "\n".join(out)
