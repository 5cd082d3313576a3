"""How each model's score would move from one spec version to the next, from its stored verdicts (`diff runs=`).

Why: before releasing version N+1 a team wants to know whether the leaderboard moves; paying the judge again for
every run is waste when most criteria only changed weight, group or wording. A run of the old version already
holds a verdict per criterion: each new criterion takes the verdict of the old one it matches
(authoring/versions.py's pairing), and the question is scored under the new spec by stats/scores.py, the
functions a run uses, so the number equals what a fresh run would give if the judge decided the same. A
criterion added in the new version has no verdict: its question is left out and named, never guessed; the old
score is then given over the same questions, so the delta compares like with like.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubric_engine.errors import ConfigError

__all__ = ["Move", "score_moves"]


@dataclass
class Move:
    """One run's score under the old and the new spec over the questions both can score (`kept`)."""
    run: str
    candidate: str
    old: float | None = None
    new: float | None = None
    kept: int = 0
    left_out: list[str] = field(default_factory=list)  # "qid: why", one per question not rescored

    def line(self) -> str:
        if self.old is None or self.new is None:
            return f"{self.candidate} ({self.run}): no question could be rescored; " + "; ".join(self.left_out)
        head = (f"{self.candidate} ({self.run}): {self.old:.2f} -> {self.new:.2f} ({self.new - self.old:+.2f}) "
                f"over {self.kept} question{'s' * (self.kept != 1)}")
        return head + (f"; not rescored: {'; '.join(self.left_out)}" if self.left_out else "")


def _new_hits(rec: Any, question: Any, n: int) -> tuple[tuple[list[bool], list[Any]] | None, str]:
    """The new criteria's verdicts and P(met) (None where none) taken from the record's matched old ones, or
    (None, why not)."""
    from rubric_engine.authoring.versions import pairs
    from rubric_engine.stats.scores import criteria_from_record

    if rec.judge_error or rec.candidate_error or rec.score is None:
        return None, "not scored in the run (an error it counted)"
    hits = [c.hit for c in rec.criteria]
    if not hits or any(h not in (True, False) for h in hits):
        return None, "the run holds no verdict per criterion"
    matched = dict((j, i) for i, j in pairs(criteria_from_record(rec), question.criteria, n))
    added = [c.index for j, c in enumerate(question.criteria) if j not in matched]
    if added:
        return None, f"criteri{'a' if len(added) > 1 else 'on'} {', '.join(map(str, added))} added, no verdict"
    old = [matched[j] for j in range(len(question.criteria))]
    return ([bool(hits[i]) for i in old], [rec.criteria[i].p_met for i in old]), ""


def _move(run: Any, old_spec: Any, new_spec: Any, questions: dict[str, Any], n: int) -> Move:
    from rubric_engine.record.codec import encode
    from rubric_engine.stats.scores import score_fields, score_summary

    move, before, after = Move(str(run.dir), run.candidate), [], []
    for rec in run.iter_records():
        question = questions.get(str(rec.id))
        verdicts, why = _new_hits(rec, question, n) if question is not None else (None, "removed in the new version")
        if verdicts is None:
            move.left_out.append(f"{rec.id}: {why}")
            continue
        out = encode(rec)
        before.append(dict(out))
        out.pop("item_tags", None)
        out.update(score_fields(new_spec, question.criteria, *verdicts))  # P(met) counted where the spec says so
        after.append(out)
    if before:
        move.kept = len(before)
        move.old = score_summary(old_spec, before)["overall"]
        move.new = score_summary(new_spec, after)["overall"]
    return move


def score_moves(run_dirs: Sequence[Path], old_spec: Any, new_spec: Any, new_questions: Sequence[Any],
                n: int) -> list[Move]:
    """A Move per run of the old version (a sweep directory gives its runs); a run of another benchmark or
    version is refused (ConfigError)."""
    from rubric_engine.store.runs import find_run_dirs, load_run

    questions = {q.id: q for q in new_questions}
    moves = []
    found = [r for d in run_dirs for r in find_run_dirs(Path(d).expanduser())]  # a sweep directory: its runs
    for d in dict.fromkeys(found):
        run = load_run(d)
        name, version = run.spec.get("name"), str(run.spec.get("version", ""))
        if (name, version) != (old_spec.name, old_spec.version):
            raise ConfigError(f"diff: {d} is a run of {name} {version}, not of {old_spec.name} {old_spec.version}; "
                              "pass runs of the old version")
        moves.append(_move(run, old_spec, new_spec, questions, n))
    return moves
