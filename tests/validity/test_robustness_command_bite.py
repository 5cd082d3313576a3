"""`rubric-engine robustness` on a finished run (validity/robustness.py), in-process so the mutation tool sees it.

The rules its docstring states: a seeded sample of the run's judged replies with two or more judged criteria is
re-judged with the criteria in another order (the verdicts mapped back to each criterion) or one criterion per
call; the judge is the run's, called through the one judge path (LiteLLM speaking HTTP to the fake server on
127.0.0.1); a failed re-judgment is counted, never compared; a dry run counts the calls and makes none; runs it
cannot re-judge faithfully are refused in one line. The fakes are asymmetric: a judge that answers on content
(order-blind) and one that always meets the criterion shown first (position-biased). The run directory is written
by hand from project-written rows (summary.json, the resolved spec, answers.jsonl, samples.jsonl).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from fakeserver import FakeServer, Reply
from rubric_engine.errors import ConfigError, DataError
from rubric_engine.models.entries import ModelSpec
from rubric_engine.spec.load import load_spec
from rubric_engine.stats.robustness import permutation
from rubric_engine.validity.robustness import cell, robustness_command, sample_targets, Target

from conftest import DATA
TEXTS = ("Names the feeling", "Asks a question", "Stays kind")  # the truth: only "Asks a question" is met


def _row(qid: str, n: int) -> dict[str, Any]:
    items = [{"label": "", "text": TEXTS[i], "points": 1} for i in range(n)]
    items.append({"label": "", "points": 1, "check": {"type": "chars", "max": 5000}})  # decided by the engine
    return {"id": qid, "prompt": f"Prompt {qid}", "rubric": items}


def _bench(tmp_path: Path) -> Any:
    root = tmp_path / "bench"
    shutil.copytree(DATA / "checks_mini", root)
    return load_spec(root)


def _run(tmp_path: Path, sizes: dict[str, int], extra: list[dict[str, Any]] = (), summary: dict[str, Any] | None = None,
         spec: Any = None) -> tuple[Path, Any]:
    """A complete run: each question with `sizes[qid]` judged criteria, verdicts as the truth says."""
    spec = spec or _bench(tmp_path)
    d = tmp_path / "run"
    d.mkdir()
    rows = [_row(q, n) for q, n in sizes.items()]
    (d / "answers.jsonl").write_text("".join(json.dumps({**r, "response": f"reply {r['id']}"}) + "\n" for r in rows),
                                     encoding="utf-8")
    recs = [{"id": q, "response": f"reply {q}", "score": 0.5,
             "criteria": [*({"index": i + 1, "hit": TEXTS[i] == TEXTS[1]} for i in range(n)),
                          {"index": n + 1, "hit": True, "check": {"type": "chars"}}]} for q, n in sizes.items()]
    (d / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*recs, *extra]), encoding="utf-8")
    (d / "spec.resolved.json").write_text(json.dumps(spec.resolved()), encoding="utf-8")
    (d / "summary.json").write_text(json.dumps({"benchmark": spec.name, "candidate": {"name": "cand"},
                                                "judge": {"name": "judge"}, "overall": 50.0, "counts": {},
                                                **(summary or {})}), encoding="utf-8")
    return d, spec


_ITEM = re.compile(r"^(\d+)\. \(\d+ points\) (.+)$", re.M)


def _judge_server(meets: Callable[[int, str, str], bool | None]) -> FakeServer:
    """A judge reading the numbered criteria from its prompt; meets(shown id, text, prompt) -> met (None: no answer)."""
    def handler(body: dict[str, Any]) -> Reply:
        text = body["messages"][-1]["content"]
        items = _ITEM.findall(text)
        verdicts = [meets(int(i), t.strip(), text) for i, t in items]
        if any(v is None for v in verdicts):
            return Reply(text="not a verdict")
        return Reply(text=json.dumps({"criteria": [{"id": int(i), "reasoning": "r", "met": v}
                                                   for (i, _), v in zip(items, verdicts)]}), usage=(10, 5))
    return FakeServer(handler)


def _judge(srv: FakeServer) -> ModelSpec:
    return ModelSpec.from_config({"name": "judge", "model": "openai/judge", "api_base": srv.url,
                                  "api_key_env": "FAKE_KEY"}, role="judge")


def _command(d: Path, spec: Any, check: str, judge: ModelSpec, n_boot: int | None = 50, **kw: Any) -> dict[str, Any]:
    def spec_of(run_dir: Path, summary: dict[str, Any]) -> Any:  # the run as collect_runs read it
        assert run_dir == d and summary["candidate"] == {"name": "cand"}
        return spec
    boot = {} if n_boot is None else {"n_boot": n_boot}
    return robustness_command(d, check, judge, spec_of, limits={"max_retries": 0}, **boot, **kw)


def test_an_order_blind_judge_changes_no_verdict_and_each_maps_back(fake_key: str, tmp_path: Path) -> None:
    d, spec = _run(tmp_path, {"q1": 3, "q2": 3, "q3": 2, "q4": 1})
    with _judge_server(lambda i, t, p: t == TEXTS[1]) as srv:
        rep = _command(d, spec, "order", _judge(srv), seed=3)
        assert len(srv.requests) == 3  # q4 has one judged criterion: no order to change
    assert rep["replies"] == 3 and rep["calls"] == 3 and rep["cache_hits"] == 0 and rep["errors"] == []
    assert rep["replies_not_judged_in_run"] == 0 and rep["judge"] == "judge" and rep["seed"] == 3 and rep["n"] == 50
    assert rep["schema_version"] == 1 and rep["run"] == str(d) and rep["check"] == "order"
    # each verdict mapped back to its criterion: new equals the truth of the criterion, whatever its position
    assert sorted((v["id"], v["index"], v["new"]) for v in rep["verdicts"]) == [
        ("q1", 1, False), ("q1", 2, True), ("q1", 3, False), ("q2", 1, False), ("q2", 2, True), ("q2", 3, False),
        ("q3", 1, False), ("q3", 2, True)]
    assert all(v["original"] == v["new"] for v in rep["verdicts"])
    # position k + 1 shows criterion perm[k]: the seeded permutation of each question
    for q, n in (("q1", 3), ("q2", 3), ("q3", 2)):
        perm = permutation(n, 3, q)
        assert sorted((v["position"], v["index"]) for v in rep["verdicts"] if v["id"] == q) == [
            (k, p) for k, p in enumerate(perm, 1)]
    assert rep["comparison"]["n"] == 8 and rep["comparison"]["flip_rate"] == 0.0
    assert rep["paragraph"].startswith("Re-judged with the criteria in another order, the judge changed 0.0% of 8 verdicts")
    assert json.loads((d / "robustness" / "order.json").read_text())["verdicts"] == rep["verdicts"]
    md = (d / "robustness" / "order.md").read_text()
    assert md.startswith("# Robustness: order\n") and "Replies re-judged: 3 (seed 3); calls: 3 (0 from the cache); " \
        "failed re-judgments: 0." in md and "## Hit rate by shown position" in md
    assert rep["out"] == str(d / "robustness")


def test_a_position_biased_judge_flips_what_it_sees_first(fake_key: str, tmp_path: Path) -> None:
    d, spec = _run(tmp_path, {"q1": 3, "q2": 3})
    out = tmp_path / "elsewhere"
    with _judge_server(lambda i, t, p: i == 1) as srv:
        rep = _command(d, spec, "order", _judge(srv), seed=0, out=out)
    assert all(v["new"] == (v["position"] == 1) for v in rep["verdicts"])
    first = [p for p in rep["positions"] if p["position"] == "1"][0]
    last = [p for p in rep["positions"] if p["position"] == "last"][0]
    assert first["hit_rate"] == 1.0 and first["n"] == 2 and last["hit_rate"] == 0.0 and last["n"] == 2
    # flips by hand: per question the run met criterion 2 only; the judge meets the one shown first
    flips = sum(v["original"] != v["new"] for v in rep["verdicts"])
    assert rep["comparison"]["flip_rate"] == pytest.approx(flips / 6)
    assert (out / "order.json").is_file() and not (d / "robustness").exists()


def test_granularity_is_one_call_per_criterion_each_shown_alone(fake_key: str, tmp_path: Path) -> None:
    d, spec = _run(tmp_path, {"q1": 3, "q2": 2})
    with _judge_server(lambda i, t, p: i == 1) as srv:  # alone, every criterion is shown first
        rep = _command(d, spec, "granularity", _judge(srv))
        assert len(srv.requests) == 5 and all(len(_ITEM.findall(r["messages"][-1]["content"])) == 1
                                              for r in srv.requests)
    assert rep["calls"] == 5 and rep["positions"] == []
    assert sorted((v["id"], v["index"], v["new"], v["position"]) for v in rep["verdicts"]) == [
        ("q1", 1, True, 1), ("q1", 2, True, 1), ("q1", 3, True, 1), ("q2", 1, True, 1), ("q2", 2, True, 1)]
    # by hand: the run met criterion 2 only; now every one is met: q1 flips 1 and 3, q2 flips 1 -> 3 of 5
    assert rep["paragraph"].startswith("Re-judged one criterion per call, the judge changed 60.0% of 5 verdicts")


def test_a_failed_re_judgment_is_counted_never_compared(fake_key: str, tmp_path: Path) -> None:
    d, spec = _run(tmp_path, {"q1": 2, "q2": 2})
    with _judge_server(lambda i, t, p: None if "reply q1" in p else t == TEXTS[1]) as srv:
        rep = _command(d, spec, "order", _judge(srv))
    # the first reply fails, the second is still compared
    assert [e["id"] for e in rep["errors"]] == ["q1"] and {v["id"] for v in rep["verdicts"]} == {"q2"}
    assert set(rep["errors"][0]) == {"id", "error"} and rep["errors"][0]["error"] not in ("", "None")
    assert rep["comparison"]["n"] == 2
    assert "failed re-judgments: 1." in (d / "robustness" / "order.md").read_text()


def test_a_dry_run_counts_the_calls_and_makes_none(fake_key: str, tmp_path: Path) -> None:
    extra = [{"id": "q9", "candidate_error": "x", "criteria": []}, {"id": "q8", "response": "r", "judge_error": "y",
                                                                    "criteria": [{"index": 1, "hit": None}]}]
    d, spec = _run(tmp_path, {"q1": 3, "q2": 2, "q3": 1}, extra=extra)
    with _judge_server(lambda i, t, p: True) as srv:
        assert _command(d, spec, "order", _judge(srv), dry_run=True) == {"check": "order", "replies": 2, "calls": 2,
                                                                         "cached": 0}
        assert _command(d, spec, "granularity", _judge(srv), dry_run=True) == {
            "check": "granularity", "replies": 2, "calls": 5, "cached": 0}
        assert _command(d, spec, "order", _judge(srv), dry_run=True, n=1)["replies"] == 1
        assert srv.requests == []


def test_sample_targets_is_seeded_in_run_order_and_skips_single_criteria(tmp_path: Path) -> None:
    spec = _bench(tmp_path)
    from rubric_engine.dataset.load import parse_rows

    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(_row(f"q{i}", 1 + i % 3)) + "\n" for i in range(9)), encoding="utf-8")
    qs = list(parse_rows(spec, path))
    targets = [Target(q.id, q, "r", (True,) * (1 + i % 3)) for i, q in enumerate(qs)]
    got = sample_targets(targets, 3, seed=5)
    able = [t for t in targets if len(t.original) > 1]
    assert len(got) == 3 and all(len(t.original) > 1 for t in got)
    assert [t.qid for t in got] == [t.qid for t in able if t in got]  # the run's order
    assert got == sample_targets(targets, 3, seed=5) and sample_targets(targets, 99, 0) == able


def test_what_the_command_refuses(fake_key: str, tmp_path: Path) -> None:
    d, spec = _run(tmp_path, {"q1": 2})
    judge = ModelSpec.from_config({"name": "judge", "model": "openai/judge", "api_base": "http://127.0.0.1:9",
                                   "api_key_env": "FAKE_KEY"}, role="judge")
    with pytest.raises(ConfigError) as e:
        _command(d, spec, "wording", judge)
    assert str(e.value) == "robustness: check='wording' is not a check; use check=order, granularity or paraphrase"
    spec.judge.verdict.granularity = "per_criterion"
    for check in ("order", "granularity"):
        with pytest.raises(ConfigError) as e:
            _command(d, spec, check, judge, dry_run=True)
        assert str(e.value) == (f"robustness: {d}: the run judged one criterion per call, so check={check} has nothing "
                                "to change (order and granularity need a run that judged all criteria at once)")
    spec.judge.verdict.granularity = "all_criteria"
    spec.conversation.mode = "scripted"
    with pytest.raises(ConfigError) as e:
        _command(d, spec, "order", judge, dry_run=True)
    assert str(e.value) == f"robustness: {d}: cannot re-judge this run: it judged conversations (not supported yet)"
    spec.conversation.mode = "single"
    spec.judge = None
    with pytest.raises(ConfigError) as e:
        _command(d, spec, "order", judge, dry_run=True)
    assert str(e.value) == (f"robustness: {d}: cannot re-judge this run: its judge gives no per-criterion verdicts "
                            "(no judge, or a score / pairwise judge)")


def test_a_sampled_run_and_a_references_file_are_refused(fake_key: str, tmp_path: Path) -> None:
    from rubric_engine.spec.schema import References

    judge = ModelSpec.from_config({"name": "judge", "model": "openai/judge", "api_base": "http://127.0.0.1:9",
                                   "api_key_env": "FAKE_KEY"}, role="judge")
    d, spec = _run(tmp_path / "a", {"q1": 2}, summary={"interval": {"nested": True}})
    with pytest.raises(ConfigError) as e:
        _command(d, spec, "order", judge, dry_run=True)
    assert str(e.value) == (f"robustness: {d}: cannot re-judge this run: it sampled several replies per question "
                            "(candidate.samples; not supported yet)")
    d, spec = _run(tmp_path / "b", {"q1": 2})
    spec.data.references = References(path="refs.jsonl")
    with pytest.raises(ConfigError) as e:
        _command(d, spec, "order", judge, dry_run=True)
    assert str(e.value) == (f"robustness: {d}: cannot re-judge this run: its spec adds references from a second file "
                            "(not supported yet)")


def test_a_run_without_a_usable_reply_or_whose_verdicts_do_not_match(fake_key: str, tmp_path: Path) -> None:
    judge = ModelSpec.from_config({"name": "judge", "model": "openai/judge", "api_base": "http://127.0.0.1:9",
                                   "api_key_env": "FAKE_KEY"}, role="judge")
    d, spec = _run(tmp_path / "a", {"q1": 1})
    with pytest.raises(ConfigError) as e:
        _command(d, spec, "order", judge, dry_run=True)
    assert str(e.value) == f"robustness: {d}: no judged reply with two or more judged criteria to re-judge"
    d, spec = _run(tmp_path / "b", {"q1": 2}, extra=[{"id": "q1x", "response": "r", "criteria": [{"index": 1, "hit": True}]}])
    with pytest.raises(DataError) as e:
        _command(d, spec, "order", judge, dry_run=True)
    assert str(e.value) == (f"{d / 'samples.jsonl'}: question 'q1x': its verdicts do not match the run's answers file; "
                            "re-run or re-score this run directory")
    d, spec = _run(tmp_path / "c", {"q1": 2})
    (d / "answers.jsonl").unlink()
    with pytest.raises(ConfigError) as e:
        _command(d, spec, "order", judge, dry_run=True)
    assert str(e.value) == (f"robustness: {d / 'answers.jsonl'} is missing; robustness needs a complete run directory "
                            "(its answers and verdicts)")


def test_a_table_cell_is_one_line_and_never_table_syntax() -> None:
    assert cell("a |b\n\n c\t") == "a \\|b c" and cell(3) == "3"


# -- check=paraphrase: every judged criterion reworded by a declared model, then the reply judged again ----------

_CRIT = re.compile(r"<criterion-\w+>\n(.*)\n</criterion-\w+>", re.S)


def _server(judge: Callable[[int, str, str], bool | None], reword: Callable[[str], str]) -> FakeServer:
    """One server: model `para` rewords the criterion between its tags, model `judge` judges as _judge_server."""
    judging = _judge_server(judge).handler  # type: ignore[attr-defined]

    def handler(body: dict[str, Any]) -> Reply:
        if body["model"] == "para":
            asked = next(m["content"] for m in body["messages"] if _CRIT.search(m["content"]))  # re-asks follow it
            return Reply(text=reword(_CRIT.search(asked).group(1)), usage=(5, 5))  # type: ignore[union-attr]
        return judging(body)
    return FakeServer(handler)


def _para(srv: FakeServer) -> ModelSpec:
    return ModelSpec.from_config({"name": "para", "model": "openai/para", "api_base": srv.url,
                                  "api_key_env": "FAKE_KEY"}, role="judge")


def test_paraphrase_counts_the_flips_of_each_reworded_criterion(fake_key: str, tmp_path: Path) -> None:
    d, spec = _run(tmp_path, {"q1": 3, "q2": 2})
    # the judge, asymmetric: the reworded first criterion reads as met, the others as the truth says
    with _server(lambda i, t, p: t in ("Reworded: Names the feeling", f"Reworded: {TEXTS[1]}"),
                 lambda text: f"Reworded: {text}") as srv:
        rep = _command(d, spec, "paraphrase", _judge(srv), paraphraser=_para(srv))
    assert rep["paraphraser"] == "para" and rep["calls"] == 3 + 2 and rep["errors"] == []
    by = {p["text"]: p for p in rep["paraphrases"]}
    assert by == {
        "Names the feeling": {"text": "Names the feeling", "paraphrase": "Reworded: Names the feeling", "error": None,
                              "judged": 2, "flips": 2},
        TEXTS[1]: {"text": TEXTS[1], "paraphrase": f"Reworded: {TEXTS[1]}", "error": None, "judged": 2, "flips": 0},
        "Stays kind": {"text": "Stays kind", "paraphrase": "Reworded: Stays kind", "error": None, "judged": 1,
                       "flips": 0}}
    assert rep["paragraph"].startswith("Re-judged with every criterion reworded, the judge changed 40.0% of 5 verdicts")
    md = (d / "robustness" / "paraphrase.md").read_text()
    assert "| criterion | paraphrase | flips |" in md and "| Names the feeling | Reworded: Names the feeling | 2 of 2 |" in md
    assert "| Stays kind |" not in md  # no flip: not listed


def test_a_criterion_that_cannot_be_reworded_leaves_its_replies_uncompared(fake_key: str, tmp_path: Path) -> None:
    d, spec = _run(tmp_path, {"q1": 3, "q2": 2})
    with _server(lambda i, t, p: t == f"Reworded: {TEXTS[1]}",
                 lambda text: text if text == "Stays kind" else f"Reworded: {text}") as srv:
        rep = _command(d, spec, "paraphrase", _judge(srv), paraphraser=_para(srv))
    assert [e["id"] for e in rep["errors"]] == ["q1"]
    assert rep["errors"][0]["error"].startswith("a criterion could not be reworded: ")
    assert "repeats the criterion word for word" in rep["errors"][0]["error"]
    assert {v["id"] for v in rep["verdicts"]} == {"q2"} and rep["comparison"]["flip_rate"] == 0.0
    md = (d / "robustness" / "paraphrase.md").read_text()
    assert "1 criteria could not be reworded (their replies were not compared); see paraphrase.json." in md
    kind = [p for p in rep["paraphrases"] if p["text"] == "Stays kind"]
    assert len(kind) == 1 and kind[0]["paraphrase"] is None and (kind[0]["judged"], kind[0]["flips"]) == (0, 0)


def test_the_paraphraser_defaults_to_the_judge_and_a_dry_run_counts_it(fake_key: str, tmp_path: Path) -> None:
    d, spec = _run(tmp_path, {"q1": 3, "q2": 2})
    with _judge_server(lambda i, t, p: True) as srv:
        assert _command(d, spec, "paraphrase", _judge(srv), dry_run=True) == {
            "check": "paraphrase", "replies": 2, "calls": 3 + 2, "cached": 0}
        spec.judge.verdict.granularity = "per_criterion"  # one call per criterion: 3 + 2 judge calls
        assert _command(d, spec, "paraphrase", _judge(srv), dry_run=True)["calls"] == 3 + 5
        assert srv.requests == []


def test_a_second_run_pays_nothing_and_a_dry_run_counts_the_cache(fake_key: str, tmp_path: Path) -> None:
    from rubric_engine.models.cache import ResultCache

    d, spec = _run(tmp_path, {"q1": 3, "q2": 2})
    cache = ResultCache(tmp_path / "cache")
    with _server(lambda i, t, p: t.endswith(TEXTS[1]), lambda text: f"Reworded: {text}") as srv:
        judge, para = _judge(srv), _para(srv)
        assert _command(d, spec, "order", judge, cache=cache, dry_run=True)["cached"] == 0
        first = _command(d, spec, "order", judge, cache=cache)
        assert first["cache_hits"] == 0 and first["calls"] == 2
        assert _command(d, spec, "order", judge, cache=cache, dry_run=True) == {
            "check": "order", "replies": 2, "calls": 2, "cached": 2}
        again = _command(d, spec, "order", judge, cache=cache)
        assert again["cache_hits"] == 2 and again["verdicts"] == first["verdicts"]
        assert _command(d, spec, "paraphrase", judge, cache=cache, dry_run=True, paraphraser=para)["cached"] == 0
        made = len(srv.requests)
        _command(d, spec, "paraphrase", judge, cache=cache, paraphraser=para)
        assert len(srv.requests) == made + 5
        assert _command(d, spec, "paraphrase", judge, cache=cache, dry_run=True, paraphraser=para) == {
            "check": "paraphrase", "replies": 2, "calls": 5, "cached": 5}
        para_again = _command(d, spec, "paraphrase", judge, cache=cache, paraphraser=para)
        assert para_again["cache_hits"] == 5 and len(srv.requests) == made + 5


# -- what the report says, from hand-built comparisons --------------------------------------------------------

def _cmp(**kw: Any) -> dict[str, Any]:
    return {"n": 8, "flip_rate": 0.25, "cohen_kappa": None, "agreement": 0.75, "agreement_ci": None,
            "flip_rate_ci": None, "kappa_ci": None, "notes": [], **kw}


def test_the_paragraph_names_the_check_the_flips_the_kappa_and_a_position_bias() -> None:
    from rubric_engine.validity.robustness import _paragraph

    assert _paragraph("order", _cmp(n=0), []) == "No criterion was re-judged: nothing to compare."
    assert _paragraph("granularity", _cmp(), []) == ("Re-judged one criterion per call, the judge changed 25.0% of 8 "
                                                     "verdicts (kappa with the run's verdicts undefined).")
    base = "Re-judged with the criteria in another order, the judge changed 25.0% of 8 verdicts (kappa with the run's verdicts 0.47)."
    first = {"position": "1", "hit_rate": 0.8, "ci": [0.6, 0.9]}
    last = {"position": "last", "hit_rate": 0.2, "ci": [0.1, 0.4]}
    apart = " Criteria shown first were met 80.0% of the time, criteria shown last 20.0%: "
    assert _paragraph("order", _cmp(cohen_kappa=0.4712), [first, {"position": "2", "hit_rate": 0.5, "ci": [0, 1]}, last]) == (
        base + apart + "the intervals do not overlap, the judge looks position-biased.")
    # last above first is apart too; touching intervals overlap; a missing interval says nothing
    assert _paragraph("order", _cmp(cohen_kappa=0.4712), [{**first, "ci": [0.1, 0.4]}, {**last, "ci": [0.6, 0.9]}]
                      ).endswith("the judge looks position-biased.")
    assert _paragraph("order", _cmp(cohen_kappa=0.4712), [{**first, "ci": [0.4, 0.9]}, {**last, "ci": [0.1, 0.4]}]
                      ) == base + apart + "the intervals overlap."
    assert _paragraph("order", _cmp(cohen_kappa=0.4712), [{**first, "ci": [0.1, 0.4]}, {**last, "ci": [0.4, 0.9]}]
                      ) == base + apart + "the intervals overlap."
    assert _paragraph("order", _cmp(cohen_kappa=0.4712), [{**first, "ci": None}, last]) == base
    assert _paragraph("order", _cmp(cohen_kappa=0.4712), [first]) == base
    assert _paragraph("paraphrase", _cmp(), []).startswith("Re-judged with every criterion reworded, ")


def test_the_markdown_report_word_for_word() -> None:
    from rubric_engine.validity.robustness import _markdown

    report = {"check": "order", "paragraph": "P.", "replies": 4, "seed": 7, "calls": 5, "cache_hits": 2,
              "errors": [{"id": "x", "error": "e"}],
              "comparison": _cmp(agreement_ci=[0.5, 0.875], flip_rate_ci=[0.125, 0.5], cohen_kappa=0.4712,
                                 kappa_ci=[0.1, 0.9], notes=["a note"]),
              "positions": [{"position": "1", "n": 4, "hit_rate": 0.75, "ci": [0.3, 0.95], "original_hit_rate": 0.5},
                            {"position": "last", "n": 4, "hit_rate": None, "ci": None, "original_hit_rate": None}],
              "paraphrases": [{"text": "A | b", "paraphrase": "A\nb", "error": None, "judged": 4, "flips": 1},
                              {"text": "C", "paraphrase": "c", "error": None, "judged": 2, "flips": 1},
                              {"text": "D", "paraphrase": "d", "error": None, "judged": 3, "flips": 0},
                              {"text": "E", "paraphrase": None, "error": "no", "judged": 0, "flips": 0}]}
    assert _markdown(report) == "\n".join([
        "# Robustness: order", "", "P.", "",
        "Replies re-judged: 4 (seed 7); calls: 5 (2 from the cache); failed re-judgments: 1.", "",
        "| | value | 95% interval |", "|---|---:|---|",
        "| agreement with the run's verdicts | 75.0% | [50.0, 87.5] |",
        "| flip rate | 25.0% | [12.5, 50.0] |",
        "| Cohen's kappa | 0.471 | [0.100, 0.900] |",
        "", "## Hit rate by shown position", "",
        "| position | items | hit rate | 95% interval (Wilson) | same items in the run |", "|---|---:|---:|---|---:|",
        "| 1 | 4 | 75.0% | [30.0, 95.0] | 50.0% |",
        "| last | 4 | — | — | — |",
        "", "## Reworded criteria whose verdict changed", "", "| criterion | paraphrase | flips |", "|---|---|---:|",
        "| C | c | 1 of 2 |",  # the highest share of flips first
        "| A \\| b | A b | 1 of 4 |",
        "", "1 criteria could not be reworded (their replies were not compared); see paraphrase.json.",
        "", "- a note", ""])
    bare = {**report, "positions": [], "paraphrases": [], "errors": [],
            "comparison": _cmp(agreement=None, flip_rate=None)}
    text = _markdown(bare)
    assert "| agreement with the run's verdicts | — | — |" in text and "| flip rate | — | — |" in text
    assert "| Cohen's kappa | — | — |" in text and "##" not in text and "could not be reworded" not in text


def test_replies_the_run_did_not_judge_are_counted_and_the_answers_read_as_jsonl(fake_key: str, tmp_path: Path) -> None:
    d, spec = _run(tmp_path, {"q1": 2, "e1": 2, "e2": 2, "e3": 2, "e4": 2, "e5": 2})
    spec.data.format = "csv"  # the answers file is JSONL whatever the benchmark's own data is
    recs = [json.loads(x) for x in (d / "samples.jsonl").read_text().splitlines()]
    for rec in recs:  # one reason each, the rest of each record usable
        if rec["id"] == "e1":
            rec["judge_error"] = "unparsable"
        elif rec["id"] == "e2":
            rec["candidate_error"] = "timeout"
        elif rec["id"] == "e3":
            rec["response"] = None
        elif rec["id"] == "e4":
            rec["criteria"][0]["hit"] = None
        elif rec["id"] == "e5":
            rec["criteria"] = [c for c in rec["criteria"] if "check" in c]
    (d / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    with _judge_server(lambda i, t, p: t == TEXTS[1]) as srv:
        rep = _command(d, spec, "order", _judge(srv))
    assert rep["replies"] == 1 and rep["replies_not_judged_in_run"] == 5 and {v["id"] for v in rep["verdicts"]} == {"q1"}


def test_the_intervals_use_1000_resamples_and_the_run_s_seed_by_default(fake_key: str, tmp_path: Path) -> None:
    from rubric_engine.models.cache import ResultCache

    d, spec = _run(tmp_path, {f"q{i}": 3 for i in range(6)})
    cache = ResultCache(tmp_path / "cache")
    with _judge_server(lambda i, t, p: i == 1) as srv:  # position-biased: some flips, so intervals have width
        default = _command(d, spec, "order", _judge(srv), n_boot=None, cache=cache)["comparison"]
        assert default == _command(d, spec, "order", _judge(srv), n_boot=1000, cache=cache)["comparison"]


def test_the_limits_reach_both_clients_each_in_its_own_role(fake_key: str, tmp_path: Path) -> None:
    d, spec = _run(tmp_path, {"q1": 3, "q2": 2})

    def spec_of(run_dir: Path, summary: dict[str, Any]) -> Any:
        return spec
    with FakeServer(lambda body: Reply(status=500)) as srv:
        judge, para = _judge(srv), _para(srv)
        for check, role in (("order", "judge"), ("paraphrase", "paraphraser")):  # the paraphraser's client opens first
            with pytest.raises(ConfigError) as err:
                robustness_command(d, check, judge, spec_of, limits={"concurrency": 0}, paraphraser=para)
            assert str(err.value) == f"{role}: concurrency must be >= 1 or auto (got 0)"
        assert srv.requests == []
        rep = robustness_command(d, "order", judge, spec_of, limits={"max_retries": 0}, n_boot=20)
        assert len(srv.requests) == 2 and [e["id"] for e in rep["errors"]] == ["q1", "q2"]  # no retry: one call each
        rep = robustness_command(d, "paraphrase", judge, spec_of, limits={"max_retries": 0}, n_boot=20, paraphraser=para)
        assert len(srv.requests) == 2 + 3 and len(rep["errors"]) == 2  # three criteria, each asked once, none reworded


def test_granularity_maps_each_lone_criterion_back_to_its_own_verdict(fake_key: str, tmp_path: Path) -> None:
    d, spec = _run(tmp_path, {"q1": 3, "q2": 2})
    with _judge_server(lambda i, t, p: t == TEXTS[1]) as srv:  # order-blind: meets "Asks a question" only
        rep = _command(d, spec, "granularity", _judge(srv))
    assert sorted((v["id"], v["index"], v["original"], v["new"]) for v in rep["verdicts"]) == [
        ("q1", 1, False, False), ("q1", 2, True, True), ("q1", 3, False, False), ("q2", 1, False, False),
        ("q2", 2, True, True)]
    assert rep["comparison"]["flip_rate"] == 0.0


def _per_criterion(tmp_path: Path) -> Any:
    """checks_mini judged one criterion per call: its template shows `criterion`, its verdict is one object."""
    root = tmp_path / "bench"
    shutil.copytree(DATA / "checks_mini", root)
    text = (root / "benchmark.yaml").read_text(encoding="utf-8")
    (root / "benchmark.yaml").write_text(text.replace(
        "  template: judge.j2", "  template: judge.j2\n  verdict: {granularity: per_criterion, shape: object}"),
        encoding="utf-8")
    (root / "judge.j2").write_text("Grade this reply:\n{{ response }}\nCriterion:\n{{ criterion.index }}. "
                                   "({{ criterion.weight }} points) {{ criterion.text }}\n", encoding="utf-8")
    return load_spec(root)


def test_a_dry_run_of_a_per_criterion_run_counts_each_criterions_cached_call(fake_key: str, tmp_path: Path) -> None:
    from rubric_engine.models.cache import ResultCache

    spec = _per_criterion(tmp_path)
    d, _ = _run(tmp_path, {"q1": 3, "q2": 2}, spec=spec)
    cache = ResultCache(tmp_path / "cache")

    def handler(body: dict[str, Any]) -> Reply:
        if body["model"] == "para":
            asked = next(m["content"] for m in body["messages"] if _CRIT.search(m["content"]))
            return Reply(text="Reworded: " + _CRIT.search(asked).group(1))  # type: ignore[union-attr]
        (_, text), = _ITEM.findall(body["messages"][-1]["content"])
        return Reply(text=json.dumps({"reasoning": "r", "met": text.endswith(TEXTS[1])}))
    with FakeServer(handler) as srv:
        judge, para = _judge(srv), _para(srv)
        assert _command(d, spec, "paraphrase", judge, cache=cache, dry_run=True, paraphraser=para) == {
            "check": "paraphrase", "replies": 2, "calls": 3 + 5, "cached": 0}
        rep = _command(d, spec, "paraphrase", judge, cache=cache, paraphraser=para)
        assert rep["errors"] == [] and len(srv.requests) == 3 + 5 and rep["comparison"]["flip_rate"] == 0.0
        # every reworded criterion's own call is in the cache now: the dry run counts each of them
        assert _command(d, spec, "paraphrase", judge, cache=cache, dry_run=True, paraphraser=para) == {
            "check": "paraphrase", "replies": 2, "calls": 3 + 5, "cached": 3 + 5}
        assert len(srv.requests) == 3 + 5


def _rows(rep: dict[str, Any]) -> list[Any]:
    """The report's verdicts as the comparison reads them (every question here shows three criteria)."""
    from rubric_engine.stats.robustness import Rejudged

    return [Rejudged(qid=v["id"], index=v["index"], original=v["original"], new=v["new"], position=v["position"],
                     shown=3) for v in rep["verdicts"]]


def test_the_comparison_takes_the_resamples_and_seed_given_and_1000_and_0_by_default(fake_key: str,
                                                                                       tmp_path: Path) -> None:
    from rubric_engine.models.cache import ResultCache
    from rubric_engine.stats.robustness import compare_verdicts

    d, spec = _run(tmp_path, {f"q{i}": 3 for i in range(30)})
    cache = ResultCache(tmp_path / "cache")
    # flips depend on each question's seeded order: the intervals are fine-grained enough to tell settings apart
    with _judge_server(lambda i, t, p: i == 1 or (i == 3 and t == TEXTS[1])) as srv:
        default = _command(d, spec, "order", _judge(srv), n_boot=None, cache=cache)
        given = _command(d, spec, "order", _judge(srv), n_boot=50, seed=3, cache=cache)
    assert default["seed"] == 0 and default["replies"] == 30
    rows = _rows(default)
    assert default["comparison"] == compare_verdicts(rows, n_boot=1000, seed=0)
    assert default["comparison"] != compare_verdicts(rows, n_boot=1001, seed=0)
    rows = _rows(given)
    assert given["comparison"] == compare_verdicts(rows, n_boot=50, seed=3)
    assert given["comparison"] != compare_verdicts(rows, n_boot=1000, seed=3)
    assert given["comparison"] != compare_verdicts(rows, n_boot=50, seed=0)


def test_the_sample_follows_the_seed(fake_key: str, tmp_path: Path) -> None:
    import random

    from rubric_engine.models.cache import ResultCache

    d, spec = _run(tmp_path, {f"q{i}": 3 for i in range(8)})
    cache = ResultCache(tmp_path / "cache")
    with _judge_server(lambda i, t, p: True) as srv:
        for seed in range(4):  # one reply of eight, the one random.Random(seed) draws from the run's order
            rep = _command(d, spec, "order", _judge(srv), n=1, seed=seed, n_boot=20, cache=cache)
            assert {v["id"] for v in rep["verdicts"]} == {f"q{random.Random(seed).sample(range(8), 1)[0]}"}


def test_a_directory_of_several_runs_is_refused(fake_key: str, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    for name in ("a", "b"):  # two complete runs of one spec: a sweep's directory, not a run's
        (tmp_path / name).mkdir()
        d, spec = _run(tmp_path / name, {"q1": 3})
        d.rename(sweep / name)
    judge = ModelSpec.from_config({"name": "judge", "model": "openai/judge", "api_base": "http://127.0.0.1:9",
                                   "api_key_env": "FAKE_KEY"}, role="judge")
    with pytest.raises(ConfigError) as err:
        _command(sweep, spec, "order", judge)
    assert str(err.value) == f"robustness: {sweep} holds 2 runs; give one run directory (a sweep's job)"
