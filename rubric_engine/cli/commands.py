"""Subcommands that make no model call: `validate`, `cache info|clear`, and the dry run's table of the plan of calls.

Why apart from the runner: these must stay cheap (no LiteLLM import unless a price is looked up)
and they answer questions a user asks before spending money.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from rubric_engine.datatypes import dialogue_of
from rubric_engine.errors import ConfigError
from rubric_engine.report.costlines import estimate_lines
from rubric_engine.models.entries import declared_line, params_text, replies_per_request
from rubric_engine.spec.aggregation import rules_of
from rubric_engine.text.terminal import SafeConsole, shown

__all__ = ["validate_command", "cache_command", "data_command", "print_estimate"]


def validate_command(benchmark: str, benchmark_dirs: Sequence[str], data_path: str | None,
                     cache_dir: str | None, console: Console | None = None, trust_code: bool = False) -> int:
    """Load and check a spec and its data; print what the spec declares, with counts from the data."""
    from rubric_engine.dataset.load import load_dataset
    from rubric_engine.spec.checks import check_breakdowns_against_data
    from rubric_engine.spec.files import benchmark_search_path
    from rubric_engine.spec.load import load_spec

    console = console or SafeConsole()
    spec = load_spec(benchmark, benchmark_search_path(benchmark_dirs), trust_code)
    ds = load_dataset(spec, data_path, Path(cache_dir) if cache_dir else None)
    check_breakdowns_against_data(spec, ds.questions)
    qs = ds.questions
    from rubric_engine.shapes.registry import check_templates, shape_for

    shape = shape_for(spec)
    check_templates(spec, qs)  # an undefined variable or a sandbox violation fails here, before any call
    items = Counter(c.ability for q in qs for c in q.criteria if c.ability)
    rule_items = Counter(r for q in qs for c in q.criteria for r in rules_of(c.rule, c.tags, spec.failure_rules))
    n_items = sum(1 for q in qs for c in q.criteria if c.rule is None)
    trust = {"pinned": "checked against the spec's data.sha256", "first_use": "trusted on first use (recorded "
             "at the first download, checked on every later use)", "local": "local file, hashed as given"}[ds.trust]
    console.print(f"[bold]{shown(spec.name)}[/] {shown(spec.version)} ({shown(spec.locale)}) from "
                  f"{shown(', '.join(str(f) for f in spec.files))}", highlight=False, soft_wrap=True)
    console.print(f"data: {shown(ds.source)} sha256 {ds.sha256} ({trust})", highlight=False, soft_wrap=True)
    jm = spec.judge.model if spec.judge else None  # a stranger's spec decides where judge prompts (and a key) go
    console.print(shown(declared_line("judge:", jm.name, jm.model, jm.api_base, jm.api_key_env, jm.params)) if jm
                  else "judge: none (every item is checked by the engine)", highlight=False, soft_wrap=True)
    described = shape.verdict.described(spec) if spec.judge is not None else None
    if described is not None:  # a comparison: its labels and where baseline calls go
        console.print(shown(described), highlight=False, soft_wrap=True)
    um = spec.conversation.simulator.model if spec.conversation.simulator else None
    if um is not None:  # the declared simulated user: its prompts (and a named key) go where the spec says too
        console.print(shown(declared_line("user:", um.name, um.model, um.api_base, um.api_key_env, um.params)),
                      highlight=False, soft_wrap=True)
    subsets = Counter(q.subset for q in qs if q.subset)
    parts = [f"{len(qs)} questions" + (f" ({', '.join(f'{n} {k}' for k, n in sorted(subsets.items()))})" if subsets else ""),
             f"{n_items} {'ability' if spec.taxonomy is not None else 'scored rubric'} items"]
    if spec.failure_rules:
        parts.append(f"{sum(rule_items.values())} failure-rule items")
    n_checked = sum(1 for q in qs for c in q.criteria if c.check is not None)
    if n_checked:  # decided by the engine (scoring/checks.py), every one validated as the data was read
        parts.append(f"{n_checked} items checked by the engine")
    console.print(", ".join(parts), highlight=False, soft_wrap=True)
    console.print(shape.verdict.scoring_line(spec), highlight=False, soft_wrap=True, markup=False)
    if spec.data.expand is not None:  # one question per assistant turn: the overall is over dialogues
        console.print(f"data.expand: {spec.data.expand}: {len(qs)} turns from {len({dialogue_of(q.id) for q in qs})} "
                      "dialogues; a dialogue scores the mean of its turns, the overall is the mean over dialogues "
                      "(the interval resamples dialogues)", highlight=False, soft_wrap=True, markup=False)

    if spec.taxonomy is not None:
        tax = Table(title="Taxonomy")
        for col in ("Dimension", "Ability", "Label in data", "Items"):
            tax.add_column(col, justify="right" if col == "Items" else "left")
        for dim in spec.taxonomy.dimensions:
            for i, ab in enumerate(dim.abilities):
                tax.add_row(shown(spec.label(dim.labels, "en")) if i == 0 else "", shown(spec.label(ab.labels, "en")),
                            shown(", ".join(ab.data_labels)), str(items.get(ab.id, 0)))
        for rule in spec.failure_rules:
            tax.add_row("(failure rule)", shown(spec.label(rule.labels, "en")),
                        shown(", ".join([*rule.data_labels, *(f"tag {t}" for t in rule.tags)])),
                        str(rule_items.get(rule.id, 0)))
        console.print(tax)
    for b in spec.report.breakdowns:
        if b.by in ("ability", "dimension"):
            continue  # shown by the taxonomy table
        counts = _group_counts(qs, b.by, b.prefix)
        t = Table(title=shown(f"{spec.label(b.labels, 'en') or b.id} ({b.by}{': ' + b.prefix if b.prefix else ''})"))
        names = {"scenario": spec.report.scenarios, "subset": spec.report.subsets}.get(b.by, {})
        rows = [(group, n, _english_or_declared(b.groups.get(group) or names.get(group), spec.locale))
                for group, n in counts.most_common()]
        langs = sorted({lang for _, _, (lang, _) in rows if lang})  # the header names the language(s) shown
        for col in ("Group", f"Label ({', '.join(langs)})" if langs else "Label", "Questions"):
            t.add_column(col, justify="right" if col == "Questions" else "left")
        for group, n, (_, text) in rows:
            t.add_row(shown(group) if group else "(empty)", shown(text), str(n))
        console.print(t)
    for w in ds.warnings:
        console.print(f"[yellow]warning:[/] {shown(w)}", highlight=False, soft_wrap=True)
    console.print("[green]ok[/]: spec and data are valid")
    return 0


def _english_or_declared(labels: Any, locale: str) -> tuple[str, str]:
    """(language, label) validate shows for a group: the English label, else the spec's own language's, else
    the first declared; ('', '') for none. The column header names the language(s) actually shown."""
    labels = dict(getattr(labels, "labels", labels) or {})
    for lang in ("en", locale, *labels):
        if labels.get(lang):
            return str(lang), str(labels[lang])
    return "", ""


def _group_counts(questions: Sequence[Any], by: str, prefix: str) -> Counter[str]:
    """Questions per group of a breakdown (a question counts once per group it has)."""
    counts: Counter[str] = Counter()
    for q in questions:
        if by == "subset":
            counts.update([q.subset] if q.subset else [])
        elif by == "scenario":
            counts.update([q.scenario])
        elif by == "example_tag":
            counts.update(t for t in dict.fromkeys(q.tags) if t.startswith(prefix))
        elif by == "item_tag":
            counts.update({t for c in q.criteria for t in c.tags if t.startswith(prefix)})
    return counts


def cache_command(action: str = "info", directory: str | None = None, console: Console | None = None) -> int:
    """`rubric-engine cache [info|clear] [cache.dir=DIR]`: the durable store of completed calls."""
    from rubric_engine.models.cache import ResultCache, default_cache_dir

    console = console or SafeConsole()
    if action not in ("info", "clear"):
        raise ConfigError(f"cache: unknown action {action!r}; use 'info' or 'clear'")
    path = Path(directory) if directory else default_cache_dir()
    if action == "info" and not path.exists():
        console.print(f"cache {path}: empty (not created yet)", highlight=False, soft_wrap=True)
        return 0
    from rubric_engine.errors import CacheError

    try:
        cache = ResultCache(path)
        if action == "clear":
            n = cache.clear()
            cache.close()
            console.print(f"cache {path}: removed {n} entries", highlight=False, soft_wrap=True)
            return 0
    except CacheError as exc:
        if action != "clear":
            raise
        ResultCache.remove_files(path)
        console.print(f"cache {path}: it could not be read ({exc.__cause__ or exc}); removed its files",
                      highlight=False, soft_wrap=True)
        return 0
    try:
        info = cache.info()
        console.print(f"cache {info['directory']}: {info['entries']} completed calls, "
                      f"{info['size_bytes'] / 1e6:.1f} MB on disk (nothing is evicted; `cache clear` empties it)",
                      highlight=False, soft_wrap=True)
    finally:
        cache.close()
    return 0


def data_command(action: str, benchmark: str, benchmark_dirs: Sequence[str], cache_dir: str | None) -> int:
    """`rubric-engine data fetch|path benchmark=NAME`: the benchmark's pinned download, checked by sha256.

    Why a command: tests and offline machines need the data before the first run, and a user should see
    where it lives. Prints the file's path (stdout); `path` downloads nothing and exits 1 when absent.
    """
    import urllib.parse

    from rubric_engine.dataset.load import default_data_cache_dir, fetch
    from rubric_engine.spec.files import benchmark_search_path
    from rubric_engine.spec.load import load_spec

    if action not in ("fetch", "path"):
        raise ConfigError(f"data: unknown action {action!r}; use 'fetch' or 'path'")
    spec = load_spec(benchmark, benchmark_search_path(benchmark_dirs))
    if spec.data_path() is not None:
        print(spec.data_path())  # shipped with the spec: nothing to download
        return 0
    if not spec.data.url:
        raise ConfigError(f"data: benchmark {spec.name!r} declares no data.url to fetch")
    if action == "path":
        name = Path(urllib.parse.urlparse(spec.data.url).path).name or "data"
        target = Path(cache_dir or default_data_cache_dir()).expanduser() / (spec.data.sha256 or "") / name
        print(target)
        if not target.is_file():
            print(f"rubric-engine: not downloaded yet; run: rubric-engine data fetch benchmark={benchmark}",
                  file=sys.stderr)
            return 1
        return 0
    warnings: list[str] = []
    print(f"fetching {spec.data.url} ...", file=sys.stderr, flush=True)
    path, digest = fetch(spec.data.url, spec.data.sha256, cache_dir, warnings)
    for w in warnings:
        print(f"warning: {shown(w, markup=False)}", file=sys.stderr)
    print(f"ok: sha256 {digest}", file=sys.stderr)
    print(path)
    return 0


def print_estimate(settings: Any, console: Console | None = None) -> dict[str, Any]:
    from rubric_engine.models.batchapi import batchable

    from rubric_engine.run.callplan import estimate_calls

    console = console or SafeConsole()
    est = estimate_calls(settings)
    t = Table(title="Dry run: estimated calls, tokens and cost (no model was called)")
    for col in ("Role", "Model", "Calls", "Already cached", "Prompt tokens", "Completion tokens", "Cost"):
        t.add_column(col, justify="left" if col in ("Role", "Model") else "right", overflow="fold")
    for role, e in est.items():
        cost = "unknown price" if e["cost"] is None else f"${e['cost']:.2f}"
        t.add_row(shown(role), shown(e["model"]), str(e["calls"]), str(e["cached"]), f"~{e['prompt_tokens']:,}",
                  f"~{e['completion_tokens']:,}", cost)
    console.print(t)
    for role, e in est.items():  # both modes side by side: synchronous calls, and batch=true's batch API
        batch = "no batch API through LiteLLM" if not batchable(e["model"]) else "unknown price with batch=true" \
            if e.get("batch_cost") is None else f"${e['batch_cost']:.2f} with batch=true"
        sync = "unknown price" if e["cost"] is None else f"${e['cost']:.2f}"
        console.print(f"{shown(role)}: {sync} synchronous, {batch}", highlight=False, soft_wrap=True)
    for line in estimate_lines(est):  # what a provider's prompt cache may serve (report/costlines.py)
        console.print(line, highlight=False, soft_wrap=True)
    for role, e in est.items():  # where each role's calls (and which key) would go, with which params
        params = f"; params {params_text(e['params'])}" if e["params"] else ""
        console.print(f"{shown(role)}: {shown(e['name'])} ({shown(e['model'])}) calls {shown(e['calls_to'])}"
                      f"{shown(params)}", highlight=False, soft_wrap=True)
        if e.get("ceiling_cost") is not None:
            console.print(f"{shown(role)}: up to ${e['ceiling_cost']:.2f} if every reply runs to its max_tokens "
                          f"({replies_per_request(e['params'])} reply(ies) a request)", highlight=False, soft_wrap=True)
    jroles = [r for r in est if r.startswith("judge")]
    if jroles and (len(jroles) > 1 or est[jroles[0]]["repeats"] > 1):
        total = sum(est[r]["calls"] for r in jroles)
        auto = "at most " if est[jroles[0]].get("repeats_auto") else ""
        console.print(f"judge calls: {auto}{total:,} in all ({len(jroles)} judge(s) x {est[jroles[0]]['repeats']} "
                      "repeat(s) x the calls of one grading)", highlight=False)
        if auto:
            console.print("judge.repeats=auto: the cap counted for every request; the run grades each once, a second "
                          "time where its criteria may flip, and to the cap only where the first two disagree",
                          highlight=False, soft_wrap=True)
    first = next(iter(est.values()), None)
    if first is not None and first["samples"] > 1:
        total = sum(e["calls"] for e in est.values())
        console.print(f"candidate.samples={first['samples']}: {total:,} calls in all = {first['samples']} sample(s) x "
                      f"(1 candidate + {len(jroles)} judge(s) x {est[jroles[0]]['repeats'] if jroles else 0} repeat(s)) "
                      "calls per question and call of one grading", highlight=False, soft_wrap=True)
    if any(e.get("conversation") for e in est.values()):
        console.print("A conversation: every turn is counted as its first request (the context grows turn by turn, "
                      "so its prompt tokens are a lower bound); a simulated user's calls assume every session runs "
                      "to max_turns (an upper bound).", highlight=False, soft_wrap=True)
    console.print("Prompt tokens: LiteLLM's token counter on the exact messages (a judge prompt whose reply is not "
                  "known yet adds ~400 tokens for it). Completion tokens: the cached replies' own counts, "
                  "else ~400 a candidate reply and ~60 a judge item.", soft_wrap=True)
    return est
