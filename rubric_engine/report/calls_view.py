"""One question's calls from the run's transcripts, as plain text (`rubric-engine show`) and as HTML (report.html).

Why one module for both: `show` and the report's drill-down tell the same story (the question's record, then
every call in order: who was asked, the rendered messages, the raw reply, the parse error that led to a re-ask,
each retry, tokens, cost, latency, cache hit), so they read the same `Call`s (store/transcripts.py) and say the
same things. Text is printed as it is, never wrapped; HTML escapes every text and folds each call away.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable

from rubric_engine.record.types import Record
from rubric_engine.errors import RubricEngineError
from rubric_engine.store.transcripts import TRANSCRIPTS_DIR, WHERE, Call, Transcripts

__all__ = ["call_heading", "calls_text", "calls_html", "record_text", "run_calls", "clipped", "PAGE_CHARS",
           "QUESTION_CHARS"]

QUESTION_CHARS = 40_000  # texts of one question's calls embedded in report.html; `show` prints them all
QUESTION_CALLS = 200  # and calls listed (each a folded heading once its texts are past QUESTION_CHARS)
PAGE_CHARS = 6_000_000  # and of all questions of one run: past it, the drill-down names `show` instead

_KIND = {"reply": "reply", "cache_hit": "cache hit", "rejected": "reply refused by the parser", "error": "error"}


def clipped(text: Any, max_chars: int = QUESTION_CHARS) -> Any:
    """A record's text as the report embeds it: past `max_chars`, cut with a note naming where the whole is."""
    if not isinstance(text, str) or len(text) <= max_chars:
        return text
    return text[:max_chars] + f"\n[... {len(text) - max_chars} more characters: samples.jsonl, rubric-engine show]"


def call_heading(c: Call) -> str:
    """One line naming the call: number, role, model, where it belongs, outcome, usage."""
    where = [f"{k} {c.context[k]}" for k in WHERE if k in c.context]
    if c.repeat:
        where.append(f"repeat {c.repeat}")
    if c.reask:
        where.append(f"re-ask {c.reask}" + (f" of call {c.reask_of}" if c.reask_of else ""))
    usage = [f"{c.prompt_tokens}+{c.completion_tokens} tokens",
             "cost unknown" if c.cost is None else f"${c.cost:.6f}",
             f"{c.latency:.2f} s" if c.latency is not None else "", f"{c.attempts} request(s)" if c.attempts else "",
             f"{len(c.retries)} retried" if c.retries else ""]
    return " · ".join([f"call {c.number}", f"{c.role} {c.model} ({c.model_id})", *where, _KIND.get(c.kind, c.kind),
                       *(u for u in usage if u)])


def _sections(c: Call) -> list[tuple[str, str]]:
    """(title, text) blocks of one call, in reading order."""
    out = [(f"message {i} [{role}]", text) for i, (role, text) in enumerate(c.messages, 1)]
    if c.reply is not None:
        out.append(("reply", c.reply))
    if c.parse_error:
        title = "parse error (the model was asked again)" if c.kind == "rejected" else "parse error"
        out.append((title, c.parse_error))
    if c.error:
        out.append(("error" + (f" (HTTP {c.status})" if c.status else ""), c.error))
    for r in c.retries:
        status = f"HTTP {r.status}" if r.status else "no status"
        wait = f"; waited {r.wait:.2f} s" if r.wait is not None else ""
        out.append((f"retry after attempt {r.attempt}", f"{status}: {r.error}{wait}"))
    return out


def record_text(rec: Record | None) -> list[str]:
    """The question's record (samples.jsonl, decoded) in a few lines: score, errors, each criterion's verdict."""
    if rec is None:
        return ["(no record of this question in the run: it was not finished)"]
    lines = [f"score: {rec.score}" + (" (zeroed: candidate error)" if rec.zeroed else ""),
             f"candidate error: {rec.candidate_error or 'none'}",
             f"judge error: {rec.judge_error or 'none'}"]
    for c in rec.criteria:
        hit = {True: "met", False: "not met", None: "no verdict"}.get(c.hit, str(c.hit))
        weight = f" ({c.weight})" if c.weight is not None else ""
        lines.append(f"  {c.index}. {hit}{weight}: {c.text}")
        if c.reasoning:
            lines.append(f"     reasoning: {c.reasoning}")
    return lines


def calls_text(question: str, rec: Record | None, calls: Sequence[Call]) -> str:
    """The whole story of one question, plain text."""
    lines = [f"question {question}", *record_text(rec), "",
             f"{len(calls)} call(s) recorded" + ("" if calls else " (no transcripts for this question)")]
    for c in calls:
        lines += ["", "=" * 8 + " " + call_heading(c)]
        for title, text in _sections(c):
            lines += [f"--- {title} ---", text]
    return "\n".join(lines) + "\n"


def calls_html(calls: Sequence[Call], max_chars: int = QUESTION_CHARS) -> str:
    """The calls as collapsed <details> blocks ('' when none); texts past `max_chars` in all are cut, saying so."""
    if not calls:
        return ""
    budget, parts = max_chars, []
    for n, c in enumerate(calls):
        if n >= QUESTION_CALLS:  # a long conversation's hundreds of calls: a count, never a block for each
            parts.append(f'<p class="note">{len(calls) - n} more call(s) not embedded (a question shows its first '
                         f"{QUESTION_CALLS}): rubric-engine show</p>")
            break
        body = []
        for title, text in _sections(c):
            if budget <= 0:  # a long conversation's request: its turns are not listed one empty block each
                body.append('<p class="note">[... the rest of this call: rubric-engine show]</p>')
                break
            shown = text[:budget]
            budget -= len(shown)
            cut = (f"\n[... {len(text) - len(shown)} more characters: rubric-engine show]"
                   if len(shown) < len(text) else "")
            body.append(f'<div class="call-part"><b>{html.escape(title)}</b>'
                        f"<pre>{html.escape(shown + cut)}</pre></div>")
        parts.append(f"<details class=\"call call-{html.escape(c.kind)}\"><summary>{html.escape(call_heading(c))}"
                     f"</summary>{''.join(body)}</details>")
    return f"<div class=\"calls\"><p class=\"note\">Calls ({len(calls)}):</p>{''.join(parts)}</div>"


def run_calls(run_dir: Path | None, alone: bool = True) -> Callable[[Record], str]:
    """For the report's drill-down: a record -> its question's calls as HTML ('' without transcripts). Indexed
    once per run; the page stays bounded (QUESTION_CHARS a question, PAGE_CHARS in all). A page of several runs
    (a leaderboard, `alone` False) names `rubric-engine show` instead of embedding every run's calls."""
    recorded = run_dir is not None and (Path(run_dir) / TRANSCRIPTS_DIR).is_dir()
    index: Transcripts | None = None
    left, broken = [PAGE_CHARS], [""]
    if recorded and alone and run_dir is not None:
        try:
            index = Transcripts(Path(run_dir))
        except (RubricEngineError, OSError) as exc:  # damaged transcripts cost the page its calls, not the page
            broken[0] = str(exc)

    def one(sample: Record) -> str:
        qid = sample.id
        if not isinstance(qid, str) or not recorded:
            return ""
        where = f"rubric-engine show {html.escape(str(run_dir))} {html.escape(qid)}"
        if broken[0]:
            return f'<p class="note">Calls not shown (transcripts unreadable: {html.escape(broken[0])})</p>'
        if index is None:
            return f'<p class="note">Calls: {where}</p>'
        if left[0] <= 0:
            return f'<p class="note">Calls not embedded (the page is at its size limit): {where}</p>'
        try:
            out = calls_html(index.calls(qid), min(QUESTION_CHARS, left[0]))
        except (RubricEngineError, OSError) as exc:
            broken[0] = str(exc)
            return f'<p class="note">Calls not shown (transcripts unreadable: {html.escape(broken[0])})</p>'
        left[0] -= len(out)
        return out

    return one
