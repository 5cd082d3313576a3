"""Judging against anchors (`judge.verdict.kind: anchored`, a spec's `anchors:` block): the candidate's reply
compared with each anchor's reply to the same question, one game per order, under the declared length rule;
rewards per anchor (WildBench: +100 ... -100, a K-character margin) and the candidate's rating on the anchor
scale, the anchors' ratings held fixed (EQ-Bench 3's anchored Elo), with a bootstrap interval.

Why here: what anchors change in a run is gathered in one class. Each anchor's games are the pairwise shape's
(judge/pairwise.judge_pair plays them: the same requests, labels, re-asks and cache), fed the replies as the
length rule shows them; the record holds every game with its anchor, the rule and what the rule did
(record/anchored.py); the arithmetic is scoring/anchored.py's. An anchor with no answer to a question, or a game
whose verdict never reads, is that question's counted judge error (one line), never a crash and never a score
from the other games. Anchors are answers files (dataset/anchors.py), checked before any call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from rubric_engine.dataset.anchors import AnchorAnswers, anchor_answers
from rubric_engine.datatypes import Question
from rubric_engine.errors import ConfigError
from rubric_engine.judge.grading import JudgeResult, add_usage
from rubric_engine.judge.pairwise import BaselineReply, PairResult, game_requests, judge_pair
from rubric_engine.models.redact import redact
from rubric_engine.models.request import Request
from rubric_engine.record.anchored import AnchoredJudgment
from rubric_engine.record.codec import encode
from rubric_engine.record.types import Judged, Record
from rubric_engine.scoring.anchored import fit_rating, outcome, question_value, rating_interval, shown
from rubric_engine.scoring.pairwise import label_problem, patterns_of
from rubric_engine.shapes.base import Judging, Verdict, judge_of
from rubric_engine.shapes.plan import REPLY_PLACEHOLDER
from rubric_engine.stats.scores import rescored_fields

if TYPE_CHECKING:
    from rubric_engine.spec.anchors import Anchors
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["Anchored", "AnchoredResult"]

_NAMES = {1.0: "win_much", 0.5: "win", 0.0: "tie", -0.5: "lose", -1.0: "lose_much"}


@dataclass
class AnchoredResult(JudgeResult):
    """A question's games against every anchor: per anchor its games (PairResult), the full replies' lengths and
    whether the judge saw them cut. `verdicts` is [] when every game has a label (None with an error)."""
    anchors: list[tuple[str, PairResult, int, int, bool]] = field(default_factory=list)


def _block(spec: "BenchmarkSpec") -> "Anchors":
    block = spec.anchors
    if block is None:
        raise ConfigError(f"{spec.name}: judge.verdict.kind: anchored needs an anchors: block (anchors.files: "
                          "name -> {path, rating}); see docs/authoring.md")
    return block


def _placeholder(name: str) -> str:
    return f"<<<ANCHOR {name} REPLY: from its answers file>>>"


class Anchored(Verdict):
    """The verdict of `judge.verdict.kind: anchored`."""
    name = "anchored"
    criterion_votes = False

    def check_plan(self, spec: "BenchmarkSpec", samples: int) -> None:
        """Readable labels; every anchor's file present, readable and as pinned, before any call (one judge and
        one sample: run/pairwise.plan_baseline, which sees the jury)."""
        v = judge_of(spec).verdict
        problem = label_problem(v.labels, patterns_of(v.pattern), v.strong_weight)
        if problem:
            raise ConfigError(f"judge.verdict.{problem[0]}: {problem[1]}")
        anchor_answers(spec)

    async def judge(self, j: Judging, question: Question, response: str, first_repeat: int = 0,
                    transcript: Sequence[Mapping[str, str]] | None = None) -> tuple[JudgeResult, dict[int, Any]]:
        block = _block(j.spec)
        answers, where = _answers(j)
        out = AnchoredResult(verdicts=None, error=_unanswered(block, answers, where, question.id))
        if out.error is not None:  # nothing asked for this question
            return out, {}
        rule, chars = block.length.rule, block.length.chars

        async def versus(name: str) -> tuple[str, PairResult, int, int, bool]:
            theirs = answers[name][question.id]
            cand, anchor = shown(rule, chars, response, theirs)
            pair = await judge_pair(j.clients[0], j.spec, question, cand, BaselineReply(anchor))
            return name, pair, len(response), len(theirs), (cand, anchor) != (response, theirs)

        out.anchors = list(await asyncio.gather(*(versus(n) for n in block.files)))
        add_usage(out, [pair for _, pair, *_ in out.anchors])  # the paths its verdicts took summed too
        failed = [(n, p.error) for n, p, *_ in out.anchors if p.error]
        if failed:
            more = f" (+{len(failed) - 1} more anchors with failed games)" if len(failed) > 1 else ""
            out.error = f"anchor {failed[0][0]}, {failed[0][1]}{more}"
        else:
            out.verdicts = []
        return out, {}

    def question_score(self, spec: "BenchmarkSpec", question: Question, result: JudgeResult) -> Any:
        """None: the score comes with the games (judged)."""
        return None

    def judged(self, spec: "BenchmarkSpec", result: JudgeResult | None, clip: Callable[[str], str]) -> Judged:
        """Every game with its anchor and length facts; the score (mean reward) and weight (game count) when every
        game has a label."""
        if not isinstance(result, AnchoredResult) or not result.anchors:
            return Judged()
        line = _block(spec).length.line()
        games: list[dict[str, Any]] = []
        for name, pair, cand_chars, anchor_chars, cut in result.anchors:
            for g in pair.games:
                games.append({"anchor": name, "order": g.order, "label": g.label,
                              "reasoning": redact(clip(g.reasoning)) if g.reasoning else None,
                              "error": redact(g.error) if g.error else None, "length_rule": line,
                              "candidate_chars": cand_chars, "anchor_chars": anchor_chars, "truncated": cut})
        _score_games(spec, games)
        judgment = AnchoredJudgment(games)
        if result.error is not None:
            return Judged(judgment)
        score, weight = question_value([_outcome(spec, g) for g in games])
        return Judged(judgment, score, weight)

    def rescored(self, spec: "BenchmarkSpec", rec: Record, rules: bool, where: str) -> dict[str, Any]:
        """Score and weight again from the stored games (their labels, lengths and recorded rule). A stored game
        against an anchor the spec does not declare, or with a label that is not one, makes the question a counted
        judge error (one line), unscored."""
        out = encode(rec)
        if isinstance(rec.judgment, AnchoredJudgment) and not (rec.judge_error or rec.candidate_error):
            games = [dict(g) for g in rec.judgment.games]
            problem = _stored_problem(spec, games)
            if problem is not None:
                out.update(score=None, weight=None, judge_error=problem)
            elif games:
                _score_games(spec, games)
                out["anchor_games"] = games
                out["score"], out["weight"] = question_value([_outcome(spec, g) for g in games])
        return rescored_fields(spec, rec, out, rules, where)

    def judge_requests(self, spec: "BenchmarkSpec", question: Question, reply: str,
                       transcript: Sequence[Mapping[str, str]] | None) -> list[Request]:
        """Each anchor's games in the order the run plays them (judge/pairwise.game_requests), with the anchor's
        reply from its file (a placeholder when it has none for this question) under the length rule when the
        candidate's reply is known (the run's placeholder is shown whole)."""
        block = _block(spec)
        answers = anchor_answers(spec)
        out: list[Request] = []
        for name in block.files:
            theirs = answers[name].get(question.id)
            if theirs is None or reply == REPLY_PLACEHOLDER:
                cand, anchor = reply, theirs if theirs is not None else _placeholder(name)
            else:
                cand, anchor = shown(block.length.rule, block.length.chars, reply, theirs)
            out += [replace(r, title=f"anchor {name}, {r.title.replace('baseline', 'anchor')}")
                    for r in game_requests(spec, question, cand, anchor)]
        return out

    def scoring_line(self, spec: "BenchmarkSpec") -> str:
        b, v = _block(spec), judge_of(spec).verdict
        rated = b.rated()
        return (f"scoring: anchored pairwise against {', '.join(b.files)} "
                f"({'both orders' if v.swap else 'anchor first only'}); a game's reward from the candidate's side "
                "+1 strong win, +0.5 win, 0 tie, -0.5 loss, -1 strong loss; length rule " + b.length.line()
                + (" (a plain win by a reply more than K characters longer is a tie)" if b.length.rule == "margin"
                   else "") + "; question score = mean reward of its games, overall = pooled mean (x scale); "
                + (f"rating on the anchor scale ({b.scale.per:g} points = {b.scale.base:g}:1 odds) with "
                   f"{', '.join(f'{n} fixed at {r:g}' for n, r in rated.items())}, strong labels counted "
                   f"{v.strong_weight:g}x, bootstrap over questions ({b.rounds} rounds)" if rated
                   else "no anchor declares a rating: no rating"))

    def described(self, spec: "BenchmarkSpec") -> str | None:
        b = _block(spec)
        return "anchors: " + ", ".join(
            f"{n} ({a.model or '?'}, {a.path}{f', rating {a.rating:g}' if a.rating is not None else ''})"
            for n, a in b.files.items()) + f"; length rule {b.length.line()}"

    def summary_section(self, spec: "BenchmarkSpec",
                        records: Callable[[], Iterable[Mapping[str, Any]]]) -> dict[str, Any]:
        """`anchored`: per anchor its reward (x100, WildBench's scale), counts per outcome, discounted and
        truncated games; the mixture of rewards (mean over anchors); the rating with its interval. Only the games
        of scored questions count (a question with an error is counted by the run, not here)."""
        b, v = _block(spec), judge_of(spec).verdict
        per: dict[str, dict[str, Any]] = {n: {"model": a.model, "rating": a.rating, "games": 0, "reward": None,
                                              **{k: 0 for k in _NAMES.values()}, "discounted": 0, "truncated": 0}
                                          for n, a in b.files.items()}
        sums = {n: 0.0 for n in b.files}
        rated = b.rated()
        questions: list[list[tuple[float, float, float]]] = []
        for rec in records():
            if rec.get("score") is None:
                continue
            mine: list[tuple[float, float, float]] = []
            for g in rec.get("anchor_games") or []:
                name = g.get("anchor")
                if name not in per or g.get("reward") is None:
                    continue
                o = _outcome(spec, g)
                row = per[name]
                row["games"] += 1
                row[_NAMES[o.reward]] += 1
                row["discounted"] += int(o.discounted)
                row["truncated"] += int(bool(g.get("truncated")))
                sums[name] += o.reward
                if name in rated:
                    mine.append((rated[name], o.score, o.weight))
            if mine:
                questions.append(mine)
        for n, row in per.items():
            row["reward"] = 100 * sums[n] / row["games"] if row["games"] else None
        rewards = [row["reward"] for row in per.values()]
        section: dict[str, Any] = {
            "length_rule": b.length.line(), "anchors": per,
            "mixture_of_rewards": None if None in rewards else sum(rewards) / len(rewards), "rating": None}
        if rated:
            value = fit_rating([g for q in questions for g in q], b.scale.per, b.scale.base)
            low, high, unbounded = (rating_interval(questions, b.rounds, b.scale.per, b.scale.base)
                                    if questions and b.rounds else (None, None, 0))
            section["rating"] = {"value": value, "low": low, "high": high, "rounds": b.rounds,
                                 "unbounded_rounds": unbounded, "questions": len(questions),
                                 "scale": {"per": b.scale.per, "base": b.scale.base}, "fixed": rated,
                                 "strong_weight": v.strong_weight}
        return {"anchored": section}


def _unanswered(block: "Anchors", answers: Mapping[str, Mapping[str, str]], where: Mapping[str, str],
                qid: str) -> str | None:
    """Why question `qid` cannot be judged before any call (None: every anchor answers it, and no undeclared one
    does)."""
    unknown = [n for n, a in answers.items() if n not in block.files and qid in a]
    if unknown:
        return (f"{where[unknown[0]]} answers this question for anchor {unknown[0]!r}, which the spec does not "
                f"declare (declared: {', '.join(block.files)})")
    missing = [n for n in block.files if qid not in answers[n]]
    if missing:
        return (f"anchor {', '.join(missing)}: no answer to this question in "
                f"{', '.join(dict.fromkeys(where[n] for n in missing))}")
    return None


def _answers(j: Judging) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """(anchor -> id -> reply, anchor -> the file it came from): the spec's files, each anchor the command line's
    `baseline.answers=FILE` holds replacing its declared file (a name the spec does not declare kept, so the
    questions it answers are counted errors)."""
    block = _block(j.spec)
    answers = dict(anchor_answers(j.spec))
    where = {n: a.path for n, a in block.files.items()}
    given = j.baseline_answers
    if isinstance(given, AnchorAnswers):
        answers.update(given.by_anchor)
        where.update({n: given.path for n in given.by_anchor})
    return answers, where


def _rule_of(game: Mapping[str, Any]) -> tuple[str, int | None]:
    """A stored game's length rule (`margin:500` -> ("margin", 500); `truncate:common` -> ("truncate", None))."""
    rule, _, chars = str(game.get("length_rule") or "none").partition(":")
    return rule, int(chars) if chars.isdigit() else None


def _outcome(spec: "BenchmarkSpec", game: Mapping[str, Any]) -> Any:
    rule, chars = _rule_of(game)
    return outcome(str(game["label"]), str(game["order"]), judge_of(spec).verdict.strong_weight, rule, chars,
                   int(game.get("candidate_chars") or 0), int(game.get("anchor_chars") or 0))


def _stored_problem(spec: "BenchmarkSpec", games: Sequence[Mapping[str, Any]]) -> str | None:
    """What makes stored games unscorable under `spec` (None: nothing)."""
    declared = _block(spec).files
    for g in games:
        if g.get("anchor") not in declared:
            return (f"a stored game against anchor {g.get('anchor')!r}, which the spec does not declare (declared: "
                    f"{', '.join(declared)})")
        try:
            _outcome(spec, g)
        except (ValueError, KeyError, TypeError) as exc:
            return f"a stored game against anchor {g.get('anchor')} cannot be scored: {exc}"
    return None


def _score_games(spec: "BenchmarkSpec", games: list[dict[str, Any]]) -> None:
    """Each labelled game's `discounted` and `reward` (None for a game without a label), in place."""
    for g in games:
        o = _outcome(spec, g) if g.get("label") is not None else None
        g["discounted"] = None if o is None else o.discounted
        g["reward"] = None if o is None else o.reward

