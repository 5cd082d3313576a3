"""The Python API: `evaluate()` and `evaluate_async()`, one benchmark run from a program or a notebook.

Why a face of its own: `run_benchmark` is the command line's engine (settings in, tables printed, a summary dict
out). A program wants model entries by name or LiteLLM id without Hydra, nothing printed unless it asks, a typed
result, an exception when nothing was scored, and a call that works where an event loop already runs (a Jupyter
cell): `evaluate_async` awaits the run on the caller's loop, `evaluate` runs it on a loop of its own (run/loops.py).
The options are the command line's keys that matter to a program, with the same meanings and defaults
(docs/python-api.md); the run directory is the same as the command line's (same files, same resume rule).
"""

from __future__ import annotations

import io
import os
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubric_engine.record.summary import Summary
from rubric_engine.errors import ConfigError, NothingScored
from rubric_engine.run.loops import run_sync
from rubric_engine.run.result import EvalResult, nothing_scored, result_of

if TYPE_CHECKING:
    from rubric_engine.models.entries import ModelSpec

__all__ = ["evaluate", "evaluate_async", "EvalOptions", "settings_for", "benchmark_slug"]

ModelRef = Any  # an entry name, a LiteLLM id, a dict entry or a ModelSpec (models/named.model_entry)


@dataclass(frozen=True)
class EvalOptions:
    """The options of `evaluate` / `evaluate_async`, each the command-line key of the same name (docs/cli.md)
    unless said otherwise. `run_dir`: the run's directory (the command line's hydra.run.dir=); None: a new one
    under `output_dir`/<benchmark>/<time>_<id>. The same call with the same run_dir resumes an interrupted run and
    pays for nothing twice; `resume=False` refuses a run_dir that already holds a run's files. `progress`: True
    (or auto / rich / plain) shows progress and warnings on stderr; `console`: a rich Console that gets everything
    the command line prints (warnings, the result tables, the outputs line). With neither nothing is printed:
    what the run would have said is in `EvalResult.notes`. `spread`: where the run's shards run, the command
    line's `ray=` / `shards=` (`rubric_engine.cluster.shards.RaySpread(address, shards)`, the `ray` extra); None:
    this process."""

    run_dir: str | Path | None = None
    output_dir: str | Path = "outputs"
    resume: bool = True
    retry_errors: bool = False
    limit: int | None = None
    subset: str | None = None
    ids: Sequence[str] | None = None
    data_path: str | Path | None = None
    benchmark_dirs: Sequence[str] = ()
    answers: str | Path | None = None
    from_run: str | Path | None = None
    user: ModelRef = None
    jury_rule: str = "majority"
    repeats: int | str | None = None  # a number, or "auto" (judge/adaptive.py)
    repeats_max: int | None = None
    repeats_prior: Sequence[str | Path] = ()
    repeats_confidence: float | None = None
    samples: int = 1
    concurrency: int | str = 16
    rpm: float | None = None
    tpm: float | None = None
    max_retries: int = 4
    timeout: float | None = None
    workers: int | str = 1
    cache: bool = True
    cache_dir: str | Path | None = None
    candidate_errors: str | None = None
    trust_code: bool = False
    progress: bool | str = False
    console: Any = None
    spread: Any = None


_OPTIONS = tuple(f.name for f in fields(EvalOptions))


def benchmark_slug(value: Any) -> str:
    """A directory-safe name for a benchmark given by name or by path (`benchmark=.`: the directory's own name)."""
    path = Path(str(value).rstrip("/\\"))
    name = (path.resolve().name if path.name in ("", ".", "..") else path.name) or str(value)
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def _options(given: Mapping[str, Any]) -> EvalOptions:
    unknown = sorted(set(given) - set(_OPTIONS))
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], _OPTIONS, n=1, cutoff=0.6)
        raise ConfigError(f"evaluate(): unknown option {unknown[0]}={given[unknown[0]]!r}"
                          f"{f' (did you mean {close[0]}?)' if close else ''}; options: {', '.join(_OPTIONS)}")
    return EvalOptions(**given)


def _whole(value: Any, key: str, minimum: int, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{key}={value!r} is not valid; give a whole number >= {minimum}"
                          + (" (or None)" if optional else ""))


def _run_dir(benchmark: str, opts: EvalOptions) -> Path:
    if opts.run_dir is not None:
        out = Path(opts.run_dir)
        if not opts.resume and out.is_dir() and any(out.iterdir()):
            raise ConfigError(f"run_dir={out} already holds a run's files and resume=False; give another run_dir, "
                              "or resume=True to continue that run")
        return out
    stamp = f"{datetime.now():%Y-%m-%d_%H-%M-%S-%f}_{os.getpid()}{secrets.token_hex(2)}"
    return Path(opts.output_dir) / benchmark_slug(benchmark) / stamp


def _jury(judges: Sequence[ModelRef], timeout: float | None) -> list[ModelSpec]:
    """The jury `judge=[...]` names, each member resolved; a None among them (a variable left unset) is refused."""
    from rubric_engine.models.named import model_entry

    jury = []
    for n, entry in enumerate(judges, 1):
        spec = model_entry(entry, "judge", timeout)
        if spec is None:
            raise ConfigError(f"judge: jury member {n} is None; name every juror (an entry name, a LiteLLM id, "
                              "a dict entry or a ModelSpec) or leave it out of the list")
        jury.append(spec)
    return jury


def _settings(benchmark: str, candidate: ModelRef, judge: ModelRef, opts: EvalOptions) -> Any:
    """`RunSettings` from the API's words, checked as the command line checks its keys."""
    from rubric_engine.models.concurrency import parse_concurrency
    from rubric_engine.models.named import model_entry
    from rubric_engine.models.workers import workers_count
    from rubric_engine.run.settings import RunSettings

    _whole(opts.limit, "limit", 0, optional=True)
    _whole(opts.max_retries, "max_retries", 0)
    try:
        concurrency = parse_concurrency(opts.concurrency)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    progress = ("auto" if opts.progress else "none") if isinstance(opts.progress, bool) else str(opts.progress)
    if progress not in ("auto", "rich", "plain", "none"):
        raise ConfigError(f"progress={opts.progress!r} is not valid; use True, False, 'auto', 'rich' or 'plain'")
    jury = _jury(judge, opts.timeout) if isinstance(judge, (list, tuple)) else []
    path = (lambda p: None if p is None else str(p))  # noqa: E731
    return RunSettings(
        benchmark=str(benchmark), out_dir=_run_dir(str(benchmark), opts),
        candidate=model_entry(candidate, "candidate", opts.timeout),
        judge=None if jury else model_entry(judge, "judge", opts.timeout), jury=jury, jury_rule=opts.jury_rule,
        user=model_entry(opts.user, "user", opts.timeout), timeout=opts.timeout,
        benchmark_dirs=[str(d) for d in opts.benchmark_dirs], data_path=path(opts.data_path), subset=opts.subset,
        limit=opts.limit, ids=[str(i) for i in opts.ids] if opts.ids is not None else None,
        stage="score" if opts.answers or opts.from_run else "full", answers=path(opts.answers),
        from_run=path(opts.from_run), concurrency=concurrency, rpm=opts.rpm, tpm=opts.tpm,
        max_retries=opts.max_retries, workers=workers_count(opts.workers), cache_dir=path(opts.cache_dir), cache_enabled=bool(opts.cache),
        progress=progress, quiet=opts.console is None, trust_code=opts.trust_code, repeats=opts.repeats,
        repeats_max=opts.repeats_max, repeats_prior=[str(d) for d in opts.repeats_prior],
        repeats_confidence=opts.repeats_confidence,
        samples=opts.samples, candidate_errors=opts.candidate_errors, retry_errors=opts.retry_errors)


def settings_for(benchmark: str, candidate: ModelRef = None, judge: ModelRef = None, **options: Any) -> Any:
    """The `RunSettings` `evaluate` would run with (models resolved, options checked); for a reward built from the
    same words (reward/rubric.py), which judges where it is called: `spread` is refused."""
    opts = _options(options)
    if opts.spread is not None:
        raise ConfigError("spread= shards a benchmark run (evaluate()); a reward judges where it is called: for Ray "
                          "actors use rubric_engine.RubricReward(..., pool=N, ray=ADDRESS) (docs/rewards.md)")
    return _settings(benchmark, candidate, judge, opts)


def _consoles(opts: EvalOptions) -> tuple[Any, Any, io.StringIO | None]:
    """(progress and warnings, results, the buffer holding what was not printed): the given console for both;
    progress=True: stderr for progress and warnings, the results unprinted; else nothing printed at all."""
    from rich.console import Console

    from rubric_engine.text.terminal import UNBOUNDED, SafeConsole

    if opts.console is not None:
        return opts.console, opts.console, None
    buffer = io.StringIO()
    kept = SafeConsole(file=buffer, width=UNBOUNDED, color_system=None)
    quiet = Console(quiet=True)
    return (SafeConsole(stderr=True) if opts.progress else kept), quiet, buffer


def _spread(opts: EvalOptions) -> Any:
    """The run's Spread (run/shards.py), checked: something with its `count` and `run`."""
    spread = opts.spread
    if spread is None:
        return None
    if not (callable(getattr(spread, "count", None)) and callable(getattr(spread, "run", None))):
        raise ConfigError(f"spread={spread!r} is not where shards run; give "
                          "rubric_engine.cluster.shards.RaySpread(address, shards) (pip install 'rubric-engine[ray]') "
                          "or None")
    return spread


def _prepare(benchmark: str, candidate: ModelRef, judge: ModelRef, given: Mapping[str, Any]) -> tuple[Any, ...]:
    opts = _options(given)
    return (_settings(benchmark, candidate, judge, opts), *_consoles(opts), _spread(opts))


def _finish(settings: Any, summary: Summary, buffer: io.StringIO | None) -> EvalResult:
    """The typed result, or NothingScored when the run scored nothing (the command line's exit 1)."""
    why = nothing_scored(summary)
    if why:
        raise NothingScored(why, Path(settings.out_dir), summary)
    notes = tuple(line for line in (buffer.getvalue().splitlines() if buffer is not None else []) if line.strip())
    return result_of(summary, Path(settings.out_dir), notes)


def _discard(settings: Any) -> None:
    """A run refused before it wrote anything leaves no directory behind (as on the command line)."""
    from rubric_engine.store.layout import discard_untouched

    discard_untouched(Path(settings.out_dir))


async def evaluate_async(benchmark: str, candidate: ModelRef = None, judge: ModelRef = None,
                         **options: Any) -> EvalResult:
    """Run `benchmark` (a shipped name or a spec directory) with `candidate` judged by `judge` (None: the judge
    the benchmark declares; a list: a jury) on the caller's event loop, and return its `EvalResult`. A model is
    an entry name (`gpt-4o`, `mock`: the shipped conf/ entries and your own), a LiteLLM id
    (`openai/gpt-4o-mini`), a dict entry (`{"model": ..., "api_base": ..., "api_key_env": ...}`, or `{"entry":
    "openai_compatible", ...}` changing a named one) or a ModelSpec. `options`: see EvalOptions. Raises
    `NothingScored` when the run scored nothing, and the package's other errors (rubric_engine.errors) as the
    command line reports them. The model calls run on this loop; loading the spec and data and writing the
    results block it meanwhile."""
    from rubric_engine.run.runner import run_benchmark_async

    settings, console, results, buffer, spread = _prepare(benchmark, candidate, judge, options)
    try:
        summary = await run_benchmark_async(settings, console, results, spread=spread)
    except BaseException:
        _discard(settings)
        raise
    return _finish(settings, summary, buffer)


def evaluate(benchmark: str, candidate: ModelRef = None, judge: ModelRef = None, **options: Any) -> EvalResult:
    """`evaluate_async` for code that does not await: with no event loop running in this thread it runs one;
    inside a running loop (a Jupyter cell, an `async def` body) it runs the run on a loop of its own in a worker
    thread and waits, so no `await` is needed (that loop is blocked meanwhile; await `evaluate_async` to keep it
    turning). Interrupting the wait (Ctrl-C, a notebook's stop button) stops the run with its files closed: the
    same call with the same `run_dir` resumes it."""
    return run_sync(evaluate_async(benchmark, candidate, judge, **options))
