"""Cross-field rules of the spec language that pydantic cannot express: formula, aggregation, judge
granularity vs template vs verdict shape, breakdowns; and the breakdown check against the data.

Why its own module: each rule turns a spec that mixes incompatible choices into one line naming the key
and what is allowed, before any call is paid for. spec/schema.py calls `check_language` from its `_check`.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import json
from pathlib import Path
from typing import TYPE_CHECKING, AbstractSet, Any, Callable, Sequence

import jinja2
import jinja2.meta

from rubric_engine.errors import SpecError
from rubric_engine.scoring.formulas import FormulaProblem, known_names, resolve_formula
from rubric_engine.scoring.pairwise import label_problem, patterns_of
from rubric_engine.spec.facts import JUDGELESS_KINDS, verdict_kind
from rubric_engine.spec.scales import check_scale, is_score

if TYPE_CHECKING:
    from rubric_engine.datatypes import Question
    from rubric_engine.spec.schema import BenchmarkSpec, ModelRef

__all__ = ["check_language", "check_model", "check_breakdowns_against_data", "template_variables", "fetchable_url"]

Fail = Callable[..., None]
_ALL = {"criteria", "n_criteria"}


def template_variables(spec: "BenchmarkSpec", field: str) -> set[str]:
    """Names a template reads (jinja2's static analysis), to tell an all-criteria from a per-criterion template."""
    source = spec.read_template(field)  # bounded, BOM-tolerant, errors as SpecError
    return set(jinja2.meta.find_undeclared_variables(jinja2.Environment().parse(source)))


def check_formula(spec: "BenchmarkSpec", fail: Fail, trust_code: bool) -> None:
    """Resolve the spec's scoring formula into spec._formula (the one registry, the trust rule), or fail."""
    try:
        spec._formula = resolve_formula(spec.scoring.formula, trust_code)
    except FormulaProblem as exc:
        close = difflib.get_close_matches(spec.scoring.formula, known_names(), n=1)
        fail(("scoring", "formula"), str(exc), spec.scoring.formula,
             exc.fix + (f"; did you mean {close[0]!r}?" if close else ""))


def _check_scoring(spec: "BenchmarkSpec", fail: Fail) -> None:
    sc = spec.aggregation
    if spec.taxonomy is None:
        if sc.question == "mean_over_groups" and not (spec.judge and spec.judge.verdict.kind == "pairwise"):  # no items
            fail(("aggregation", "question"), "mean_over_groups needs a taxonomy (its abilities are the groups)",
                 sc.question, "without a taxonomy use all_items")
        if sc.overall == "macro_over_groups":
            fail(("aggregation", "overall"), "macro_over_groups needs a taxonomy (its abilities are the groups)",
                 sc.overall, "without a taxonomy use mean_over_questions")


def _check_judge(spec: "BenchmarkSpec", fail: Fail) -> None:
    if spec.judge is None:
        return  # only checked items (_check_checked): nothing is sent to a judge
    j, v = spec.judge, spec.judge.verdict
    per = v.granularity == "per_criterion"
    if per and v.shape != "object":
        fail(("judge", "verdict", "shape"), "per_criterion judging needs a one-object verdict", v.shape,
             "allowed with judge.verdict.granularity=per_criterion: object")
    if not per and v.shape != "list":
        fail(("judge", "verdict", "shape"), "all_criteria judging needs a list verdict", v.shape,
             "allowed with judge.verdict.granularity=all_criteria: list")
    names = [v.reasoning, v.met] + ([v.id] if not per else [])
    if len(set(names)) != len(names) or not all(n.isidentifier() for n in names + [v.list_key]):
        fail(("judge", "verdict"), "verdict field names must be distinct identifiers", v.model_dump())
    path = spec.template_path("judge.template")
    if not path.is_file():
        return  # reported by the template check
    try:
        used = template_variables(spec, "judge.template")
    except jinja2.TemplateSyntaxError:
        return  # reported by the template check, with the template's file:line (it was a traceback)
    if per and used & _ALL:
        fail(("judge", "template"), f"an all-criteria template ({', '.join(sorted(used & _ALL))}) with per_criterion "
             "judging", j.template, "a per_criterion template uses `criterion` (one item), not criteria/n_criteria")
    if per and "criterion" not in used:
        fail(("judge", "template"), "a per_criterion template must show the criterion", j.template,
             "use {{ criterion.text }} (and criterion.weight / criterion.tags) in the template")
    if not per and "criterion" in used:
        fail(("judge", "template"), "a per-criterion template with all_criteria judging", j.template,
             "set judge.verdict.granularity: per_criterion, or list every item with `criteria`")


def _check_breakdowns(spec: "BenchmarkSpec", fail: Fail) -> None:
    seen: set[str] = set()
    f = spec.data.fields
    for i, b in enumerate(spec.report.breakdowns):
        key = ("report", "breakdowns", i)
        if b.id in seen:
            fail(key + ("id",), "duplicate breakdown id", b.id)
        seen.add(b.id)
        if b.by in ("ability", "dimension") and spec.taxonomy is None:
            fail(key + ("by",), f"{'an' if b.by[0] in 'aeiou' else 'a'} {b.by} breakdown needs a taxonomy", b.by,
                 "allowed without one: subset, scenario, item_tag, example_tag")
        need = {"subset": f.subset, "scenario": f.scenario, "item_tag": f.item_tags, "example_tag": f.example_tags}
        if b.by in need and not need[b.by]:
            field = {"item_tag": "item_tags", "example_tag": "example_tags"}.get(b.by, b.by)
            fail(key + ("by",), f"a {b.by} breakdown needs data.fields.{field}", b.by,
                 f"map data.fields.{field} to the data's column, or drop this breakdown")
        if b.prefix and b.by not in ("item_tag", "example_tag"):
            fail(key + ("prefix",), f"prefix applies only to item_tag / example_tag breakdowns, not {b.by}", b.prefix)


def _check_checked(spec: "BenchmarkSpec", fail: Fail) -> None:
    """Checks and multiple choice (scoring/checks.py): the keys that go together, and a judge unless no item
    can need one. Each row's own checks are validated when the data is read (dataset/checked.py)."""
    f, mc = spec.data.fields, spec.multiple_choice
    if bool(f.choices) != bool(f.answer):
        fail(("data", "fields", "answer" if f.choices else "choices"), "multiple choice needs both "
             "data.fields.choices and data.fields.answer", fix="name the options' and the answer's fields")
    if f.choices and spec.taxonomy is not None:
        fail(("taxonomy",), "a multiple-choice question is one unlabelled item: it has no ability to be scored in",
             fix="drop the taxonomy; group the results with report.breakdowns (subset, scenario, example_tag)")
    if (mc.read == "pattern") != (mc.pattern is not None):
        fail(("multiple_choice", "pattern" if mc.read == "pattern" else "read"), "read: pattern and a pattern go "
             "together", mc.read, "set both, or neither (the default reads the first standalone option letter)")
    to_ability = spec.label_to_ability()
    for i, c in enumerate(spec.checks):
        if spec.taxonomy is not None and c.label not in to_ability:
            fail(("checks", i, "label"), "with a taxonomy, a check is scored in an ability: give its data label",
                 c.label, f"known labels: {', '.join(to_ability)}")
    kind = verdict_kind(spec)
    if kind in JUDGELESS_KINDS and spec.judge is not None:
        fail((kind,), f"a {kind} verdict is decided by the engine, with no judge: the judge block would never be "
             "called", fix=f"drop judge:, or drop {kind}: to have a judge decide")
    if spec.user_state is not None and spec.conversation.mode != "simulated":
        fail(("user_state",), "a user_state is the simulated user's hidden state: it needs a simulated user",
             spec.conversation.mode, "set conversation.mode: simulated (with conversation.simulator), or drop user_state:")
    if kind != "criteria" and (f.item_check or f.choices or spec.checks):
        key = ("judge", "verdict", "kind") if spec.judge is not None else (kind,)
        fail(key, "checked items and multiple choice are rubric items: they go with criteria verdicts", kind,
             "use judge.verdict.kind: criteria, or drop the checks")
    if spec.judge is None and spec.baseline is not None:
        fail(("baseline",), "a baseline is compared by a judge (judge.verdict.kind: pairwise)", fix="remove baseline:")
    if spec.judge is None and kind == "criteria" and not (f.item_check or f.choices):
        fail(("judge",), "required key is missing: without data.fields.item_check or data.fields.choices every "
             "item needs a judge", fix="add a judge: block (model, template), or check every item")


def _check_pairwise(spec: "BenchmarkSpec", fail: Fail) -> None:
    """judge.verdict.kind: pairwise (scoring/pairwise.py): labels the pattern can read, a pooled overall, one
    baseline source; `baseline:` only with it."""
    v, b = spec.judge.verdict, spec.baseline
    if v.kind != "pairwise":
        if b is not None:
            fail(("baseline",), "a baseline is only used by judge.verdict.kind: pairwise", fix="remove baseline:")
        if spec.data.sample is not None and spec.data.sample.baseline_answers is not None:
            fail(("data", "sample", "baseline_answers"), "baseline answers are only read by judge.verdict.kind: "
                 "pairwise", spec.data.sample.baseline_answers, "remove data.sample.baseline_answers")
        return
    if spec.conversation.mode != "single":
        fail(("conversation", "mode"), "a pairwise comparison judges one reply against one baseline reply",
             spec.conversation.mode, "use conversation.mode: single (or leave it out) with judge.verdict.kind: pairwise")
    problem = label_problem(v.labels, patterns_of(v.pattern), v.strong_weight)
    if problem:
        fail(("judge", "verdict", problem[0]), problem[1], getattr(v, problem[0]),
             "labels are A>>B, A>B, A=B, B>A, B>>A (or mirrored) written so that group 1 of the pattern captures them")
    if spec.aggregation.overall != "mean_over_questions":
        fail(("aggregation", "overall"), "a pairwise win rate is the pooled mean over questions",
             spec.aggregation.overall, "set aggregation.overall: mean_over_questions")
    if b is not None and (b.model is None) == (b.answers is None):
        fail(("baseline",), "give exactly one of baseline.model and baseline.answers")
    if b is not None and b.answers is not None:
        a = b.answers
        if a.by is None and len(a.files) != 1:
            fail(("baseline", "answers", "files"), "several files need baseline.answers.by (subset or scenario) "
                 "to say which questions each answers", list(a.files))
        if a.by is not None and not getattr(spec.data.fields, a.by):
            fail(("baseline", "answers", "by"), f"needs data.fields.{a.by}", a.by, f"map data.fields.{a.by}")
        for group, f in a.files.items():
            if (f.url is None) == (f.path is None):
                fail(("baseline", "answers", "files", group), "give exactly one of url and path")
def _check_conversation(spec: "BenchmarkSpec", fail: Fail) -> None:
    """Each conversation mode has what it reads: scripted the data's turns, simulated a simulator persona; per-turn
    questions (data.expand) a fixed gold history and a speaker to stand in for."""
    conv = spec.conversation
    if spec.data.expand is not None and conv.mode != "single":
        fail(("data", "expand"), "per-turn questions answer a fixed gold history: they need conversation.mode single",
             spec.data.expand, "leave data.expand out, or conversation.mode out (single)")
    if spec.data.expand is not None and "assistant" not in spec.data.roles.values():
        fail(("data", "roles"), "data.expand: assistant_turns needs a data role mapped to assistant", None,
             "map the replying speaker's label to assistant in data.roles")
    if conv.mode == "scripted" and not spec.data.fields.turns:
        fail(("data", "fields", "turns"), "conversation.mode scripted needs the data's user turns", None,
             "map data.fields.turns to the column holding each row's list of user messages")
    if conv.mode == "simulated" and (conv.simulator is None or not conv.simulator.system):
        fail(("conversation", "simulator"), "conversation.mode simulated needs a simulator with a persona", None,
             "set conversation.simulator.system to a template of the simulated user's persona and instructions "
             "(and its model there, or user=ENTRY on the command line)")


def check_language(spec: "BenchmarkSpec", fail: Fail, trust_code: bool = False) -> None:
    """Every rule above; `fail(key, message, value, fix)` raises the SpecError."""
    check_formula(spec, fail, trust_code)
    _check_checked(spec, fail)
    if spec.judge is None:  # every item is checked by the engine: none of the judge's rules apply
        _check_scoring(spec, fail)
    elif is_score(spec):
        check_scale(spec, fail)  # a score verdict has no criteria: the criteria rules below do not apply
    else:
        _check_scoring(spec, fail)
        _check_judge(spec, fail)
        check_scale(spec, fail)
    _check_breakdowns(spec, fail)
    if spec.judge is not None:
        _check_pairwise(spec, fail)
    _check_conversation(spec, fail)


def check_breakdowns_against_data(spec: "BenchmarkSpec", questions: Sequence["Question"]) -> None:
    """A tag breakdown whose prefix no item / example carries would print an empty table: an error instead."""
    check_breakdowns_against_tags(spec, {t for q in questions for c in q.criteria for t in c.tags},
                                  {t for q in questions for t in q.tags})


def check_breakdowns_against_tags(spec: "BenchmarkSpec", item_tags: AbstractSet[str], example_tags: AbstractSet[str]) -> None:
    """The same check from the tag sets a lazily loaded dataset gathered (no question kept for it)."""
    for i, b in enumerate(spec.report.breakdowns):
        tags = item_tags if b.by == "item_tag" else example_tags if b.by == "example_tag" else None
        if tags is None or any(t.startswith(b.prefix) for t in tags):
            continue
        where = spec.origin(("report", "breakdowns", i, "prefix")) or spec.origin(("report", "breakdowns", i))
        prefixes = sorted({t.split(":", 1)[0] + ":" if ":" in t else t for t in tags})
        raise SpecError(f"{where[0]}:{where[1]}" if where else str(spec.files[-1] if spec.files else spec.name),
                        f"report.breakdowns[{i}].prefix", f"no {b.by.replace('_', ' ')} in the data starts with this",
                        value=b.prefix, fix=f"prefixes in the data: {', '.join(prefixes[:20]) or '(none)'}")


@functools.lru_cache(maxsize=1)
def _litellm_models() -> dict[str, Any]:
    """LiteLLM's bundled model map, read without importing litellm (that import costs seconds)."""
    found = importlib.util.find_spec("litellm")
    try:
        path = Path(str(found.origin)).parent / "model_prices_and_context_window_backup.json"  # type: ignore
        return {k: v for k, v in json.loads(path.read_text("utf-8")).items() if isinstance(v, dict)}
    except (AttributeError, OSError, ValueError):
        return {}


def check_model(ref: "ModelRef", where: str, key: str) -> None:
    """Catch a misspelt model id now rather than after the candidate calls were paid for."""
    if "/" not in ref.model:
        raise SpecError(where, key, "the model must be a LiteLLM id 'provider/model'", value=ref.model,
                        fix="e.g. anthropic/claude-sonnet-4-5-20250929 or openai/gpt-4o-2024-11-20")
    provider, _, rest = ref.model.partition("/")
    table = _litellm_models()
    names = [k for k, v in table.items() if v.get("litellm_provider") == provider]
    if ref.api_base or not names or ref.model in table or rest in names:
        return  # self-hosted endpoint, a provider LiteLLM's map doesn't cover, or a known model
    close = difflib.get_close_matches(rest, names, n=3)
    fix = f"did you mean {', '.join(provider + '/' + c for c in close)}? " if close else ""
    raise SpecError(where, key, f"unknown {provider} model", value=ref.model, fix=fix + "use a model id "
                    "LiteLLM knows, or set api_base for a self-hosted / OpenAI-compatible server")


_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def fetchable_url(url: str) -> bool:
    """True for a URL the engine may download from: https://, or http:// to this machine (a test server).
    file:// (and ftp://, data:, ...) would read what the spec chooses: local data goes through a path key,
    confined to the spec's directories (schema.BenchmarkSpec._confine)."""
    from urllib.parse import urlsplit

    try:  # an unclosed IPv6 bracket ("http://[::1/d") fails in urlsplit itself, a bad host in .hostname
        parts = urlsplit(str(url))
        host = parts.hostname
    except ValueError:
        return False
    if not host:
        return False
    return parts.scheme == "https" or (parts.scheme == "http" and host in _LOOPBACK)
