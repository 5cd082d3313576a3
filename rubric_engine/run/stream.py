"""The run directory as a stream: the journal's identity, resuming from it, compact totals, the final files.

Why a module of its own: the runner appends each finished question to `samples.jsonl` (a journal,
rubric_engine/run/journal.py) and must not hold the records; everything the summary needs is folded
into `Totals` as the records pass (on resume while reading the journal, then as questions finish),
the sections of repeats, juries and candidate samples by one pass over the finished journal in
question order (`panel_sections`), and the final question-ordered `samples.jsonl` / `answers.jsonl`
are written by streaming over the journal once more. See docs/scaling.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from rubric_engine.datatypes import Question, QuestionRef, QuestionRows
from rubric_engine.errors import DataError
from rubric_engine.record.codec import decode, encode_turns
from rubric_engine.record.types import Record
from rubric_engine.run.journal import JOURNAL_VERSION, JournalState, read_journal
from rubric_engine.scoring.aggregate import ScoredQuestion, scored_from_samples
from rubric_engine.shapes.base import Conversation, Verdict
from rubric_engine.spec.schema import BenchmarkSpec
from rubric_engine.stats.adaptive import AdaptiveFold
from rubric_engine.stats.noise import PanelFold, gradings
from rubric_engine.stats.sampling import SectionsFold
from rubric_engine.stats.scores import unread_choices
from rubric_engine.store import layout as rundir

__all__ = ["Totals", "resume", "drop_errors", "index", "ordered_records", "panel_sections", "finish_files"]

_MOVE_AWAY = "move the file away to run this again"
_ERRORS = ("candidate_error", "judge_error", "user_error")  # a record holding any of them ended in an error

# stage=generate's journal (store/layout.GENERATE_JOURNAL): the same format as samples.jsonl, but the run's output
# is answers.jsonl, so the journal is removed once answers.jsonl is written (a generate run leaves no samples.jsonl)


@dataclass
class Totals:
    """Compact per-question values the summary needs, folded in record by record (no record is kept). `verdict`:
    the run's, which adds its own compact values (Verdict.compact)."""

    verdict: Verdict = field(default_factory=Verdict)
    questions: int = 0
    judge_errors: int = 0
    candidate_errors: int = 0
    unscored: int = 0  # judged, no error, no score (no positive points under `exclude`)
    truncated: int = 0  # candidate replies cut at the token limit
    user_errors: int = 0  # a simulated conversation's questions whose simulated user failed
    cut_at_max_turns: int = 0  # its sessions cut at conversation.max_turns
    tokens: dict[str, dict[str, int]] = field(default_factory=lambda: {
        r: {"prompt": 0, "completion": 0} for r in ("candidate", "judge")})
    # exact sums (Fraction), so the total does not depend on the order questions finished in
    cost: dict[str, Fraction | None] = field(default_factory=lambda: {"candidate": None, "judge": None})
    scored: dict[str, ScoredQuestion] = field(default_factory=dict)
    # what scores.score_summary reads of each record (counts, length analysis), without the texts
    compact: dict[str, dict[str, Any]] = field(default_factory=dict)
    # judge name -> verdict replies per path (structured, plain, reasked: judge/structured.py)
    verdict_paths: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, rec: Record) -> None:
        """Fold in one decoded record (the run's, or one read back from the journal on resume)."""
        self.questions += 1
        response, reply = rec.response, rec.reply
        qid = str(rec.id)
        self.compact[qid] = {"id": qid,
            "judge_error": bool(rec.judge_error), "candidate_error": bool(rec.candidate_error),
            "truncated": bool(rec.truncated), "score": rec.score, "zeroed": bool(rec.zeroed),
            "response_chars": len(response) if isinstance(response, str) else None,
            "tokens": {"candidate": {"completion": int(rec.tokens["candidate"]["completion"])}},
            "abilities": {a: {"score": v.get("score")} for a, v in rec.abilities.items() if isinstance(v, Mapping)},
            "no_choice": unread_choices(rec),  # multiple choice: replies without a readable letter
            **({"failed_rules": list(rec.failed_rules)} if rec.failed_rules else {}),  # the rules that fired: vetoes
            **self.verdict.compact(rec)}  # a verdict's own values (a score's [turn, score] pairs: stats/turns.py)
        self.judge_errors += bool(rec.judge_error)
        self.candidate_errors += bool(rec.candidate_error)
        self.truncated += bool(rec.truncated)
        self.user_errors += bool(getattr(reply, "user_error", None))  # a conversation's (record/types.Transcript)
        self.cut_at_max_turns += getattr(reply, "ended", None) == "max_turns"
        for judge, paths in rec.verdict_paths.items():
            mine = self.verdict_paths.setdefault(str(judge), {})
            for path, n in paths.items():
                mine[str(path)] = mine.get(str(path), 0) + int(n)
        if rec.score is None and not rec.judge_error and not rec.candidate_error:
            self.unscored += 1
        for role, used in rec.tokens.items():  # candidate, judge, and any other role a record has (user, baseline)
            for k in ("prompt", "completion"):
                self.tokens.setdefault(role, {"prompt": 0, "completion": 0})[k] += int(used[k])
            self.cost.setdefault(role, None)
            c = rec.cost[role]
            if c is not None:
                self.cost[role] = (self.cost[role] or Fraction(0)) + Fraction(c)
        for sq in scored_from_samples([rec]):
            self.scored[sq.id] = sq

    def costs(self) -> dict[str, float | None]:
        """Cost per role; None where no call was priced (never a made-up zero)."""
        return {r: None if c is None else float(c) for r, c in self.cost.items()}

    def compact_in_order(self, questions: Sequence[QuestionRef]) -> list[dict[str, Any]]:
        """The compact records in question order (one per question that has a record)."""
        return [self.compact[q.id] for q in questions if q.id in self.compact]

    def scored_in_order(self, questions: Sequence[QuestionRef]) -> list[ScoredQuestion]:
        """Question order, whatever order the questions finished in: sums and the bootstrap's resamples
        then come out the same for a resumed run as for an uninterrupted one."""
        return [self.scored[q.id] for q in questions if q.id in self.scored]


def _first_line(path: Path) -> dict[str, Any] | None:
    with path.open("rb") as fh:
        line = fh.readline()
    try:
        first = json.loads(line)
    except ValueError:
        return None
    return first if isinstance(first, dict) else None


def resume(path: Path, fp: str, on_record: Callable[[Record], None]) -> JournalState:
    """Read what the journal at `path` already holds for this run, each record decoded (record/codec.py) for
    `on_record`; call only after `rundir.begin_run`
    accepted the directory (its manifest names this same run). A journal (header line) is streamed,
    checked against `fp` and repaired; a finished samples.jsonl (question order, no header: the run
    completed, or was killed after its last question) counts whole."""
    if not path.exists() or path.stat().st_size == 0:
        return JournalState()
    first = _first_line(path)
    if first is not None and "journal" in first:
        return read_journal(path, fp, lambda obj: on_record(decode(obj, str(path), fix=_MOVE_AWAY)))
    state = JournalState()
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            try:
                obj = json.loads(line)
                qid = obj["id"]
            except (ValueError, TypeError, KeyError):
                raise DataError(str(path), "unreadable record", line=n,
                                fix=_MOVE_AWAY) from None
            state.done.add(qid)
            on_record(decode(obj, str(path), n, fix=_MOVE_AWAY))
    return state


def drop_errors(path: Path, fp: str) -> int:
    """`retry_errors=true`: rewrite the journal at `path` (or a finished samples.jsonl, which becomes a journal
    again) without the records that ended in an error, so `resume` runs those questions again and keeps every
    other record; returns how many were dropped (0: the file is left as it is). One atomic, fsync'd replace:
    a crash leaves either the old file or the new one, whole, and the new one resumes like any journal (a
    dropped question runs again, its successful calls read back from the cache)."""
    if not path.exists() or path.stat().st_size == 0:
        return 0
    first = _first_line(path)
    journal = first is not None and "journal" in first
    if journal:
        read_journal(path, fp)  # this run's journal (else one line), an incomplete last record cut off
    errored = 0
    with path.open("rb") as fh:
        for n, raw in enumerate(fh):
            if not (journal and n == 0):
                errored += any(json.loads(raw).get(k) for k in _ERRORS)
    if not errored:
        return 0

    def kept() -> Iterator[str]:
        yield json.dumps(first if journal else {"journal": JOURNAL_VERSION, "run": fp},
                         ensure_ascii=False, separators=(",", ":")) + "\n"
        with path.open("rb") as fh:
            for n, raw in enumerate(fh):
                if not (journal and n == 0) and not any(json.loads(raw).get(k) for k in _ERRORS):
                    yield raw.decode("utf-8")

    rundir.write_lines(path, kept(), fsync=True)
    return errored


def index(path: Path) -> dict[str, int]:
    """Byte offset of each question's record in a journal (or a finished samples.jsonl)."""
    offsets: dict[str, int] = {}
    pos = 0
    with path.open("rb") as fh:
        for raw in fh:
            rec = json.loads(raw)
            if "id" in rec and "journal" not in rec:
                offsets[rec["id"]] = pos
            pos += len(raw)
    return offsets


def ordered_records(journal: Path, refs: Sequence[QuestionRef],
                    offsets: Mapping[str, int] | None = None) -> Iterator[tuple[QuestionRef, dict[str, Any]]]:
    """Each question's record from the journal, in question order (not completion order), one at a time."""
    offsets = index(journal) if offsets is None else offsets
    with journal.open("rb") as src:
        for ref in refs:
            if ref.id in offsets:
                src.seek(offsets[ref.id])
                yield ref, json.loads(src.readline())


def panel_sections(spec: BenchmarkSpec, journal: Path, rows: QuestionRows, names: Sequence[str], *, repeats: int,
                   samples: int, rule: str, tie: str, offsets: Mapping[str, int] | None = None,
                   adaptive: AdaptiveFold | None = None) -> dict[str, Any]:
    """summary.json's `noise` / `jury` (stats/noise.py) and `sampling` / hierarchical `interval` (stats/sampling.py)
    of a run with repeats, a jury or candidate samples: one pass over the finished journal in question order,
    every vote read from the records (nothing held from the run); a question's criteria are read again from
    its data row, as the run scored them. `adaptive`: a judge.repeats=auto run's fold (its `noise`), in place of
    fixed repeats' (its votes per criterion vary in number; its combined verdicts are each item's `hit`)."""
    repeats = 1 if adaptive is not None else repeats
    panel = PanelFold(spec, names, repeats, rule, tie) if len(names) > 1 or repeats > 1 else None
    fold = SectionsFold(spec, samples=samples, repeats=repeats, rule=rule, tie=tie) if repeats > 1 or samples > 1 else None
    for ref, rec in ordered_records(journal, rows.refs, offsets):
        held: list[Question] = []

        def question(ref: QuestionRef = ref, held: list[Question] = held) -> Question:
            if not held:
                held.append(rows.question(ref))
            return held[0]

        if panel is not None:
            for grading in gradings(rec, names, repeats):
                panel.add(question(), grading)
        if adaptive is not None:
            adaptive.add(rec, {c.index: c.ability for c in question().criteria})
        if fold is not None:
            fold.add(rec, lambda _: list(question().criteria))
    out = panel.sections() if panel is not None else {}
    out.update(fold.sections() if fold is not None else {})
    out.update({"noise": adaptive.section()} if adaptive is not None else {})
    return out


def finish_files(out: Path, journal: Path, rows: QuestionRows, id_field: str, conversation: Conversation,
                 samples: bool = True, offsets: Mapping[str, int] | None = None) -> None:
    """Write answers.jsonl (each benchmark row, read again from the data file, plus its response) from the
    journal, then rewrite the journal as question-ordered samples.jsonl (no header), or remove it when
    `samples` is false (stage=generate); one record in memory at a time. `conversation`: the run's, which says
    what session a record holds. `offsets`: the journal's index (`index`) when the caller has it already."""
    offsets = index(journal) if offsets is None else offsets
    with journal.open("rb") as src:
        def record(ref: QuestionRef) -> dict[str, Any]:
            src.seek(offsets[ref.id])
            return json.loads(src.readline())

        def answers() -> Iterator[str]:
            for ref in rows.refs:
                row = dict(rows.row(ref) or {id_field: ref.id})
                rec = decode(record(ref))
                row["response"] = rec.response
                said = conversation.stored_transcript(rec)  # a session: stage=score / from_run judge it again
                if said is not None:
                    row["transcript"] = encode_turns(said.turns)
                yield json.dumps(row, ensure_ascii=False) + "\n"

        def ordered() -> Iterator[str]:
            for ref in rows.refs:
                yield json.dumps(record(ref), ensure_ascii=False) + "\n"

        rundir.write_lines(out / rundir.ANSWERS_FILE, answers(), fsync=True)
        if samples:
            rundir.write_lines(out / rundir.SAMPLES_FILE, ordered(), fsync=True)
    if not samples:
        journal.unlink()
