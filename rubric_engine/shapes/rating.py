"""Judging by ratings against a reference (a spec's `rating:` block, EQ-Bench v2): the candidate rates named
things (four emotions, 0-10), the engine reads the ratings from its reply and scores them against the row's
reference values. No judge model is called.

Why here: everything a rating changes in a run is this class: its judgment is a parse (scoring/ratings.py does
the reading and the arithmetic), its record carries the passes it read (`rating`), an unparseable reply is
the question's counted error (`judge_error`, one line saying what was read), a stored record is rescored from
the reply it holds, and the summary gains a `rating` section: each pass's benchmark number and parseable count,
and the number EQ-Bench reports under its best-pass rule. The block's keys are checked in spec/ratings.py.

Record (`rating`, written for every reply read): `{"passes": [{"ratings": {name: n} | null, "score": x | null,
"error": why | null}, ...], "scored": k}`; the question's `score` is pass k's (rating.scored), unscored and a
judge error when that pass is unparseable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from rubric_engine.datatypes import Question
from rubric_engine.errors import ConfigError
from rubric_engine.judge.grading import JudgeResult
from rubric_engine.scoring.ratings import DISTANCES, ZERO_TOTAL, PassResult, choose_pass, pass_number, score_passes
from rubric_engine.models.request import Request
from rubric_engine.record.codec import encode
from rubric_engine.record.rating import RatingJudgment
from rubric_engine.record.types import Judged, Record
from rubric_engine.shapes.base import Judging, Verdict

if TYPE_CHECKING:
    from rubric_engine.spec.ratings import Rating as RatingBlock
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["Rating", "RatingResult", "reference_of"]


@dataclass
class RatingResult(JudgeResult):
    """One reply's ratings read: every pass, and which one is the question's score. `verdicts` stays None."""
    passes: list[PassResult] = field(default_factory=list)
    scored: int = 0
    reference: dict[str, float] = field(default_factory=dict)


def _block(spec: "BenchmarkSpec") -> "RatingBlock":
    block = getattr(spec, "rating", None)
    assert block is not None, "the rating verdict of a spec without a rating block"
    return cast("RatingBlock", block)


def reference_of(block: "RatingBlock", question: Question) -> tuple[dict[str, float] | None, str | None]:
    """The row's reference ratings, name -> value, or None and what is wrong with the row's column."""
    raw = question.extra.get(block.reference)
    if not isinstance(raw, Mapping):
        return None, f"the row's {block.reference!r} is not an object of reference ratings"
    pairs: list[tuple[Any, Any]] = list(raw.items())
    if block.name is not None and block.value is not None:
        pairs, i = [], 1
        while block.name.format(i=i) in raw:
            pairs.append((raw[block.name.format(i=i)], raw.get(block.value.format(i=i))))
            i += 1
    out: dict[str, float] = {}
    for name, value in pairs:
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None, f"the row's reference rating {name!r} is {value!r}, not a number"
        if not isinstance(name, str) or not name or name in out:
            return None, f"the row's reference names {name!r} are not distinct names"
        out[name] = number
    if not out:
        return None, f"the row's {block.reference!r} holds no reference ratings"
    return out, None


def _with_score(out: dict[str, Any]) -> dict[str, Any]:
    """`out` with the question's score fields when its scored pass has a score."""
    rating = out["rating"]
    score = rating["passes"][rating["scored"]]["score"]
    if score is not None:
        out.update(abilities={}, score=score, failed_rules=[], catastrophic=False)
    return out


def _pass_score(p: Mapping[str, Any], reference: Mapping[str, float], distance: str) -> dict[str, Any]:
    """A stored pass's score and error under `distance` (its ratings as read; none read: unchanged)."""
    if p.get("ratings") is None:
        return {}
    score = DISTANCES[distance](p["ratings"], reference)
    return {"score": score, "error": None if score is not None else ZERO_TOTAL}


class Rating(Verdict):
    """The verdict of a spec with a `rating:` block."""
    name = "rating"
    criterion_votes = False  # nothing is voted on

    def check_plan(self, spec: "BenchmarkSpec", samples: int) -> None:
        if samples > 1:
            raise ConfigError(f"samples={samples} with a rating: block is not supported: a rating run scores one "
                              "reply per question (run the benchmark again for another)")

    async def judge(self, j: Judging, question: Question, response: str, first_repeat: int = 0,
                    transcript: Sequence[Mapping[str, str]] | None = None) -> tuple[JudgeResult, dict[int, Any]]:
        block = _block(j.spec)
        reference, problem = reference_of(block, question)
        if reference is None:
            return RatingResult(None, f"no reference to score against: {problem}"), {}
        passes = score_passes(response, block.parse, block.passes, reference, block.distance)
        k = 0 if block.scored == "first" else len(passes) - 1
        error = passes[k].error
        where = f" ({block.passes[k]!r} pass)" if block.passes else ""
        return RatingResult(None, f"unparseable rating{where}: {error}" if error else None,
                            passes=passes, scored=k, reference=reference), {}

    def question_score(self, spec: "BenchmarkSpec", question: Question, result: JudgeResult) -> Any:
        """None: a rating scores in its record (judged)."""
        return None

    def judged(self, spec: "BenchmarkSpec", result: JudgeResult | None, clip: Callable[[str], str]) -> Judged:
        """The passes read (`rating`) and, when the scored pass was parseable, the question's score."""
        if not isinstance(result, RatingResult) or not result.passes:
            return Judged()
        passes = [{"ratings": p.ratings, "score": p.score, "error": p.error} for p in result.passes]
        return Judged(RatingJudgment({"reference": result.reference, "passes": passes, "scored": result.scored}),
                      result.passes[result.scored].score)

    def rescored(self, spec: "BenchmarkSpec", rec: Record, rules: bool, where: str) -> dict[str, Any]:
        """Every pass's score again from its stored ratings and reference, under the spec's distance (the reply
        is not read again: what was read is the record's). A record never read (a candidate error) is kept."""
        obj, judgment = encode(rec), rec.judgment
        if not isinstance(judgment, RatingJudgment) or not judgment.read or rec.candidate_error:
            return obj
        stored = judgment.stored
        distance, reference = _block(spec).distance, stored["reference"]
        passes = [{**p, **_pass_score(p, reference, distance)} for p in stored["passes"]]
        out = {k: v for k, v in obj.items() if k not in ("score", "judge_error", "judge_raw")}
        out.update(score=None, judge_error=None)
        out = _with_score({**out, "rating": {**stored, "passes": passes}})
        error = passes[stored["scored"]]["error"]
        if error:
            out.update(judge_error=f"unparseable rating: {error}", judge_raw=[])
        return out

    def judge_requests(self, spec: "BenchmarkSpec", question: Question, reply: str,
                       transcript: Sequence[Mapping[str, str]] | None) -> list[Request]:
        """None: the engine reads the ratings itself."""
        return []

    def scoring_line(self, spec: "BenchmarkSpec") -> str:
        b = _block(spec)
        names = f"names and reference values from {b.reference!r}" + (
            f" ({b.name} / {b.value})" if b.name else "")
        passes = (f"passes {', '.join(repr(p) for p in b.passes)}, the {b.scored} scored"
                  if b.passes else "one pass")
        return (f"scoring: ratings read by the engine (no judge), {names}; read as "
                f"{'`Name: number` lines' if b.parse == 'lines' else 'a JSON object'}, {passes}; distance "
                f"{b.distance}; a reply naming other or fewer names is unparseable (a counted error); summary "
                f"rating.benchmark = 100 x mean / 10 over parseable answers"
                + (f", the last pass unless it scores lower or has under {b.min_share:g} of the first pass's "
                   "parseable answers" if b.best_pass and len(b.passes) > 1 else ""))

    def summary_section(self, spec: "BenchmarkSpec",
                        records: Callable[[], Iterable[Mapping[str, Any]]]) -> dict[str, Any]:
        """`rating`: per pass its benchmark number, parseable and unparseable counts; the pass reported and
        its number (`benchmark`). A question never read (candidate error) counts in neither."""
        b = _block(spec)
        per_pass: list[list[float | None]] = []
        for rec in records():
            passes = (rec.get("rating") or {}).get("passes") or []
            for k, p in enumerate(passes):
                while len(per_pass) <= k:
                    per_pass.append([])
                per_pass[k].append(p.get("score"))
        if not per_pass:
            return {"rating": {"passes": [], "pass_used": None, "benchmark": None}}
        numbers = [pass_number(scores) for scores in per_pass]
        rule = "best" if b.best_pass else b.scored
        used = choose_pass(numbers, rule, b.min_share)
        names = b.passes or ["reply"]
        return {"rating": {
            "passes": [{"heading": names[k], "benchmark": n, "parseable": ok, "unparseable": len(per_pass[k]) - ok}
                       for k, (n, ok) in enumerate(numbers)],
            "pass_used": names[used], "benchmark": numbers[used][0]}}
