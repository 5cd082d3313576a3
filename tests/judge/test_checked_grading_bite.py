"""Grading a reply whose rubric mixes checked and judged items (judge/checked.py), in-process so the mutation
tool sees it. The rules its docstring states: a checked item is never sent to a judge; the judge is shown only
the judged items, numbered 1..m, and its verdicts are mapped back to each item's own index (a jury's votes and
each judge's verdicts too); the checks are computed once per reply and merged in rubric order; a reply whose
items are all checks makes no judge call; a failed judge call leaves the question without verdicts (never
scored on the checks alone). The judges are LiteLLM speaking HTTP to the fake server on 127.0.0.1, answering on
the criterion's text (asymmetric: one item met, one not; one judge of a jury failing). The console-script
checks of the same rules are tests/shapes/test_checks.py.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import pytest

from fakeserver import FakeServer, Reply
from rubric_engine.dataset.load import load_dataset
from rubric_engine.judge.checked import Grader, judged_question
from rubric_engine.judge.panels import Panel, PanelResult
from rubric_engine.judge.verdicts import Verdict
from rubric_engine.models.cache import ResultCache
from rubric_engine.models.client import ModelClient
from rubric_engine.models.entries import ModelSpec
from rubric_engine.spec.load import load_spec
from rubric_engine.stats.scores import question_score

from conftest import TESTS
DATA = TESTS / "data" / "checks_mini"
# "Falling leaves ... Summer ...": 14 words, 78 characters, "Summer" at 55, no "as an AI"
REPLY = "Falling leaves drift down, red and gold on autumn ground. Summer is long gone."
_ITEM = re.compile(r"^(\d+)\. \((\S+) points\) (.+)$", re.M)


def _spec(tmp_path: Path) -> Any:
    """checks_mini with a judge template that also prints the conversation it is given."""
    root = tmp_path / "bench"
    shutil.copytree(DATA, root)
    with (root / "judge.j2").open("a", encoding="utf-8") as fh:
        fh.write("{% for t in transcript %}TURN {{ t.role }}: {{ t.content }}\n{% endfor %}")
    return load_spec(root)


def _questions(tmp_path: Path) -> tuple[Any, dict[str, Any]]:
    spec = _spec(tmp_path)
    return spec, {q.id: q for q in load_dataset(spec).questions}


def _shown(body: dict[str, Any]) -> list[tuple[int, str, str]]:
    """The criteria a judge request shows: (number, points, text)."""
    return [(int(i), w, t.strip()) for i, w, t in _ITEM.findall(body["messages"][-1]["content"])]


def _judges(meets: Callable[[str, str], bool | None]) -> FakeServer:
    """Judges answering on each shown criterion's text; meets(model, text) -> met, None: this judge fails (400)."""
    def handler(body: dict[str, Any]) -> Reply:
        items = _shown(body)
        verdicts = [meets(body["model"], t) for _, _, t in items]
        if any(v is None for v in verdicts):
            return Reply(status=400, error="this judge refuses")
        crit = ", ".join(f'{{"id": {i}, "reasoning": "{body["model"]} on {t}", "met": {str(v).lower()}}}'
                         for (i, _, t), v in zip(items, verdicts))
        return Reply(text=f'{{"criteria": [{crit}]}}')
    return FakeServer(handler)


def _client(srv: FakeServer, name: str, cache: ResultCache | None = None) -> ModelClient:
    return ModelClient(ModelSpec(name=name, model=f"openai/{name}", api_base=srv.url, api_key_env="FAKE_KEY"),
                       cache=cache, max_retries=0, backoff_base=0.01, role="judge")


def _grade(grader_of: Callable[[], Grader], *calls: tuple[Any, ...]) -> list[Any]:
    """Each call (question, reply, first_repeat, transcript) graded in order by one Grader; its clients closed."""
    async def go() -> list[Any]:
        grader = grader_of()
        try:
            return [await grader.grade(*c) for c in calls]
        finally:
            for c in grader.panel.clients if grader.panel else ():
                await c.aclose()
    return asyncio.run(go())


# -- the question the judge is shown --------------------------------------------------------------------------

def test_judged_question_keeps_judged_items_only_renumbered(tmp_path: Path) -> None:
    _, qs = _questions(tmp_path)
    haiku = qs["haiku"]
    assert [c.index for c in haiku.criteria] == [1, 2, 3, 4, 5, 6]  # 5 items of the row + the spec's check
    shown = judged_question(haiku)
    assert shown is not None and shown is not haiku
    assert [(c.index, c.weight, c.text, c.check) for c in shown.criteria] == [
        (1, 3.0, "The reply is a haiku about autumn", None), (2, 2.0, "It mentions falling leaves", None)]
    assert replace(shown, criteria=haiku.criteria) == haiku  # nothing else of the question changes
    assert judged_question(qs["person"]) is None  # every item a check: no judge call
    plain = replace(haiku, criteria=judged_question(haiku).criteria)
    assert judged_question(plain) is plain  # no checked item: the same question object


def test_grader_repeats_are_the_panels_or_one(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    assert Grader(None).repeats == 1
    assert Grader(Panel([], [], spec, repeats=3)).repeats == 3


# -- one judge: mixed items, mapped back, scored by hand ------------------------------------------------------

def test_mixed_items_judge_sees_only_its_own_and_verdicts_merge_in_rubric_order(fake_key: str, tmp_path: Path) -> None:
    spec, qs = _questions(tmp_path)
    q = qs["haiku"]
    with _judges(lambda m, t: t == "It mentions falling leaves") as srv:
        [(res, checks)] = _grade(lambda: Grader(Panel([_client(srv, "j")], ["j"], spec)), (q, REPLY))
        assert len(srv.requests) == 1
        assert _shown(srv.requests[0]) == [(1, "3", "The reply is a haiku about autumn"),
                                           (2, "2", "It mentions falling leaves")]
    assert res.error is None and res.attempts == 1
    assert res.verdicts == [
        Verdict(1, "j on The reply is a haiku about autumn", False),
        Verdict(2, "check words: 14 (max 30)", True),
        Verdict(3, "check not_contains: not found", True),
        Verdict(4, "j on It mentions falling leaves", True),
        Verdict(5, "check regex: matched at 58", True),
        Verdict(6, f"check chars: {len(REPLY)} (max 2000)", True)]
    assert sorted(checks) == [2, 3, 5, 6] and checks[5].hit is True and checks[2].found == "check words: 14 (max 30)"
    # met_over_positive by hand: met 1 + 1 + 2 + 1 = 5 points, the -2 item met, of 3 + 1 + 1 + 2 + 1 = 8 positive
    hits = [v.hit for v in res.verdicts]
    assert question_score(spec, q.criteria, hits).score == pytest.approx((5 - 2) / 8)


def test_all_checks_make_no_judge_call(fake_key: str, tmp_path: Path) -> None:
    spec, qs = _questions(tmp_path)
    reply = '{"name": "Ada", "age": 36}'
    with _judges(lambda m, t: True) as srv:
        [(res, checks)] = _grade(lambda: Grader(Panel([_client(srv, "j")], ["j"], spec)), (qs["person"], reply))
        assert srv.requests == []
    assert res.error is None and res.attempts == 0 and res.raw_replies == []
    assert res.verdicts == [Verdict(1, "check json: valid JSON with every key", True),
                            Verdict(2, "check chars: 26 (max 80)", True),
                            Verdict(3, "check chars: 26 (max 2000)", True)]
    assert sorted(checks) == [1, 2, 3]
    # without any judge (a spec declaring none), the same verdicts
    [(alone, _)] = _grade(lambda: Grader(None), (qs["person"], reply))
    assert alone.verdicts == res.verdicts and alone.error is None


def test_no_checked_item_is_the_panels_result_as_it_is(fake_key: str, tmp_path: Path) -> None:
    spec, qs = _questions(tmp_path)
    q = replace(qs["leaves"], criteria=judged_question(qs["leaves"]).criteria)
    turns = [{"role": "user", "content": "why green?"}]
    with _judges(lambda m, t: t == "It is accurate") as srv:
        cache = ResultCache(tmp_path / "cache")
        (res, checks), (again, _), (conv, _) = _grade(lambda: Grader(Panel([_client(srv, "j", cache)], ["j"], spec)),
                                                      (q, "Chlorophyll."), (q, "Chlorophyll.", 0),
                                                      (q, "Chlorophyll.", 0, turns))
        assert len(srv.requests) == 2  # grade's default first repeat is 0: the second grading is the cached first
        assert "TURN user: why green?" in srv.requests[1]["messages"][-1]["content"]  # the transcript passed on
    assert checks == {} and res.verdicts == [Verdict(1, "j on It names light as the energy source", False),
                                             Verdict(2, "j on It is accurate", True)]
    assert (res.cache_hits, again.cache_hits, conv.cache_hits) == (0, 1, 0) and again.verdicts == res.verdicts


def test_a_failed_judge_leaves_no_verdicts_and_the_checks_are_still_reported(fake_key: str, tmp_path: Path) -> None:
    spec, qs = _questions(tmp_path)
    with _judges(lambda m, t: None) as srv:
        [(res, checks)] = _grade(lambda: Grader(Panel([_client(srv, "j")], ["j"], spec)),
                                 (qs["leaves"], "Chlorophyll absorbs light. TOKEN-7731"))
    assert res.verdicts is None and res.error and "this judge refuses" in res.error
    assert {i: c.hit for i, c in checks.items()} == {2: True, 4: True, 5: True}  # never merged into a score


def test_judge_passes_first_repeat_and_transcript_and_returns_the_verdicts(fake_key: str, tmp_path: Path) -> None:
    spec, qs = _questions(tmp_path)
    q = qs["leaves"]
    turns = [{"role": "user", "content": "why green?"}, {"role": "assistant", "content": "Chlorophyll."}]
    with _judges(lambda m, t: True) as srv:
        cache = ResultCache(tmp_path / "cache")

        async def go() -> list[Any]:
            grader = Grader(Panel([_client(srv, "j", cache)], ["j"], spec))
            try:
                return [await grader.judge(q, "Chlorophyll."), await grader.judge(q, "Chlorophyll.", 0),
                        await grader.judge(q, "Chlorophyll.", 1), await grader.judge(q, "Chlorophyll.", 1, turns)]
            finally:
                await grader.panel.clients[0].aclose()
        a, b, c, d = asyncio.run(go())
        assert len(srv.requests) == 3  # the default first repeat is 0: the second grading is the first's, cached
        assert "TURN" not in srv.requests[1]["messages"][-1]["content"]
        assert "TURN user: why green?\nTURN assistant: Chlorophyll." in srv.requests[2]["messages"][-1]["content"]
    assert (a.cache_hits, b.cache_hits, c.cache_hits, d.cache_hits) == (0, 1, 0, 0)
    assert [v.index for v in a.verdicts] == [1, 2, 3, 4, 5] and a.verdicts == b.verdicts
    assert a.verdicts[1] == Verdict(2, "check contains: found at 0", True)


# -- a jury with repeats: every vote mapped back ---------------------------------------------------------------

def test_a_jury_with_repeats_maps_every_vote_and_judge_back(fake_key: str, tmp_path: Path) -> None:
    spec, qs = _questions(tmp_path)
    q = qs["haiku"]
    # j1 meets only the haiku item, j2 only the leaves item: per item one judge for, one against (tie: not met)
    with _judges(lambda m, t: (t == "The reply is a haiku about autumn") == (m == "j1")) as srv:
        [(res, _)] = _grade(lambda: Grader(Panel([_client(srv, "j1"), _client(srv, "j2")], ["j1", "j2"], spec,
                                                 repeats=2, rule="majority", tie="met")), (q, REPLY))
        assert len(srv.requests) == 4
    assert isinstance(res, PanelResult) and res.error is None
    for name, (m1, m4) in {"j1": (True, False), "j2": (False, True)}.items():
        want = [Verdict(1, f"{name} on The reply is a haiku about autumn", m1),
                Verdict(4, f"{name} on It mentions falling leaves", m4)]
        assert res.votes[name] == [want, want] and res.judge_verdicts[name] == want
    assert [(v.index, v.hit) for v in res.verdicts] == [(1, True), (2, True), (3, True), (4, True), (5, True),
                                                        (6, True)]  # the tie rule "met" on both judged items


def test_a_jury_with_one_judge_failing_is_an_error_with_its_votes_kept(fake_key: str, tmp_path: Path) -> None:
    spec, qs = _questions(tmp_path)
    with _judges(lambda m, t: None if m == "j2" else True) as srv:
        [(res, checks)] = _grade(lambda: Grader(Panel([_client(srv, "j1"), _client(srv, "j2")], ["j1", "j2"], spec)),
                                 (qs["haiku"], REPLY))
    assert isinstance(res, PanelResult) and res.verdicts is None and res.error.startswith("judge j2 repeat 1: ")
    assert res.votes["j2"] == [None] and res.judge_verdicts == {}
    assert [v.index for v in res.votes["j1"][0]] == [1, 4] and sorted(checks) == [2, 3, 5, 6]
