"""The two extension points of an evaluation: a `Conversation` (how a reply comes to be) and a `Verdict` (how
it is judged), and `Shape`, the pair a run looks up once from its spec (registry.shape_for).

Why classes with defaults rather than bare protocols: most shapes differ from the plainest one (a single reply,
judged per criterion) in a few places, and those places are exactly the methods a shape overrides. A caller
never asks which shape it holds: it calls the method, and the shape's module decides. The spec's own checks of
a shape stay in spec/ (the schema's Literal names the shapes; spec/scales.py validates a score's range), and
what the layers below this one need is a plain fact of the spec (spec/facts.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rubric_engine.datatypes import Question, Turn
from rubric_engine.judge.adaptive import AdaptivePanel, AdaptiveRule
from rubric_engine.judge.grading import JudgeResult, Planner, criteria_requests
from rubric_engine.judge.panels import Panel
from rubric_engine.models.request import Request
from rubric_engine.record.codec import encode
from rubric_engine.record.pairwise import Game
from rubric_engine.record.types import CriteriaJudgment, Judged, NotJudged, Record, Transcript
from rubric_engine.stats.scores import credits, question_score, rescored_fields

if TYPE_CHECKING:
    from rubric_engine.judge.checked import Grader
    from rubric_engine.models.client import ModelClient
    from rubric_engine.spec.schema import BenchmarkSpec, Judge

__all__ = ["Conversation", "Verdict", "UserLines", "Shape", "Talk", "Judging", "Message", "Requests", "judge_of"]

Message = dict[str, Any]
Requests = Callable[[Sequence[Message]], Request]  # a role's request at a point of a session: the turns so far


def judge_of(spec: "BenchmarkSpec") -> "Judge":
    """The spec's judge block, for a verdict that reads it: a score or pairwise verdict comes only from a judge
    block (registry.shape_for), and the criteria verdict's judge requests are asked for only when there is one."""
    judge = spec.judge
    assert judge is not None, "a verdict read the judge block of a spec without a judge"
    return judge


@dataclass
class Talk:
    """What run/dialogue.py hands a conversation: the three moves of a session, on one question's outcome.
    `user_says(text)` appends a user turn the data gave; `candidate()` has the candidate answer the transcript
    so far; `user()` has the simulated user speak (False: the session is over); `cut()` records that the
    session ran out of turns before the user ended it."""
    user_says: Callable[[str], None]
    candidate: Callable[[], Awaitable[None]]
    user: Callable[[], Awaitable[bool]]
    cut: Callable[[], None]


class Conversation:
    """How a reply comes to be. The defaults are a single reply: one candidate call, no transcript."""
    name = "single"
    talks = False  # the candidate writes several replies of one session (a transcript is kept and judged)
    simulates_user = False  # a user model plays the other side (run/settings.user_of resolves it)

    def check_session(self, spec: "BenchmarkSpec", question: Question) -> None:
        """Preflight beyond rendering the plan of calls (raises a SpecError): what a session needs to start."""

    def requests(self, spec: "BenchmarkSpec", question: Question, role: str = "candidate") -> Requests:
        """A role's requests in one session, as the run sends them: given the turns so far (none for a single
        reply), the request (run/pipeline.py and run/dialogue.py send them; `first_request` plans the first).
        What is rendered once per session (the candidate's prefix) is rendered here, once."""
        raise NotImplementedError

    def first_request(self, spec: "BenchmarkSpec", question: Question, role: str = "candidate") -> Request:
        """For the plan of calls (shapes/plan.py): a role's first request for a question, from `requests` (what
        the run fills in shown as a placeholder), titled for `prompts`, with how many calls it stands for."""
        raise NotImplementedError

    def planned_transcript(self, spec: "BenchmarkSpec", question: Question, reply: str) -> list[Message] | None:
        """The session the judge will see, every candidate reply `reply` (None: a single reply, no transcript)."""
        return None

    async def converse(self, spec: "BenchmarkSpec", question: Question, talk: Talk) -> None:
        """Drive one session's turns through `talk` (only for a conversation: `talks` is True)."""
        raise NotImplementedError(f"conversation {self.name} has no session")

    def stored_transcript(self, rec: Record) -> Transcript | None:
        """The session a stored record holds (its turns, how it ended, the simulated user's error), for its
        readers (answers.jsonl, the report); None: a single reply."""
        return None


@dataclass
class Judging:
    """Everything a verdict may need to judge one reply in a run (run/pipeline.py builds it once)."""
    spec: "BenchmarkSpec"
    grader: "Grader"  # checked items by the engine, the rest by the panel
    clients: Sequence["ModelClient"]  # the judges' clients, in plan order
    baseline_client: "ModelClient | None" = None  # a pairwise run's baseline model
    baseline_answers: Mapping[str, str] | None = None  # a pairwise run's baseline answers file


class UserLines:
    """How a simulated user's reply becomes its turn of the session (a verdict's, `Verdict.user_lines`; run/dialogue.py
    asks it each user turn). The default: the reply's words; the conversation's stop signal ends the session, the
    words before it kept for the judge. A verdict that reads more from each line (a hidden state) says what a
    valid reply is (`check`), how it is asked for again (`reask`) and what the turn keeps (`read`)."""
    invalid = "the simulated user's reply is not valid"  # the error's words before `check`'s reason

    def __init__(self, stop: str) -> None:
        self.stop = stop

    def check(self, text: str) -> str | None:
        """Why this reply must be asked for again (once; a second bad one is the question's user error)."""
        return None

    def reask(self, messages: list[dict[str, Any]], bad: str, why: str) -> list[dict[str, Any]]:
        """The request asked once more after the bad reply `bad` (only when `check` gave a reason)."""
        raise NotImplementedError(f"{type(self).__name__} gives no reason to ask again")

    def read(self, text: str) -> tuple[Turn | None, str | None]:
        """The user's turn (None: nothing to keep) and why the session ends here (None: it goes on)."""
        if self.stop not in text:
            return Turn("user", text), None
        last = text.split(self.stop, 1)[0].strip()  # the candidate is not asked to answer its last words
        return (Turn("user", last) if last else None), "stop"


class Verdict:
    """How a reply is judged. The defaults are criteria: a verdict per rubric item, scored by the formula."""
    name = "criteria"
    compares = False  # judged against a baseline's reply (run/pairwise.py reads the baseline)
    criterion_votes = True  # panels and samples leave per-criterion votes (run/stream.panel_sections)

    def check_plan(self, spec: "BenchmarkSpec", samples: int) -> None:
        """Refuse (ConfigError) what this verdict cannot do with the run's plan."""

    @property
    def adapts(self) -> bool:
        """judge.repeats=auto can repeat this verdict's judge requests alone (judge/adaptive.py): it leaves
        per-criterion votes and compares no two replies."""
        return self.criterion_votes and not self.compares

    def user_lines(self, spec: "BenchmarkSpec") -> UserLines:
        """How a simulated user's replies are read (the default: its words and the stop signal)."""
        return UserLines(spec.conversation.stop)

    def panel(self, clients: Sequence["ModelClient"], names: Sequence[str], spec: "BenchmarkSpec", repeats: int = 1,
              rule: str = "majority", tie: str = "not_met", adaptive: "AdaptiveRule | None" = None) -> Panel:
        """The panel that grades each reply with every judge, every repeat, sending this verdict's judge requests
        (`judge_requests`: the plan of calls the dry run prices is what the panel sends); `adaptive`: repeats by
        judge.repeats=auto's rule, `repeats` its cap."""
        plan: Planner = lambda question, reply, transcript: self.judge_requests(spec, question, reply, transcript)  # noqa: E731
        if adaptive is not None:
            return AdaptivePanel(list(clients), list(names), spec, repeats, rule, tie, plan=plan, adaptive=adaptive)
        return Panel(list(clients), list(names), spec, repeats, rule, tie, plan=plan)

    async def judge(self, j: Judging, question: Question, response: str, first_repeat: int = 0,
                    transcript: Sequence[Mapping[str, str]] | None = None) -> tuple[JudgeResult, dict[int, Any]]:
        """One reply's judgment and what the engine's checks found (run/pipeline.py)."""
        return await j.grader.grade(question, response, first_repeat=first_repeat, transcript=transcript)

    def question_score(self, spec: "BenchmarkSpec", question: Question, result: JudgeResult) -> Any:
        """The question's score from a judgment with verdicts (None: this verdict scores in its record)."""
        verdicts = result.verdicts or []  # use: probability: each item counts its P(met) where it has one (credits)
        return question_score(spec, question.criteria, [v.hit for v in verdicts], credits(spec, [v.p_met for v in verdicts]))

    def judged(self, spec: "BenchmarkSpec", result: JudgeResult | None, clip: Callable[[str], str]) -> Judged:
        """What this verdict adds to the question's fresh record (run/record.py): its judgment variant, the score
        it computed itself, the judge replies it keeps. Criteria: the verdicts are the record's items, scored by the
        formula (stats/scores.py), so only whether the judge gave any."""
        return Judged(CriteriaJudgment() if result is not None and result.verdicts else NotJudged())

    def compact(self, rec: Record) -> dict[str, Any]:
        """The compact values of this verdict's own that the run keeps of a finished question for its summary
        (run/stream.Totals; none for criteria)."""
        return {}

    def rescored(self, spec: "BenchmarkSpec", rec: Record, rules: bool, where: str) -> dict[str, Any]:
        """`rescore`: a stored record, as its JSON object, with its score fields recomputed from what this verdict
        stored (the per-criterion verdicts; `rules` False: without the failure-rule items). `where` names the file."""
        return rescored_fields(spec, rec, encode(rec), rules, where)

    def extra_usage(self, result: JudgeResult | None) -> dict[str, Any] | None:
        """Tokens, cost and cache hits of a further role this verdict called (a pairwise baseline), or None."""
        return None

    def stored_games(self, rec: Record) -> tuple[Game, ...] | None:
        """The comparisons a stored record holds, for the report; None: this verdict compares nothing, or the
        question was never judged."""
        return None

    def stored_baseline(self, rec: Record) -> str | None:
        """The baseline's reply a stored record was compared with (None: none)."""
        return None

    def judge_requests(self, spec: "BenchmarkSpec", question: Question, reply: str,
                       transcript: Sequence[Mapping[str, str]] | None) -> list[Request]:
        """Every judge request of one grading of `reply`, each with its title, response_format and answer
        description, in the order the run sends them: the plan of calls (shapes/plan.py) renders them and the run's
        panel sends them. `question` is as the judge sees it (judge/checked.judged_question)."""
        return criteria_requests(spec, question, reply, transcript)

    def baseline_request(self, spec: "BenchmarkSpec", question: Question) -> Request | None:
        """A baseline model's request for `question` (None: this verdict calls no baseline)."""
        return None

    def scoring_line(self, spec: "BenchmarkSpec") -> str:
        """validate's scoring line: what the spec does with the judge's verdicts."""
        agg = spec.aggregation
        v = spec.judge.verdict if spec.judge else None
        cov = agg.coverage  # coverage: at least k of the criteria met (of those tagged, when a tag is given)
        question = f"coverage (at least {cov.k} met{f' of tag {cov.tag}' if cov.tag else ''})" if cov else agg.question
        return (f"scoring: {spec.scoring.formula}; question score {question}, overall {agg.overall}, "
                f"clip {agg.clip}, no positive points: {agg.no_positive_points}; judge "
                f"{v.granularity if v else 'none'}")

    def described(self, spec: "BenchmarkSpec") -> str | None:
        """validate's extra line about this verdict (None: nothing to add)."""
        return None

    def summary_section(self, spec: "BenchmarkSpec",
                        records: Callable[[], Iterable[Mapping[str, Any]]]) -> dict[str, Any]:
        """summary.json keys of this verdict's own, from the run's records in question order (`records()`
        reads them from the journal; a verdict that adds nothing never calls it)."""
        return {}


@dataclass(frozen=True)
class Shape:
    """A spec's two strategies, looked up once per run."""
    conversation: Conversation
    verdict: Verdict
