"""`rubric-engine draft`: a drafting model proposes criteria per question, into a review file, never into the data.

Why a review file: a drafted criterion is a proposal. It reaches the benchmark's data only through experts'
review (`review criteria`, then `review merge`: authoring/criteria_review.py), so the drafts are written as
JSONL beside a report, in the spec's own item vocabulary (text, weight, a group of the spec's taxonomy,
positive or pitfall, a one-line reason). The prompt is the spec's `draft.j2` (rendered in the same sandbox as
every spec template), or the default below when the spec has none. Every question is one request through the
structured-output loop (judge/structured.py): a reply not in the declared format is re-asked once, then that
question is a counted failure with its one-line reason; accepted replies are cached under the first request,
so a rerun, or a run resumed after a kill, pays for nothing already answered.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from rubric_engine.errors import ConfigError, DataError, SpecError
from rubric_engine.judge.structured import ask_structured
from rubric_engine.judge.verdicts import VerdictError, extract_json
from rubric_engine.models.request import Request, VerdictJSON
from rubric_engine.store.layout import write_json, write_text

if TYPE_CHECKING:
    from rubric_engine.datatypes import Question
    from rubric_engine.models.client import CallStats, ModelClient
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["DraftOptions", "DraftError", "check_drafts", "draft", "drafts_sha", "read_drafts", "TEMPLATE_FILE",
           "POLARITIES"]

TEMPLATE_FILE = "draft.j2"  # the spec's drafting prompt, beside benchmark.yaml; DEFAULT_TEMPLATE when absent
POLARITIES = ("positive", "pitfall")
FIELDS = ("text", "weight", "group", "polarity", "reason")
_ENV = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)

DEFAULT_TEMPLATE = """You draft rubric criteria for a benchmark of conversational AI ({{ benchmark }}, {{ locale }}).
Read the conversation below and propose {{ n }} criteria that a good reply to the user's last turn should meet
(positive) or must avoid (pitfall). Each criterion names one observable behaviour of the reply, one demand only.
{% if groups %}Each criterion belongs to one group of this taxonomy (write the group as given):
{% for g in groups %}- {{ g.group }}: {{ g.ability }} ({{ g.dimension }})
{% endfor %}{% endif %}Weights are whole numbers from {{ weights | join(', ') }} (how much the criterion matters).

Conversation ({{ id }}):
{% for t in dialogue %}[{{ t.speaker }}] {{ t.content }}
{% endfor %}{% if reference %}
A reference reply written by an expert:
{{ reference }}
{% endif %}{% for p in pairs %}
A better reply:
{{ p.chosen }}
A worse reply:
{{ p.rejected }}
{% endfor %}
Answer with one JSON object and nothing else: {"criteria": [{"text": "...", "weight": N, "group": "...",
"polarity": "positive" or "pitfall", "reason": "one line: why this matters here"}, ...]} with exactly {{ n }} items.
"""


class DraftError(ValueError):
    """A drafting reply not in the declared format (raised inside accept=, so it is never cached)."""


@dataclass
class DraftOptions:
    """What to draft, with which model, where to write (cli/mains.py draft_main builds it from argv)."""

    benchmark: str
    drafter: str
    n: int = 5
    out: Path = Path("drafts.jsonl")
    references: Path | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    data_path: str | None = None
    data_cache_dir: str | None = None
    limit: int | None = None
    ids: list[str] | None = None
    weights: tuple[int, ...] = (1, 2, 3)
    concurrency: int = 8
    max_reasks: int = 1
    cache_dir: str | None = None
    benchmark_dirs: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------- one reply

def check_drafts(text: str, n: int, groups: frozenset[str], weights: tuple[int, ...]) -> list[dict[str, Any]]:
    """The drafted criteria of one reply; DraftError saying exactly what is wrong (the re-ask quotes it)."""
    try:
        obj = extract_json(text)
    except VerdictError:
        raise DraftError("the answer is not a JSON object") from None
    items = obj.get("criteria") if isinstance(obj, dict) else None
    if not isinstance(items, list) or not items:
        raise DraftError("'criteria' is missing, empty or not a list")
    if len(items) > n:
        raise DraftError(f"'criteria' has {len(items)} items, at most {n} were asked for")
    out = []
    for i, item in enumerate(items, 1):
        if not isinstance(item, dict):
            raise DraftError(f"criteria[{i}] is not an object with {', '.join(FIELDS)}")
        missing = [k for k in FIELDS if k not in item]
        if missing:
            raise DraftError(f"criteria[{i}] lacks {', '.join(missing)}")
        text_, reason = item["text"], item["reason"]
        if not isinstance(text_, str) or not text_.strip():
            raise DraftError(f"criteria[{i}].text is not a non-empty string")
        if not isinstance(reason, str) or not reason.strip() or "\n" in reason.strip():
            raise DraftError(f"criteria[{i}].reason must be one non-empty line")
        w = item["weight"]
        if isinstance(w, bool) or not isinstance(w, (int, float)) or w not in weights:
            raise DraftError(f"criteria[{i}].weight {w!r} is not one of {', '.join(map(str, weights))}")
        if groups and item["group"] not in groups:
            raise DraftError(f"criteria[{i}].group {item['group']!r} is not a group of the taxonomy: "
                             f"{', '.join(sorted(groups))}")
        if item["polarity"] not in POLARITIES:
            raise DraftError(f"criteria[{i}].polarity {item['polarity']!r} must be positive or pitfall")
        out.append({"text": " ".join(text_.split()), "weight": int(w), "group": item["group"] if groups else None,
                    "polarity": item["polarity"], "reason": reason.strip()})
    return out


def _reask(problem: str, n: int) -> str:
    return (f"That answer cannot be used: {problem}. Answer again with one JSON object {{\"criteria\": [...]}} of at "
            f"most {n} items, each with {', '.join(FIELDS)}, and nothing else.")


# ------------------------------------------------------------------------------------------------ the prompt

def _groups(spec: "BenchmarkSpec") -> list[dict[str, str]]:
    """The taxonomy's groups as the data writes them (an item's label): one per ability's first data label."""
    return [{"group": a.data_labels[0], "ability": spec.label(a), "dimension": spec.label(d)}
            for d in (spec.taxonomy.dimensions if spec.taxonomy else []) for a in d.abilities]


def _template_source(spec: "BenchmarkSpec") -> tuple[str, str]:
    """(template text, where it came from): the spec's draft.j2 when it has one, else the shipped default."""
    if (spec.dir / TEMPLATE_FILE).is_file():
        return spec.read_template(TEMPLATE_FILE), str(spec.dir / TEMPLATE_FILE)
    return DEFAULT_TEMPLATE, "default"


def _render(source: str, where: str, variables: dict[str, Any]) -> str:
    from rubric_engine.judge.prompts import RenderTimeout, time_limit

    try:
        with time_limit():
            return _ENV.from_string(source).render(**variables)
    except (jinja2.TemplateError, RenderTimeout) as exc:
        why = ("the sandbox forbids it: " if isinstance(exc, SecurityError) else "") + (
            getattr(exc, "message", None) or type(exc).__name__)
        raise SpecError(where, TEMPLATE_FILE, f"the drafting template cannot be rendered ({why.rstrip('.')})",
                        fix="fix the template (its variables: docs/authoring.md, Draft)") from None


def _read_references(path: Path | None) -> dict[str, dict[str, Any]]:
    """id -> {reference, pairs}: a JSONL file of {id, reference?} and/or {id, chosen, rejected} rows."""
    if path is None:
        return {}
    out: dict[str, dict[str, Any]] = {}
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except OSError as exc:
        raise DataError(str(path), f"cannot read the references file: {exc.strerror or exc}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise DataError(str(path), "not a JSON line", line=n, fix="one JSON object per line") from None
        if not isinstance(row, dict) or not isinstance(row.get("id"), (str, int)):
            raise DataError(str(path), "a row needs an id", line=n, fix='write {"id": ..., "reference": ...}')
        entry = out.setdefault(str(row["id"]), {"reference": "", "pairs": []})
        if isinstance(row.get("reference"), str):
            entry["reference"] = row["reference"]
        if isinstance(row.get("chosen"), str) and isinstance(row.get("rejected"), str):
            entry["pairs"].append({"chosen": row["chosen"], "rejected": row["rejected"]})
    return out


def _request(spec: "BenchmarkSpec", q: "Question", opts: DraftOptions, source: tuple[str, str],
             refs: dict[str, dict[str, Any]], groups: list[dict[str, str]]) -> Request:
    from rubric_engine.judge.prompts import dialogue_vars

    extra = refs.get(q.id, {"reference": "", "pairs": []})
    prompt = _render(*source, {"benchmark": spec.name, "locale": spec.locale, "id": q.id, "n": opts.n,
                               "dialogue": dialogue_vars(spec, q), "groups": groups, "weights": list(opts.weights),
                               "reference": extra["reference"] or q.reference, "pairs": extra["pairs"]})
    shape = VerdictJSON(opts.n, "criteria", {"text": "text", "weight": list(opts.weights),
                                             "group": [g["group"] for g in groups] or ["general"],
                                             "polarity": list(POLARITIES), "reason": "text"})
    return Request([{"role": "user", "content": prompt}], role="drafter", answer=shape)


# ----------------------------------------------------------------------------------------------- the command

def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def drafts_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_drafts(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(draft rows, the report written beside them); DataError when either is missing or unreadable."""
    report = path.with_suffix(".report.json")
    try:
        rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
        meta = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(str(path), f"not a drafts file with its report ({exc})",
                        fix="pass the out= file a `rubric-engine draft` run wrote") from None
    return rows, meta


def _data_file(spec: "BenchmarkSpec", opts: DraftOptions, offline: bool) -> Path:
    """data.path= given, else a keyless try-out's packaged sample (drafter=mock: its drafts mean nothing, like
    every mock's output, and it never downloads), else the spec's data as localize reads it."""
    from rubric_engine.authoring.localize import _source_file

    if opts.data_path is None and spec.data.sample is not None and offline:
        _log(f"draft: drafter=mock reads {spec.name}'s packaged sample, not its data (pass data.path= for a file)")
        return spec.declared_file("data.sample.path", spec.data.sample.path).resolve()
    return Path(_source_file(spec, opts))  # type: ignore[arg-type]  # reads data_path / data_cache_dir only


def draft(opts: DraftOptions) -> dict[str, Any]:
    """Draft criteria for the selected questions; write the drafts JSONL and its report; return the report."""
    from rubric_engine.authoring.localize import calls_summary
    from rubric_engine.dataset.load import load_dataset, select
    from rubric_engine.models.cache import ResultCache, default_cache_dir
    from rubric_engine.models.client import ModelClient
    from rubric_engine.models.entries import check_keys
    from rubric_engine.models.named import model_entry
    from rubric_engine.spec.files import benchmark_search_path
    from rubric_engine.spec.load import load_spec

    spec = load_spec(opts.benchmark, benchmark_search_path(opts.benchmark_dirs))
    entry: dict[str, Any] = {"entry": opts.drafter}
    if opts.api_base:
        entry.update(api_base=opts.api_base, api_key_env=opts.api_key_env)
    model = model_entry(entry, "judge")
    assert model is not None
    check_keys(model)  # before anything is read or asked: one line naming the variable
    local = _data_file(spec, opts, model.offline)
    ds = load_dataset(spec, local, opts.data_cache_dir)
    questions = select(ds.questions, limit=opts.limit, ids=opts.ids)
    if not questions:
        raise ConfigError("draft: the selection holds no question; check limit= / ids=")
    groups, source, refs = _groups(spec), _template_source(spec), _read_references(opts.references)
    names = frozenset(g["group"] for g in groups)
    requests = {q.id: _request(spec, q, opts, source, refs, groups) for q in questions}  # a bad template stops here
    cache = ResultCache(opts.cache_dir or default_cache_dir())
    _log(f"draft: {len(questions)} question(s) of {spec.name} with {model.model}, prompt {source[1]}; completed "
         "calls are cached, so an interrupted run resumes where it stopped")

    Result = list[tuple[str, list[dict[str, Any]] | None, str | None, bool]]  # bool: every reply was unusable

    async def run() -> tuple[Result, "CallStats"]:
        client = ModelClient(model, cache=cache, concurrency=opts.concurrency, role="drafter")

        async def one(q: "Question") -> tuple[str, list[dict[str, Any]] | None, str | None, bool]:
            got = await ask_structured(client, requests[q.id],
                                       lambda text: check_drafts(text, opts.n, names, opts.weights),
                                       reask=lambda problem: _reask(problem, opts.n), max_reasks=opts.max_reasks,
                                       what="draft", role="drafter")
            _log(f"{q.id} " + (f"FAILED: {got.error}" if got.error else f"{len(got.value or [])} criteria"))
            return q.id, got.value, got.error, bool(got.error) and len(got.replies) == got.attempts

        try:
            return list(await asyncio.gather(*(one(q) for q in questions))), client.stats
        finally:
            await client.aclose()

    try:
        results, stats = asyncio.run(run())
    finally:
        cache.close()
    rows = [{"key": f"{qid}#{i}", "id": qid, "n": i, **c, "drafter": model.model}
            for qid, value, _, _ in results for i, c in enumerate(value or [], 1)]
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    write_text(opts.out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    failures = [{"id": qid, "error": err, "kind": "format" if unusable else "call"}
                for qid, _, err, unusable in results if err is not None]
    report = {"benchmark": spec.name, "spec_dir": str(spec.dir.resolve()), "data": str(Path(local).resolve()),
              "data_sha256": ds.sha256, "drafter": model.model, "template": source[1], "questions": len(results),
              "drafted": len(results) - len(failures), "failed": len(failures), "failures": failures,
              "criteria": len(rows), "drafts": str(opts.out.resolve()), "drafts_sha256": drafts_sha(opts.out),
              "calls": calls_summary(stats)}
    write_json(opts.out.with_suffix(".report.json"), report)
    return report
