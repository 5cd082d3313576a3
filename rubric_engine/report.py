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

__all__ = ["StageProgress", "make_progress", "print_summary", "format_tokens"]


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
            self._progress.console.print(text, highlight=False, soft_wrap=True)
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

    stats = Table(title="Run statistics")
    for col in ("", "candidate", "judge"):
        stats.add_column(col, justify="right" if col else "left")
    tok, cost, calls = summary["tokens"], summary["cost"], summary.get("calls", {})
    stats.add_row("prompt tokens", *(format_tokens(tok[r]["prompt"]) for r in ("candidate", "judge")))
    stats.add_row("completion tokens", *(format_tokens(tok[r]["completion"]) for r in ("candidate", "judge")))
    stats.add_row("cost", *(_money(cost[r]) for r in ("candidate", "judge")))
    if calls:
        stats.add_row("calls sent / cache hits", *(f"{calls[r]['made']} / {calls[r]['cache_hits']}" for r in ("candidate", "judge")))
    stats.add_row("errors", f"{c['candidate_errors']}", f"{c['judge_errors']}")
    stats.add_row("catastrophic failures", "", f"{c['catastrophic']}")
    console.print(stats)
    if c["candidate_errors"] or c["judge_errors"]:
        console.print(f"[yellow]{c['candidate_errors']} candidate error(s) and {c['judge_errors']} judge error(s) "
                      f"are excluded from every score; see samples.jsonl.")
