"""The one codec of samples.jsonl: `decode(obj) -> Record` and `encode(Record) -> obj`, the only place (with the
judgment variants' own modules) that knows the record's JSON key names and which keys mark which variant.

Why one codec: every reader of a stored run (rescore, the leaderboard, intervals, the reports, validity, the
journal on resume) used to read the record by string keys, each with its own idea of a missing key; now they
read attributes of a decoded `Record` (record/types.py), and a missing optional key reads as the default it
always had. Decoding refuses what scoring would misread (a criterion weight that is no bounded number, a verdict
that is not true/false/null, a value of the wrong shape) with a DataError naming the file and line. Bytes are
kept: a decoded object remembers its keys' order and the keys this version does not know (`Layout`), and
`encode` writes them back in place, so decode + encode gives every stored line back unchanged (tests/
test_record_codec.py runs it over every shipped spec's record). RECORD_VERSION (records.py) is unchanged:
no field changed meaning (an item's `credit`, written under judge.verdict.use: probability, is a field of its own
beside `hit`, which stays the verdict).

A verdict kind whose records carry fields of their own has its Judgment variant in a module of its own in this
package (record/score.py, record/pairwise.py, record/rating.py), which decodes and encodes those fields; `VARIANTS`
finds every such module itself, so a new kind adds its module and no line here.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

import rubric_engine.record as _package
from rubric_engine.datatypes import MAX_WEIGHT
from rubric_engine.errors import DataError
from rubric_engine.record.types import (NO_LAYOUT, Criteria, CriteriaJudgment, CriterionVerdict, Judgment, Layout, NotJudged,
                                        Record, Reply, Transcript, Turn)

__all__ = ["VARIANTS", "decode", "encode", "encode_new", "encode_criterion", "encode_turns", "layout_of"]

_OWN_MODULES = frozenset({"codec", "types", "summary"})  # record/'s modules that hold no verdict kind's variant


def _variants() -> tuple[type[Judgment], ...]:
    """Every judgment variant with fields of its own: the `Judgment` subclasses of record/'s other modules, one
    module per verdict kind (record/score.py, record/pairwise.py, ...), found by listing the package, so a new
    kind's variant is its module and nothing here. By kind name: their marks never overlap (tests check it)."""
    for module in pkgutil.iter_modules(_package.__path__):
        if module.name not in _OWN_MODULES:
            importlib.import_module(f"{_package.__name__}.{module.name}")
    found = {v for v in _subclasses(Judgment) if v.__module__ not in (__name__, Judgment.__module__)
             and getattr(sys.modules[v.__module__], v.__name__, None) is v}  # not a slotted dataclass's first draft
    return tuple(sorted(found, key=lambda v: v.kind))


def _subclasses(cls: type[Judgment]) -> Iterable[type[Judgment]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


# The registry of judgment variants with fields of their own, in the order a stored record is tested for their
# marks; a record with none of them holds per-item verdicts (CriteriaJudgment) or none (NotJudged).
VARIANTS: tuple[type[Judgment], ...] = _variants()
_VARIANT_KEYS = {key: v for v in VARIANTS for key in v.owns}
_MARKS = frozenset(key for v in VARIANTS for key in v.marks)
_CRITERIA, _NONE = CriteriaJudgment(), NotJudged()

_CRITERION_KEYS = ("index", "label", "ability", "rule", "weight", "text", "reasoning", "hit", "p_met", "credit", "votes",
                   "tags", "check")
_TURN_KEYS = ("role", "content", "state")  # state: only a simulated user's turn under a user_state: block
_CONVERSATION_KEYS = ("transcript", "ended", "user_error")
_RECORD_KEYS = ("id", "subset", "scenario", "tags", "response", "candidate_error", "judge_error", "judge_raw",
                "criteria", "abilities", "item_tags", "score", "weight", "failed_rules", "catastrophic", "zeroed",
                "choice", "tokens", "cost", "cache_hits", "truncated", "samples", "sample", "sample_score_sd",
                "verdict_paths", *_CONVERSATION_KEYS, *_VARIANT_KEYS)
# A fresh record's keys in order (the run's writer, encode_new): the question, its reply and the score, then the
# judgment variant's `early` keys, the kept judge replies and item-tag scores, the variant's `late` keys, the usage
# and a conversation's fields: the order every shipped spec's records were written in before the codec wrote them.
_HEAD = ("id", "subset", "scenario", "response", "candidate_error", "judge_error", "criteria", "abilities", "score",
         "failed_rules", "catastrophic", "tags", "choice")
_MIDDLE = ("judge_raw", "item_tags")
_TAIL = ("tokens", "cost", "cache_hits", "verdict_paths", "truncated", *_CONVERSATION_KEYS, "zeroed", "samples",
         "sample", "sample_score_sd")
_ALWAYS = frozenset(("id", "subset", "scenario", "response", "candidate_error", "judge_error", "criteria",
                     "abilities", "score", "failed_rules", "catastrophic", "tokens", "cost", "cache_hits", "truncated"))
_FRESH_CRITERION_KEYS = ("index", "label", "ability", "rule", "weight", "text", "reasoning", "hit", "p_met", "credit",
                         "votes", "check", "tags")
_IF_SET = frozenset(("p_met", "credit"))  # a fresh item's keys written only when they hold a value (0.0 included)
_LAYOUTS: dict[tuple[str, ...], Layout] = {}  # interned: the records of a file share a handful of key orders
_EMPTY: Mapping[str, Any] = {}


def layout_of(obj: Mapping[str, Any], known: Iterable[str]) -> Layout:
    """`obj`'s keys in order, with the values of the keys not in `known` (kept for encode)."""
    keys = tuple(obj)
    shared = _LAYOUTS.get(keys)
    if shared is not None:
        return shared
    extra = {k: obj[k] for k in keys if k not in known}
    if extra:
        return Layout(keys, extra)
    if len(_LAYOUTS) < 4096:
        _LAYOUTS[keys] = layout = Layout(keys)
        return layout
    return Layout(keys)


class _Bad(Exception):
    """A field decode refuses; decode turns it into a DataError naming the file and line."""


def decode(obj: Mapping[str, Any], where: str = "samples.jsonl", line: int | None = None,
           fix: str = "re-run or re-score this run directory") -> Record:
    """The typed record of one stored JSON object (a samples.jsonl line, a journal line)."""
    try:
        return _record(obj)
    except _Bad as exc:
        raise DataError(where, f"question {obj.get('id')!r}: {exc}", line=line, fix=fix) from None
    except (AttributeError, TypeError, ValueError) as exc:
        raise DataError(where, f"question {obj.get('id') if isinstance(obj, Mapping) else None!r}: not a record "
                        f"this version reads ({exc})", line=line, fix=fix) from None


def _record(obj: Mapping[str, Any]) -> Record:
    if not isinstance(obj, Mapping):
        raise _Bad(f"expected a JSON object, got {type(obj).__name__}")
    get = obj.get
    stored = get("criteria") or ()
    for c in stored:
        if isinstance(c, Mapping):
            weight, hit = c.get("weight"), c.get("hit")
            if ((weight is not None and not (type(weight) is int and -MAX_WEIGHT <= weight <= MAX_WEIGHT))
                    or (hit is not None and type(hit) is not bool)):
                _check(weight, hit)  # the common case (a bounded int weight, a bool verdict) is tested inline
    samples = get("samples")
    # positional, in Record's field order (a keyword call of 27 fields costs a fifth of the decode)
    return Record(
        get("id"), get("subset"), get("scenario"), tuple(get("tags") or ()), _reply(obj), get("candidate_error"),
        get("judge_error"), tuple(get("judge_raw") or ()), Criteria(stored, _criterion), _judgment(obj, stored),
        get("abilities", _EMPTY), get("item_tags", _EMPTY), get("score"), get("weight", 1),
        tuple(get("failed_rules") or ()), get("catastrophic", False), get("zeroed"), get("choice"),
        get("tokens", _EMPTY), get("cost", _EMPTY), get("cache_hits", _EMPTY), get("truncated", False),
        tuple(_record(s) for s in samples) if samples else (), get("sample"), get("sample_score_sd"),
        get("verdict_paths", _EMPTY), layout_of(obj, _RECORD_KEYS))


def _check(weight: Any, hit: Any) -> None:
    """What scoring would misread in a stored item: a weight that is no bounded number, a verdict not true/false/null."""
    if weight is not None and (isinstance(weight, bool) or not isinstance(weight, (int, float))
                               or not abs(weight) <= MAX_WEIGHT):
        raise _Bad(f"criterion weight {weight!r} is not a number between -{MAX_WEIGHT:g} and {MAX_WEIGHT:g}")
    if hit is not None and not isinstance(hit, bool):
        raise _Bad(f"verdict hit={json.dumps(hit)[:40]} is not true, false or null")


def _criterion(c: Mapping[str, Any]) -> CriterionVerdict:
    return CriterionVerdict(index=cast(int, c.get("index")), label=c.get("label", ""), ability=c.get("ability"),
                            rule=c.get("rule"), weight=c.get("weight"), text=c.get("text", ""),
                            reasoning=c.get("reasoning"), hit=c.get("hit"), votes=c.get("votes"), tags=tuple(c.get("tags") or ()), check=c.get("check"),
                            p_met=c.get("p_met"), credit=c.get("credit"),
                            layout=layout_of(c, _CRITERION_KEYS))


def _reply(obj: Mapping[str, Any]) -> Reply:
    text = obj.get("response")
    if "transcript" not in obj and "ended" not in obj and "user_error" not in obj:
        return Reply(text)
    turns = tuple(Turn(role=t.get("role"), content=t.get("content"), state=t.get("state"), layout=layout_of(t, _TURN_KEYS))
                  for t in obj.get("transcript") or ())
    return Transcript(text, turns=turns, ended=obj.get("ended"), user_error=obj.get("user_error"))


def _judgment(obj: Mapping[str, Any], criteria: Sequence[Mapping[str, Any]]) -> Judgment:
    if _MARKS.isdisjoint(obj):
        return _CRITERIA if any(isinstance(c, Mapping) and c.get("hit") is not None for c in criteria) else _NONE
    for variant in VARIANTS:
        if any(key in obj for key in variant.marks):
            judgment: Judgment = variant.decode(obj, layout_of)
            return judgment
    return CriteriaJudgment() if any(isinstance(c, Mapping) and c.get("hit") is not None for c in criteria) \
        else NotJudged()


def encode(rec: Record) -> dict[str, Any]:
    """The JSON object of a record: its stored keys in their stored order (a decoded record gives back the very
    object it was read from)."""
    shaped = rec.judgment.encoded() if any(k in _VARIANT_KEYS for k in rec.layout.keys) else _EMPTY
    out: dict[str, Any] = {}
    for key in rec.layout.keys:
        if key in shaped:
            out[key] = shaped[key]
        elif key in _ENCODERS:
            out[key] = _ENCODERS[key](rec)
        else:
            out[key] = rec.layout.extra.get(key)
    return out


def encode_new(rec: Record, kept: Iterable[str] = ()) -> dict[str, Any]:
    """The JSON object of a record made in memory (the run's writer: no stored order): its keys in the order of a
    fresh record (_HEAD, the variant's `early`, _MIDDLE, its `late`, _TAIL). A field is written when it is always
    written, when it holds a value (tags, item tags, a conversation's fields, the variant's `written()` keys) or
    when `kept` names it (a field written even when empty: `choice` of a multiple-choice question none was read
    from, `judge_raw` of a judge error, `weight`, a simulated user's `user_error`)."""
    variant = type(rec.judgment)
    order = [*_HEAD, *variant.early, *_MIDDLE, *variant.late, *_TAIL]
    if "weight" not in order:
        order.insert(order.index("tokens"), "weight")
    present = set(_ALWAYS) | set(kept) | set(rec.judgment.written())
    present.update(k for k, v in (("tags", rec.tags), ("item_tags", rec.item_tags), ("samples", rec.samples),
                                  ("verdict_paths", rec.verdict_paths)) if v)
    present.update(k for k, v in (("zeroed", rec.zeroed), ("sample", rec.sample),
                                  ("sample_score_sd", rec.sample_score_sd)) if v is not None)
    if isinstance(rec.reply, Transcript):
        present.add("transcript")
        if rec.reply.ended is not None:
            present.add("ended")
    return encode(replace(rec, layout=Layout(tuple(k for k in order if k in present))))


def encode_criterion(c: CriterionVerdict) -> dict[str, Any]:
    """One stored rubric item with its verdict, its keys in their stored order (an item made in memory: `votes`,
    `check` and `tags` written when it has them)."""
    values = {"index": c.index, "label": c.label, "ability": c.ability, "rule": c.rule, "weight": c.weight,
              "text": c.text, "reasoning": c.reasoning, "hit": c.hit, "votes": c.votes, "tags": list(c.tags),
              "check": c.check, "p_met": c.p_met, "credit": c.credit}
    if c.layout is NO_LAYOUT:
        return {k: values[k] for k in _FRESH_CRITERION_KEYS
                if (values[k] is not None if k in _IF_SET else values[k] or k not in ("votes", "check", "tags"))}
    return {k: values[k] if k in values else c.layout.extra[k] for k in c.layout.keys}


def _criteria(items: Criteria) -> Any:
    stored = items.stored
    return list(stored) if isinstance(stored, list) else stored if stored is not None else [
        encode_criterion(c) for c in items]


def encode_turns(turns: Iterable[Turn]) -> list[dict[str, Any]]:
    """A session's turns as stored (a record's `transcript`, an answers row's)."""
    return [{k: {"role": t.role, "content": t.content, "state": t.state}.get(k, t.layout.extra.get(k))
             for k in (_TURN_KEYS[:2 + (t.state is not None)] if t.layout is NO_LAYOUT else t.layout.keys)}
            for t in turns]


def _transcript(rec: Record) -> list[dict[str, Any]]:
    return encode_turns(rec.reply.turns if isinstance(rec.reply, Transcript) else ())


def _conversation(name: str) -> Any:
    return lambda rec: getattr(rec.reply, name, None)


_ENCODERS: dict[str, Any] = {
    "id": lambda r: r.id, "subset": lambda r: r.subset, "scenario": lambda r: r.scenario,
    "tags": lambda r: list(r.tags), "response": lambda r: r.reply.text,
    "candidate_error": lambda r: r.candidate_error, "judge_error": lambda r: r.judge_error,
    "judge_raw": lambda r: list(r.judge_raw), "criteria": lambda r: _criteria(r.criteria),
    "abilities": lambda r: r.abilities, "item_tags": lambda r: r.item_tags, "score": lambda r: r.score,
    "weight": lambda r: r.weight, "failed_rules": lambda r: list(r.failed_rules),
    "catastrophic": lambda r: r.catastrophic, "zeroed": lambda r: r.zeroed, "choice": lambda r: r.choice,
    "tokens": lambda r: r.tokens, "cost": lambda r: r.cost, "cache_hits": lambda r: r.cache_hits,
    "truncated": lambda r: r.truncated, "samples": lambda r: [encode(s) for s in r.samples],
    "sample": lambda r: r.sample, "sample_score_sd": lambda r: r.sample_score_sd,
    "verdict_paths": lambda r: {k: dict(v) for k, v in r.verdict_paths.items()},
    "transcript": _transcript, "ended": _conversation("ended"), "user_error": _conversation("user_error"),
}
