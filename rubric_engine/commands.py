"""Subcommands that make no model call: `validate`, `cache info|clear`, and the dry-run estimate.

Why apart from the runner: these must stay cheap (no LiteLLM import unless a price is looked up)
and they answer questions a user asks before spending money.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from .errors import ConfigError

__all__ = ["validate_command", "cache_command", "data_command", "print_estimate", "estimate_calls"]


def validate_command(benchmark: str, benchmark_dirs: Sequence[str], data_path: str | None,
                     cache_dir: str | None, console: Console | None = None) -> int:
    """Load and check a spec and its data; print the taxonomy and scenario tables with counts."""
    from .dataset import load_dataset
    from .spec import benchmark_search_path, load_spec

    console = console or Console()
    spec = load_spec(benchmark, benchmark_search_path(benchmark_dirs))
    ds = load_dataset(spec, data_path, Path(cache_dir) if cache_dir else None)
    qs = ds.questions
    items = Counter(c.ability for q in qs for c in q.criteria if c.ability)
    rule_items = Counter(c.rule for q in qs for c in q.criteria if c.rule)
    console.print(f"[bold]{spec.name}[/] {spec.version} ({spec.locale}) from {', '.join(str(f) for f in spec.files)}",
                  highlight=False, soft_wrap=True)
    console.print(f"data: {ds.source} sha256 {ds.sha256}", highlight=False, soft_wrap=True)
    subsets = Counter(q.subset for q in qs)
    console.print(f"{len(qs)} questions ({', '.join(f'{n} {k}' for k, n in sorted(subsets.items()))}), "
                  f"{sum(items.values())} ability items, {sum(rule_items.values())} failure-rule items", highlight=False, soft_wrap=True)

    tax = Table(title="Taxonomy")
    for col in ("Dimension", "Ability", "Label in data", "Items"):
        tax.add_column(col, justify="right" if col == "Items" else "left")
    for dim in spec.taxonomy.dimensions:
        for i, ab in enumerate(dim.abilities):
            tax.add_row(spec.label(dim.labels, "en") if i == 0 else "", spec.label(ab.labels, "en"),
                        ", ".join(ab.data_labels), str(items.get(ab.id, 0)))
    for rule in spec.failure_rules:
        tax.add_row("(failure rule)", spec.label(rule.labels, "en"), ", ".join(rule.data_labels), str(rule_items.get(rule.id, 0)))
    console.print(tax)

    scen = Table(title="Scenarios")
    for col in ("Scenario", "English", "Questions"):
        scen.add_column(col, justify="right" if col == "Questions" else "left")
    for label, n in Counter(q.scenario for q in qs).most_common():
        labels = spec.report.scenarios.get(label)
        scen.add_row(label or "(empty)", spec.label(labels, "en") if labels else "", str(n))
    console.print(scen)
    for w in ds.warnings:
        console.print(f"[yellow]warning:[/] {w}", highlight=False, soft_wrap=True)
    console.print("[green]ok[/]: spec and data are valid")
    return 0


def cache_command(action: str = "info", directory: str | None = None, console: Console | None = None) -> int:
    """`rubric-engine cache [info|clear] [cache.dir=DIR]`: the durable store of completed calls."""
    from .cache import ResultCache, default_cache_dir

    console = console or Console()
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


def data_command(action: str, benchmark: str, benchmark_dirs: Sequence[str], cache_dir: str | None) -> int:
    """`rubric-engine data fetch|path benchmark=NAME`: the benchmark's pinned download, checked by sha256.

    Why a command: tests and offline machines need the data before the first run, and a user should see
    where it lives. Prints the file's path (stdout); `path` downloads nothing and exits 1 when absent.
    """
    import urllib.parse

    from .dataset import default_data_cache_dir, fetch
    from .spec import benchmark_search_path, load_spec

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
        print(f"warning: {w}", file=sys.stderr)
    print(f"ok: sha256 {digest}", file=sys.stderr)
    print(path)
    return 0


def _counter() -> Any:
    """LiteLLM's offline token counter (its bundled tokenizers; the price map read locally, never fetched)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm.token_counter


def estimate_calls(settings: Any, reply_tokens: int = 400, judge_reply_tokens_per_item: int = 60) -> dict[str, Any]:
    """Calls, cached calls and tokens per role, without calling any model.

    Prompt tokens come from LiteLLM's token counter on the exact messages. A judge call counts as cached
    when the reply it judges is known (a cached candidate reply, or the answers file) and the verdict for
    that reply is in the cache; otherwise its prompt is counted with a placeholder reply of `reply_tokens`.
    """
    from .cache import ResultCache, default_cache_dir
    from .judge import RESPONSE_FORMAT
    from .models import cache_key
    from .prompts import candidate_messages, judge_messages
    from .runner import _given_answers, _load, declared_judge

    spec, dataset, questions = _load(settings)
    judge = settings.judge or declared_judge(spec, settings.timeout)
    given = _given_answers(settings, spec, [q.id for q in dataset.questions])
    cache_dir = Path(settings.cache_dir) if settings.cache_dir else default_cache_dir()
    cache = ResultCache(cache_dir) if settings.cache_enabled and cache_dir.exists() else None
    count = _counter()
    est: dict[str, Any] = {}
    replies: dict[str, str | None] = dict(given) if given is not None else {}

    def cached(model: Any, msgs: list[dict[str, Any]], formats: tuple[Any, ...]) -> dict[str, Any] | None:
        for fmt in formats:
            hit = cache.get(cache_key(model, msgs, fmt)) if cache is not None else None
            if hit is not None:
                return hit
        return None

    try:
        roles = [("judge", judge)] if given is not None else [("candidate", settings.candidate), ("judge", judge)]
        if settings.stage == "generate":
            roles = [r for r in roles if r[0] == "candidate"]
        for role, model in roles:
            if model is None:
                raise ConfigError("no candidate model: pass candidate=<name> or answers=FILE")
            prompt = completion = n_cached = 0
            for q in questions:
                if role == "candidate":
                    msgs = candidate_messages(spec, q)
                    hit = cached(model, msgs, (None,))
                    replies[q.id] = hit.get("text") if hit else None
                    completion += int(hit.get("completion_tokens") or 0) if hit else reply_tokens
                else:
                    reply = replies.get(q.id)
                    msgs = judge_messages(spec, q, reply if reply is not None else "")
                    prompt += reply_tokens if reply is None else 0  # the reply to judge is not known yet
                    hit = cached(model, msgs, (RESPONSE_FORMAT, None)) if reply is not None else None
                    completion += int(hit.get("completion_tokens") or 0) if hit else \
                        judge_reply_tokens_per_item * len(q.criteria)
                n_cached += hit is not None
                prompt += count(model=model.model, messages=msgs)
            est[role] = {"model": model.model, "name": model.name, "calls": len(questions), "cached": n_cached,
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
    console.print("Prompt tokens: LiteLLM's token counter on the exact messages (a judge prompt whose reply is not "
                  "known yet adds ~400 tokens for it). Completion tokens: the cached replies' own counts, "
                  "else ~400 a candidate reply and ~60 a judge item.", soft_wrap=True)
    return est
