"""What a person sees: live progress per stage and the result tables at the end.

Why plain lines beside rich: when stdout is not a terminal rich draws once at the end, so a CI
log would look silent for the whole run; there we print a line every few seconds instead.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn
from rich.table import Table

from rubric_engine.report.costlines import cost_lines
from rubric_engine.report.scales import print_scale
from rubric_engine.text.terminal import shown

__all__ = ["ProgressBoard", "StageProgress", "print_summary", "breakdown_tables", "print_length", "format_tokens",
           "print_panel", "print_sampling"]


def format_tokens(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else str(n)


def _money(x: float | None) -> str:
    return "n/a" if x is None else f"${x:.4f}" if x < 1 else f"${x:.2f}"


class StageProgress:
    """Counts one stage (generate / judge) and shows it as rich bars or periodic plain lines.

    Each stage has its own clock (started when its first call starts) and its own plain-line timer, so
    the rate and ETA describe this stage only and one stage never silences the other.
    """

    def __init__(self, name: str, total: int, board: "ProgressBoard") -> None:
        self.name, self.total, self.board = name, total, board
        self.done = self.cached = self.errors = self.tokens = 0
        self.cost: float | None = None
        self.task: TaskID | None = None
        self.started: float | None = None
        self.finished: float | None = None
        self.last_line = 0.0

    def start(self) -> None:
        """The stage's first call begins (idempotent); its clock and ETA count from here."""
        if self.started is None:
            self.started = time.monotonic()

    def advance(self, *, cached: bool = False, error: bool = False, tokens: int = 0, cost: float | None = None) -> None:
        self.start()
        self.done += 1
        self.cached += int(cached)
        self.errors += int(error)
        self.tokens += tokens
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost
        if self.done >= self.total and self.finished is None:
            self.finished = time.monotonic()
        self.board.refresh(self)

    @property
    def elapsed(self) -> float:
        """Seconds from the stage's first call to its last result (or to now while it runs)."""
        if self.started is None:
            return 0.0
        return (self.finished or time.monotonic()) - self.started

    def line(self) -> str:
        elapsed = self.elapsed
        rate = self.done / elapsed if elapsed > 0 else 0.0
        left = self.total - self.done
        # too few results say little about the rate (the first ones all started at once): no ETA yet
        settled = self.done >= min(5, max(1, self.total // 10)) and self.done > 1
        eta = "done" if not left else (f"eta {left / rate:.0f}s" if rate > 0 and settled else "eta ?")
        pct = 100 * self.done / self.total if self.total else 100.0
        return (f"{self.name}: {self.done}/{self.total} ({pct:.0f}%) | {rate:.1f}/s | cache hits {self.cached} "
                f"| errors {self.errors} | tokens {format_tokens(self.tokens)} | cost {_money(self.cost)} "
                f"| {elapsed:.0f}s | {eta}")


class ProgressBoard:
    """Owns the display for all stages of one run; a context manager."""

    def __init__(self, mode: str, console: Console, interval: float = 5.0) -> None:
        if mode == "auto":
            mode = "rich" if console.is_terminal else "plain"
        self.mode, self.console, self.interval = mode, console, interval
        self._progress: Progress | None = None

    def __enter__(self) -> "ProgressBoard":
        if self.mode == "rich":
            self._progress = Progress(
                TextColumn("[bold]{task.description:<9}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"), TimeRemainingColumn(), console=self.console, transient=False)
            self._progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(None, None, None)

    def stage(self, name: str, total: int) -> StageProgress:
        st = StageProgress(name, total, self)
        if self._progress is not None:
            st.task = self._progress.add_task(name, total=total, stats="")
        elif self.mode == "plain":
            self._print(f"{name}: {total} to do")
        return st

    def note(self, text: str) -> None:
        """A one-line event (LiteLLM loading, a retry, a rate-limit wait) shown in every mode but none."""
        if self._progress is not None:
            self._progress.console.print(shown(text), highlight=False, soft_wrap=True)
        elif self.mode != "none":
            self._print(text)

    def refresh(self, st: StageProgress) -> None:
        if self._progress is not None and st.task is not None:
            stats = (f"cache {st.cached} · err {st.errors} · tok {format_tokens(st.tokens)} · {_money(st.cost)}")
            self._progress.update(st.task, completed=st.done, stats=stats)
        elif self.mode == "plain":
            now = time.monotonic()
            if st.done == st.total or st.done == 1 or now - st.last_line >= self.interval:
                st.last_line = now
                self._print(st.line())

    def _print(self, text: str) -> None:
        # plain print, never rich: a CI log gets one unwrapped line whatever its width
        print(shown(text, markup=False, newlines=True), file=sys.stderr if self.console.stderr else sys.stdout, flush=True)


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def _label(labels: Mapping[str, str], locale: str, fallback: str) -> str:
    """Label in the benchmark's locale with English beside it when they differ."""
    local = labels.get(locale) or labels.get("en") or fallback
    en = labels.get("en")
    return f"{local} ({en})" if en and en != local else local


def breakdown_tables(summary: Mapping[str, Any], spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The spec's breakdowns as display tables: {id, by, title, rows: [(label, score)]}.

    The one source every report (console, leaderboard, HTML) draws breakdown tables from; a subset table
    carries the decay row when the spec declares one. Group labels come from the breakdown's `groups`,
    else the taxonomy / report.subsets / report.scenarios labels, else the group name."""
    locale = spec.get("locale", "en")
    report = spec.get("report") or {}
    names: dict[str, Mapping[str, str]] = {}
    for d in (spec.get("taxonomy") or {}).get("dimensions", []):
        names[d["id"]] = d.get("labels", {})
        names.update({a["id"]: a.get("labels", {}) for a in d.get("abilities", [])})
    by_kind = {"subset": report.get("subsets") or {}, "scenario": report.get("scenarios") or {}}
    out = []
    for b in report.get("breakdowns") or []:
        scores = (summary.get("breakdowns") or {}).get(b["id"]) or {}
        labels = {**names, **by_kind.get(b["by"], {}), **(b.get("groups") or {})}
        rows = [(_label(labels.get(g, {}), locale, g[len(b.get("prefix") or ""):] or g), v) for g, v in scores.items()
                if not (b["by"] == "subset" and g in ("decay_pct", "decay_base"))]
        sub = summary.get("subsets") or {}
        if b["by"] == "subset" and sub.get("decay_pct") is not None:
            rows.append((f"decay % (relative to {sub.get('decay_base')})", sub["decay_pct"]))
        out.append({"id": b["id"], "by": b["by"], "title": _label(b.get("labels") or {}, locale, b["id"]),
                    "rows": rows, "groups": len(scores)})
    return out


def print_summary(summary: Mapping[str, Any], spec: Mapping[str, Any], console: Console) -> None:
    """Tables: overall (with its bootstrap interval), one per declared breakdown, run statistics.

    `spec` is the resolved spec as plain data (spec.resolved.json)."""
    c = summary["counts"]
    head = Table(title=f"{summary['benchmark']} {summary.get('benchmark_version', '')}: "
                       f"{summary['candidate']['name']} " + (f"judged by {summary['judge']['name']}" if
                       summary["judge"].get("model") or summary["judge"]["name"] != "none" else "checked by the engine"),
                 show_header=False)
    head.add_row("Overall", _fmt(summary["overall"]))
    iv = summary.get("interval")
    if iv:
        head.add_row("95% interval / bootstrap std", f"{_fmt(iv['lo'])}-{_fmt(iv['hi'])} / {_fmt(iv['std'])}")
    head.add_row("Questions scored", f"{c['scored']} of {c['questions']}")
    if summary.get("dialogues"):  # data.expand: one question per turn, the overall a mean over dialogues
        d = summary["dialogues"]
        head.add_row("Dialogues scored (overall: their mean)", f"{d['scored']} of {d['dialogues']}; "
                     f"mean over turns {_fmt(d['turn_mean'])}")
    if "no_choice" in c:  # multiple choice: replies without a readable option letter, scored as wrong
        head.add_row("No option letter read (scored wrong)", str(c["no_choice"]))
    rating = summary.get("rating") or {}  # ratings against a reference (shapes/rating.py): each pass's number
    for p in rating.get("passes") or []:
        head.add_row(f"{shown(p['heading'])} (unparseable)", f"{_fmt(p['benchmark'])} ({p['unparseable']})")
    if rating.get("pass_used"):
        head.add_row("Reported (best pass)", f"{_fmt(rating['benchmark'])}: {shown(rating['pass_used'])}")
    console.print(head)
    if summary.get("scale"):  # scores on a scale: per-turn and per-group means with intervals (report/scales.py)
        print_scale(summary, spec, console)
    for table in [] if summary.get("scale") else breakdown_tables(summary, spec):
        t = Table(title=f"{shown(table['title'])} (0-{spec.get('scoring', {}).get('scale', 100):g})")
        t.add_column(shown(table["title"]))
        t.add_column("Score", justify="right")
        for label, value in table["rows"]:
            t.add_row(shown(label), _fmt(value))
        console.print(t)

    if summary.get("length"):
        print_length(summary["length"], spec.get("taxonomy") or {}, console, spec.get("locale", "en"))

    stats = Table(title="Run statistics")
    roles = ("candidate", "judge", *(["user"] if "user" in summary["tokens"] else []))  # user: a simulated user
    for col in ("", *roles):
        stats.add_column(col, justify="right" if col else "left")
    tok, cost, calls = summary["tokens"], summary["cost"], summary.get("calls", {})
    stats.add_row("prompt tokens", *(format_tokens(tok[r]["prompt"]) for r in roles))
    stats.add_row("completion tokens", *(format_tokens(tok[r]["completion"]) for r in roles))
    stats.add_row("cost", *(_money(cost[r]) for r in roles))
    if calls:
        stats.add_row("calls sent / cache hits", *(f"{calls[r]['made']} / {calls[r]['cache_hits']}" if r in calls
                                                   else "" for r in roles))
    stats.add_row("errors", f"{c['candidate_errors']}", f"{c['judge_errors']}",
                  *([f"{c.get('user_errors', 0)}"] if "user" in roles else []))
    if c.get("cut_at_max_turns"):
        stats.add_row("conversations cut at max_turns", "", "", *([f"{c['cut_at_max_turns']}"] if "user" in roles
                                                                   else []))
    policy = (summary.get("aggregation") or {}).get("candidate_errors", "exclude")
    stats.add_row("candidate errors are", f"scored 0 ({c.get('candidate_errors_zeroed', 0)})" if policy == "zero"
                  else "left out", "left out")
    if spec.get("failure_rules"):
        stats.add_row("catastrophic failures", "", f"{c['catastrophic']}")
        for rule in spec["failure_rules"] if "vetoes" in summary else []:  # each rule (veto group): its questions
            name = _label(rule.get("labels") or {}, spec.get("locale", "en"), rule["id"])
            stats.add_row(f"  vetoed by {shown(name)}", "", f"{summary['vetoes'].get(rule['id'], 0)}")
    if c.get("truncated"):
        stats.add_row("replies cut off (finish_reason length)", f"{c['truncated']}", "")
    console.print(stats)
    for line in cost_lines(calls):  # prompt-cache tokens and savings, concurrency=auto (report/costlines.py)
        console.print(line, highlight=False, soft_wrap=True)
    hits = {r: calls[r]["cache_hits"] for r in ("candidate", "judge") if calls and calls.get(r, {}).get("cache_hits")}
    if hits:  # said plainly: a reused answer under a new model name is the local-server trap (see README)
        console.print("[bold yellow]answers from the cache:[/] " + ", ".join(f"{r} {n}" for r, n in hits.items())
                      + " (a local model swapped behind the same id and URL needs a new `revision`)",
                      highlight=False, soft_wrap=True)
    zeroed = c.get("candidate_errors_zeroed", 0)
    if zeroed:
        console.print(f"[yellow]{zeroed} question(s) whose candidate call failed are scored 0 "
                      "(candidate_errors: zero); see samples.jsonl.")
    if c["candidate_errors"] - zeroed or c["judge_errors"]:
        console.print(f"[yellow]{c['candidate_errors'] - zeroed} candidate error(s) and {c['judge_errors']} judge error(s) "
                      f"are excluded from every score; see samples.jsonl.")
    if c.get("unscored"):
        console.print(f"[yellow]{c['unscored']} question(s) have no positive points and are excluded "
                      "(aggregation.no_positive_points: exclude); see samples.jsonl.")


def print_pairwise(summary: Mapping[str, Any], console: Console) -> None:
    """A pairwise run's lines (summary.json `pairwise`): the baseline, games won / tied / lost, how often the two
    orders disagree, and the baseline model's calls and cost when one was called."""
    p = summary.get("pairwise")
    if not p:
        return
    g, pos = p["games"], p["position"]
    console.print(f"win rate against {shown(p['baseline']['name'])} (ties as half, strong verdicts x"
                  f"{p['strong_weight']:g}): {_fmt(summary['overall'])}; games won / tied / lost: {g['wins']} / "
                  f"{g['ties']} / {g['losses']}", highlight=False, soft_wrap=True)
    if pos["questions"]:
        console.print(f"position inconsistency: {pos['inconsistent']} of {pos['questions']} questions "
                      f"({100 * pos['inconsistency']:.1f}%) get a different outcome when the order is swapped",
                      highlight=False, soft_wrap=True)
    calls, tokens = (summary.get("calls") or {}).get("baseline"), (summary.get("tokens") or {}).get("baseline")
    if calls and tokens:
        console.print(f"baseline: {calls['made']} calls sent / {calls['cache_hits']} cache hits, "
                      f"{format_tokens(tokens['prompt'])} prompt + {format_tokens(tokens['completion'])} completion "
                      f"tokens, cost {_money((summary.get('cost') or {}).get('baseline'))}",
                      highlight=False, soft_wrap=True)


def print_anchored(summary: Mapping[str, Any], console: Console) -> None:
    """An anchored run's lines (summary.json `anchored`, shapes/anchored.py): the length rule, each anchor's
    reward (x100, win_much +100 ... lose_much -100) and outcomes, their mixture, and the rating with its interval."""
    a = summary.get("anchored")
    if not a:
        return

    def say(text: str) -> None:
        console.print(text, highlight=False, soft_wrap=True)
    say(f"length rule: {shown(a['length_rule'])}")
    for name, row in a["anchors"].items():
        if row["reward"] is None:
            say(f"against {shown(name)}: no game counted")
            continue
        say(f"against {shown(name)}: reward {row['reward']:+.1f} over {row['games']} games (win_much / win / tie / "
            f"lose / lose_much: {row['win_much']} / {row['win']} / {row['tie']} / {row['lose']} / {row['lose_much']}; "
            f"{row['discounted']} wins discounted by the length rule)")
    if a.get("mixture_of_rewards") is not None:
        say(f"mixture of rewards (mean over anchors): {a['mixture_of_rewards']:+.1f}")
    r = a.get("rating")
    if r and r.get("value") is not None:
        interval = f"95% interval {r['low']:.0f}-{r['high']:.0f}" if r.get("low") is not None else "no interval"
        fixed = ", ".join(f"{shown(n)} {v:g}" for n, v in r["fixed"].items())
        say(f"rating on the anchors' scale: {r['value']:.0f} ({interval}; anchors fixed at {fixed})")


def _rho(r: Mapping[str, Any] | None) -> str:
    if not r:
        return "—"
    ci = "" if r.get("lo") is None else f" [{r['lo']:+.2f}, {r['hi']:+.2f}]"
    return f"{r['rho']:+.2f}{ci} (n={r['n']})"


def print_length(length: Mapping[str, Any], taxonomy: Mapping[str, Any], console: Console, locale: str = "en") -> None:
    """Reply length against score: Spearman rho with its bootstrap interval, overall and per ability."""
    measures = [m for m in ("chars", "tokens") if m in length.get("overall", {})]
    if not any(length["overall"].get(m) for m in measures):  # no rho anywhere: one line saying why, no table
        n = length.get("questions") or 0
        why = (f"only {n} scored question{'s' if n != 1 else ''} (3 needed)" if n < 3 else
               "the replies' lengths or the question scores do not vary (a mock's replies are all one length)")
        console.print(f"reply length vs score: not computed: {why}", highlight=False, soft_wrap=True)
        return
    t = Table(title="Reply length vs score (Spearman rho, 95% bootstrap interval over questions)")
    t.add_column("Scope")
    for m in measures:
        t.add_column("characters" if m == "chars" else "tokens", justify="right")
    t.add_row("[bold]question score", *(_rho(length["overall"].get(m)) for m in measures))
    for dim in taxonomy.get("dimensions", []):
        for ab in dim.get("abilities", []):
            r = length.get("abilities", {}).get(ab["id"]) or {}
            t.add_row(f"  {shown(_label(ab.get('labels', {}), locale, ab['id']))}", *(_rho(r.get(m)) for m in measures))
    console.print(t)
    if length.get("note"):
        console.print(f"length: {length['note']}", highlight=False, soft_wrap=True)
    for m in length.get("strong") or []:
        r = length["overall"][m]
        console.print(f"[yellow]note:[/] question score and reply length ({m}) correlate strongly: "
                      f"rho {r['rho']:+.2f} [{r['lo']:+.2f}, {r['hi']:+.2f}]", highlight=False, soft_wrap=True)


def _print_adaptive(noise: Mapping[str, Any], console: Console) -> None:
    """judge.repeats=auto: its calls against a single pass and fixed repeats at its cap, and its flip rates."""
    from rubric_engine.stats.noise import OVERALL

    a, fr = noise["adaptive"], noise["groups"].get(OVERALL, {}).get("flip_rate") or {}
    ratio = f"{a['calls_per_single_pass']:.2f}x" if a["calls_per_single_pass"] is not None else "-"
    flips = (f"{fr['rate']:.1%} of the {fr['units']} verdicts graded again flip" if fr.get("rate") is not None
             else "no verdict graded again")
    final = _num(a["final_flip_rate"] * 100 if a["final_flip_rate"] is not None else None)
    console.print(f"judge.repeats=auto: {a['calls']:,} judge calls = {ratio} a single pass ({a['single_pass_calls']:,}), "
                  f"{a['saved_calls']:,} fewer than judge.repeats={a['repeats_max']}; {flips}; estimated final "
                  f"verdicts flipping {final}%", highlight=False, soft_wrap=True)


def print_panel(summary: Mapping[str, Any], console: Console) -> None:
    """Console lines for the noise and jury sections (repeated gradings, several judges)."""
    from rubric_engine.stats.noise import OVERALL

    noise, jury = summary.get("noise"), summary.get("jury")
    if noise and noise.get("adaptive"):
        _print_adaptive(noise, console)
    elif noise:
        g = noise["groups"][OVERALL]
        fr, sd = g["flip_rate"], g["score_sd_across_repeats"]
        ci = f" (95% {fr['ci'][0]:.1%}-{fr['ci'][1]:.1%})" if fr.get("ci") else ""
        console.print(f"judge noise over {noise['repeats']} gradings: {fr['rate']:.1%} of verdicts flip{ci}; "
                      f"overall score SD across gradings {_num(sd)}, per-question score SD "
                      f"{_num(g['question_score_sd'])}", highlight=False, soft_wrap=True)
    if jury:
        alpha = (jury["alpha"].get(OVERALL) or {}).get("krippendorff_alpha")
        own = ", ".join(f"{name} {_num(j['overall'])}" for name, j in jury["judges"].items())
        console.print(f"jury ({jury['rule']}, ties {jury['tie'].replace('_', ' ')}): {_num(summary.get('overall'))}; "
                      f"each judge alone: {own}; Krippendorff alpha between judges {_num(alpha, 3)}",
                      highlight=False, soft_wrap=True)


def print_sampling(summary: Mapping[str, Any], console: Console) -> None:
    """One console line for the sampling block (candidate.samples > 1)."""
    from rubric_engine.stats.sampling import OVERALL

    block = summary.get("sampling")
    if not block:
        return
    g = block["groups"][OVERALL]
    levels = ((summary.get("interval") or {}).get("nested") or {}).get("levels") or []
    console.print(f"samples={block['samples']} replies per question: overall SD across samples "
                  f"{_num(g['score_sd_across_samples'])}, per-question score SD {_num(g['question_score_sd'])}; "
                  f"interval resamples {', then '.join(levels)}", highlight=False, soft_wrap=True)


def _num(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"
