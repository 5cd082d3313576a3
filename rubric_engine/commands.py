"""Subcommands that make no model call: `validate`, `cache info|clear`, and the dry-run estimate.

Why apart from the runner: these must stay cheap (no LiteLLM import unless a price is looked up)
and they answer questions a user asks before spending money.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from .errors import ConfigError

__all__ = ["validate_command", "cache_command", "print_estimate", "estimate_calls"]


def validate_command(benchmark: str, benchmark_dirs: Sequence[str], data_path: str | None,
                     cache_dir: str | None, console: Console | None = None, trust_code: bool = False) -> int:
    """Load and check a spec and its data; print what the spec declares, with counts from the data."""
    from .dataset import load_dataset
    from .spec import benchmark_search_path, load_spec
    from .speccheck import check_breakdowns_against_data

    console = console or Console()
    spec = load_spec(benchmark, benchmark_search_path(benchmark_dirs), trust_code)
    ds = load_dataset(spec, data_path, Path(cache_dir) if cache_dir else None)
    check_breakdowns_against_data(spec, ds.questions)
    qs = ds.questions
    items = Counter(c.ability for q in qs for c in q.criteria if c.ability)
    rule_items = Counter(c.rule for q in qs for c in q.criteria if c.rule)
    n_items = sum(1 for q in qs for c in q.criteria if c.rule is None)
    trust = {"pinned": "checked against the spec's data.sha256", "first_use": "trusted on first use (recorded "
             "at the first download, checked on every later use)", "local": "local file, hashed as given"}[ds.trust]
    console.print(f"[bold]{spec.name}[/] {spec.version} ({spec.locale}) from {', '.join(str(f) for f in spec.files)}",
                  highlight=False, soft_wrap=True)
    console.print(f"data: {ds.source} sha256 {ds.sha256} ({trust})", highlight=False, soft_wrap=True)
    subsets = Counter(q.subset for q in qs if q.subset)
    parts = [f"{len(qs)} questions" + (f" ({', '.join(f'{n} {k}' for k, n in sorted(subsets.items()))})" if subsets else ""),
             f"{n_items} {'ability' if spec.taxonomy is not None else 'scored rubric'} items"]
    if spec.failure_rules:
        parts.append(f"{sum(rule_items.values())} failure-rule items")
    agg = spec.aggregation
    console.print(", ".join(parts), highlight=False, soft_wrap=True)
    console.print(f"scoring: {spec.scoring.formula}; question score {agg.question}, overall {agg.overall}, "
                  f"clip {agg.clip}, no positive points: {agg.no_positive_points}; judge "
                  f"{spec.judge.verdict.granularity}", highlight=False, soft_wrap=True)

    if spec.taxonomy is not None:
        tax = Table(title="Taxonomy")
        for col in ("Dimension", "Ability", "Label in data", "Items"):
            tax.add_column(col, justify="right" if col == "Items" else "left")
        for dim in spec.taxonomy.dimensions:
            for i, ab in enumerate(dim.abilities):
                tax.add_row(spec.label(dim.labels, "en") if i == 0 else "", spec.label(ab.labels, "en"),
                            ", ".join(ab.data_labels), str(items.get(ab.id, 0)))
        for rule in spec.failure_rules:
            tax.add_row("(failure rule)", spec.label(rule.labels, "en"), ", ".join(rule.data_labels),
                        str(rule_items.get(rule.id, 0)))
        console.print(tax)
    for b in spec.report.breakdowns:
        if b.by in ("ability", "dimension"):
            continue  # shown by the taxonomy table
        counts = _group_counts(qs, b.by, b.prefix)
        t = Table(title=f"{spec.label(b.labels, 'en') or b.id} ({b.by}{': ' + b.prefix if b.prefix else ''})")
        for col in ("Group", "English", "Questions"):
            t.add_column(col, justify="right" if col == "Questions" else "left")
        names = {"scenario": spec.report.scenarios, "subset": spec.report.subsets}.get(b.by, {})
        for group, n in counts.most_common():
            labels = b.groups.get(group) or names.get(group)
            t.add_row(group or "(empty)", spec.label(labels, "en") if labels else "", str(n))
        console.print(t)
    for w in ds.warnings:
        console.print(f"[yellow]warning:[/] {w}", highlight=False, soft_wrap=True)
    console.print("[green]ok[/]: spec and data are valid")
    return 0


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


def cache_command(args: Sequence[str], console: Console | None = None) -> int:
    """`rubric-engine cache info|clear [cache.dir=DIR]`: the durable store of completed calls."""
    from .cache import ResultCache, default_cache_dir

    console = console or Console()
    action = args[0] if args else "info"
    directory: str | None = None
    for a in args[1:]:
        if a.startswith("cache.dir="):
            directory = a.split("=", 1)[1]
        else:
            raise ConfigError(f"cache: unknown argument {a!r}; usage: rubric-engine cache info|clear [cache.dir=DIR]")
    if action not in ("info", "clear"):
        raise ConfigError(f"cache: unknown action {action!r}; use 'info' or 'clear'")
    path = Path(directory) if directory else default_cache_dir()
    if action == "info" and not path.exists():
        console.print(f"cache {path}: empty (not created yet)", highlight=False, soft_wrap=True)
        return 0
    cache = ResultCache(path)
    try:
        if action == "info":
            info = cache.info()
            console.print(f"cache {info['directory']}: {info['entries']} completed calls, "
                          f"{info['size_bytes'] / 1e6:.1f} MB on disk (nothing is evicted; `cache clear` empties it)",
                          highlight=False, soft_wrap=True)
        else:
            n = cache.clear()
            console.print(f"cache {path}: removed {n} entries", highlight=False, soft_wrap=True)
    finally:
        cache.close()
    return 0


def _tokens(text: str) -> int:
    """A rough token count: CJK characters ~1 token each, other text ~4 characters a token."""
    cjk = sum(1 for ch in text if "\u3000" <= ch <= "\u9fff" or "\uff00" <= ch <= "\uffef")
    return cjk + (len(text) - cjk + 3) // 4


def estimate_calls(settings: Any, reply_tokens: int = 400, judge_reply_tokens_per_item: int = 60) -> dict[str, Any]:
    """Calls, cached calls and estimated tokens per role, without calling any model."""
    from .cache import ResultCache, default_cache_dir
    from .models import cache_key
    from .prompts import candidate_messages, judge_messages
    from .runner import _load, _repeats, judges_of

    spec, _, questions = _load(settings)
    judges = judges_of(settings, spec)
    repeats = _repeats(settings, spec)  # every judge grades every reply this many times
    cache_dir = Path(settings.cache_dir) if settings.cache_dir else default_cache_dir()
    cache = ResultCache(cache_dir) if settings.cache_enabled and cache_dir.exists() else None
    est: dict[str, Any] = {}
    try:
        roles = [] if settings.answers or settings.from_run else [("candidate", settings.candidate)]
        roles += [("judge" if len(judges) == 1 else f"judge {j.name}", j) for j in judges]
        for role, model in roles:
            if model is None:
                raise ConfigError("no candidate model: pass candidate=<name> or answers=FILE")
            prompt = completion = cached = 0
            calls = len(questions)
            for q in questions:
                if role == "candidate":
                    msgs = candidate_messages(spec, q)
                    completion += reply_tokens
                    cached += int(cache is not None and cache.get(cache_key(model, msgs, None)) is not None)
                else:
                    if spec.judge.verdict.granularity == "per_criterion":
                        msgs = [m for c in q.criteria for m in judge_messages(spec, q, "x" * reply_tokens, c.index)]
                        calls += len(q.criteria) - 1
                    else:
                        msgs = judge_messages(spec, q, "x" * reply_tokens)
                    completion += judge_reply_tokens_per_item * len(q.criteria) * repeats
                prompt += sum(_tokens(str(m.get("content", ""))) for m in msgs) * (1 if role == "candidate" else repeats)
            if role != "candidate":
                calls *= repeats
            est[role] = {"model": model.model, "name": model.name, "calls": calls, "cached": cached,
                         "repeats": 1 if role == "candidate" else repeats,
                         "prompt_tokens": prompt, "completion_tokens": completion,
                         "cost": _price(model.model, prompt, completion)}
    finally:
        if cache is not None:
            cache.close()
    return est


def _price(model: str, prompt: int, completion: int) -> float | None:
    """Price from LiteLLM's bundled price list (never fetched over the network); None if unknown."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    info = litellm.model_cost.get(model) or litellm.model_cost.get(model.split("/", 1)[-1])
    if not info or info.get("input_cost_per_token") is None:
        return None
    return prompt * info["input_cost_per_token"] + completion * (info.get("output_cost_per_token") or 0.0)


def print_estimate(settings: Any, console: Console | None = None) -> dict[str, Any]:
    console = console or Console()
    est = estimate_calls(settings)
    t = Table(title="Dry run: estimated calls, tokens and cost (no model was called)")
    for col in ("Role", "Model", "Calls", "Already cached", "Prompt tokens", "Completion tokens", "Cost"):
        t.add_column(col, justify="left" if col in ("Role", "Model") else "right", overflow="fold")
    for role, e in est.items():
        cost = "unknown price" if e["cost"] is None else f"${e['cost']:.2f}"
        t.add_row(role, e["model"], str(e["calls"]), str(e["cached"]), f"~{e['prompt_tokens']:,}",
                  f"~{e['completion_tokens']:,}", cost)
    console.print(t)
    if len(judges_of_est := [r for r in est if r.startswith("judge")]) > 1 or any(
            e.get("repeats", 1) > 1 for e in est.values()):
        total = sum(est[r]["calls"] for r in judges_of_est)
        console.print(f"judge calls: {total:,} in all ({len(judges_of_est)} judge(s) x {est[judges_of_est[0]]['repeats']} "
                      "repeat(s) x the calls of one grading)", highlight=False)
    console.print("Token counts are estimates (CJK ~1 token a character, other text ~4 characters a token; "
                  "candidate replies assumed ~400 tokens, judge verdicts ~60 tokens an item).")
    return est
