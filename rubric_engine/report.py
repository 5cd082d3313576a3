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

__all__ = ["StageProgress", "make_progress", "print_summary", "print_length", "format_tokens"]


def format_tokens(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else str(n)


def _money(x: float | None) -> str:
    return "n/a" if x is None else f"${x:.4f}" if x < 1 else f"${x:.2f}"


class StageProgress:
    """Counts one stage (generate / judge) and shows it as rich bars or periodic plain lines."""

    def __init__(self, name: str, total: int, board: "ProgressBoard") -> None:
        self.name, self.total, self.board = name, total, board
        self.done = self.cached = self.errors = self.tokens = 0
        self.cost: float | None = None
        self.task: TaskID | None = None

    def advance(self, *, cached: bool = False, error: bool = False, tokens: int = 0, cost: float | None = None) -> None:
        self.done += 1
        self.cached += int(cached)
        self.errors += int(error)
        self.tokens += tokens
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost
        self.board.refresh(self)

    def line(self) -> str:
        return (f"{self.name}: {self.done}/{self.total} | cache hits {self.cached} | errors {self.errors} "
                f"| tokens {format_tokens(self.tokens)} | cost {_money(self.cost)}")


class ProgressBoard:
    """Owns the display for all stages of one run; a context manager."""

    def __init__(self, mode: str, console: Console, interval: float = 5.0) -> None:
        if mode == "auto":
            mode = "rich" if console.is_terminal else "plain"
        self.mode, self.console, self.interval = mode, console, interval
        self._progress: Progress | None = None
        self._last_line = 0.0
        self._t0 = time.monotonic()

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

    def refresh(self, st: StageProgress) -> None:
        if self._progress is not None and st.task is not None:
            stats = (f"cache {st.cached} · err {st.errors} · tok {format_tokens(st.tokens)} · {_money(st.cost)}")
            self._progress.update(st.task, completed=st.done, stats=stats)
        elif self.mode == "plain":
            now = time.monotonic()
            if st.done == st.total or now - self._last_line >= self.interval:
                self._last_line = now
                rate = st.done / max(now - self._t0, 1e-9)
                eta = (st.total - st.done) / rate if rate > 0 and st.done < st.total else 0.0
                self._print(f"{st.line()} | eta {eta:.0f}s")

    def _print(self, text: str) -> None:
        print(text, file=sys.stderr if self.console.stderr else sys.stdout, flush=True)


def make_progress(mode: str, console: Console) -> ProgressBoard:
    return ProgressBoard(mode, console)


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def _label(labels: Mapping[str, str], locale: str, fallback: str) -> str:
    """Label in the benchmark's locale with English beside it when they differ."""
    local = labels.get(locale) or labels.get("en") or fallback
    en = labels.get("en")
    return f"{local} ({en})" if en and en != local else local


def print_summary(summary: Mapping[str, Any], taxonomy: Mapping[str, Any], console: Console,
                  locale: str = "en", subsets_labels: Mapping[str, Mapping[str, str]] | None = None,
                  scenario_labels: Mapping[str, Mapping[str, str]] | None = None) -> None:
    """Tables: overall, dimensions, abilities, subsets with decay, scenarios, run statistics.

    `taxonomy` is the resolved spec's taxonomy as plain data ({"dimensions": [...]}).
    """
    c = summary["counts"]
    head = Table(title=f"{summary['benchmark']} {summary.get('benchmark_version', '')}: "
                       f"{summary['candidate']['name']} judged by {summary['judge']['name']}", show_header=False)
    head.add_row("Overall", _fmt(summary["overall"]))
    head.add_row("Questions scored", f"{c['scored']} of {c['questions']}")
    console.print(head)

    dims = Table(title="Dimensions and abilities (0-100)")
    dims.add_column("Dimension / ability")
    dims.add_column("Score", justify="right")
    for dim in taxonomy.get("dimensions", []):
        dims.add_row(f"[bold]{_label(dim.get('labels', {}), locale, dim['id'])}", f"[bold]{_fmt(summary['dimensions'].get(dim['id']))}")
        for ab in dim.get("abilities", []):
            dims.add_row(f"  {_label(ab.get('labels', {}), locale, ab['id'])}", _fmt(summary["abilities"].get(ab["id"])))
    console.print(dims)

    subsets = {k: v for k, v in summary.get("subsets", {}).items() if k not in ("decay_pct", "decay_base")}
    if subsets:
        t = Table(title="Subsets")
        t.add_column("Subset")
        t.add_column("Score", justify="right")
        for name, val in subsets.items():
            t.add_row(_label((subsets_labels or {}).get(name, {}), locale, name), _fmt(val))
        if summary["subsets"].get("decay_pct") is not None:
            t.add_row(f"decay % (relative to {summary['subsets'].get('decay_base')})", _fmt(summary["subsets"]["decay_pct"]))
        console.print(t)

    if summary.get("scenarios"):
        t = Table(title="Scenarios")
        t.add_column("Scenario")
        t.add_column("Score", justify="right")
        for name, val in summary["scenarios"].items():
            t.add_row(_label((scenario_labels or {}).get(name, {}), locale, name), _fmt(val))
        console.print(t)

    if summary.get("length"):
        print_length(summary["length"], taxonomy, console, locale)

    stats = Table(title="Run statistics")
    for col in ("", "candidate", "judge"):
        stats.add_column(col, justify="right" if col else "left")
    tok, cost, calls = summary["tokens"], summary["cost"], summary.get("calls", {})
    stats.add_row("prompt tokens", *(format_tokens(tok[r]["prompt"]) for r in ("candidate", "judge")))
    stats.add_row("completion tokens", *(format_tokens(tok[r]["completion"]) for r in ("candidate", "judge")))
    stats.add_row("cost", *(_money(cost[r]) for r in ("candidate", "judge")))
    if calls:
        stats.add_row("calls made / cache hits", *(f"{calls[r]['made']} / {calls[r]['cache_hits']}" for r in ("candidate", "judge")))
    stats.add_row("errors", f"{c['candidate_errors']}", f"{c['judge_errors']}")
    stats.add_row("catastrophic failures", "", f"{c['catastrophic']}")
    console.print(stats)
    if c["candidate_errors"] or c["judge_errors"]:
        console.print(f"[yellow]{c['candidate_errors']} candidate error(s) and {c['judge_errors']} judge error(s) "
                      f"are excluded from every score; see samples.jsonl.")


def _rho(r: Mapping[str, Any] | None) -> str:
    if not r:
        return "—"
    ci = "" if r.get("lo") is None else f" [{r['lo']:+.2f}, {r['hi']:+.2f}]"
    return f"{r['rho']:+.2f}{ci} (n={r['n']})"


def print_length(length: Mapping[str, Any], taxonomy: Mapping[str, Any], console: Console, locale: str = "en") -> None:
    """Reply length against score: Spearman rho with its bootstrap interval, overall and per ability."""
    measures = [m for m in ("chars", "tokens") if m in length.get("overall", {})]
    t = Table(title="Reply length vs score (Spearman rho, 95% bootstrap interval over questions)")
    t.add_column("Scope")
    for m in measures:
        t.add_column("characters" if m == "chars" else "tokens", justify="right")
    t.add_row("[bold]question score", *(_rho(length["overall"].get(m)) for m in measures))
    for dim in taxonomy.get("dimensions", []):
        for ab in dim.get("abilities", []):
            r = length.get("abilities", {}).get(ab["id"]) or {}
            t.add_row(f"  {_label(ab.get('labels', {}), locale, ab['id'])}", *(_rho(r.get(m)) for m in measures))
    console.print(t)
    if length.get("note"):
        console.print(f"length: {length['note']}", highlight=False, soft_wrap=True)
    for m in length.get("strong") or []:
        r = length["overall"][m]
        console.print(f"[yellow]note:[/] question score and reply length ({m}) correlate strongly: "
                      f"rho {r['rho']:+.2f} [{r['lo']:+.2f}, {r['hi']:+.2f}]", highlight=False, soft_wrap=True)
