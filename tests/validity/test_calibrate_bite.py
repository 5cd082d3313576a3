"""validity/calibrate.py and validity/replyscore.py in-process (so the mutation tool sees them), on run directories
written by hand: which replies count as labelled (every judged criterion, a check keeping the engine's verdict),
the people's and the judge's values of each reply, the majority and mean of several raters, what is left out
and counted, and the refusals. The statistics themselves are stats/ppi.py's (tests/stats/test_ppi.py).

The spec is tests/data/checks_mini (met_over_positive, mean over questions): a reply with judged items 1 and 2
(1 point each) and a checked item 3 (1 point, met) scores (hit1 + hit2 + 1) / 3."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.errors import ConfigError, DataError
from rubric_engine.scoring.aggregate import overall, scored_question
from rubric_engine.scoring.question import Aggregation, score_question
from rubric_engine.datatypes import Criterion, Question
from rubric_engine.spec.load import load_spec
from rubric_engine.stats import ppi
from rubric_engine.validity.calibrate import calibrate_command, calibrate_run, render_markdown
from rubric_engine.validity.items import item_key, load_items, reply_hash
from rubric_engine.validity.labels import Label, LabelSet
from rubric_engine.validity.replyscore import contribution, overall_weights

from conftest import DATA

N = 14


def judge_hits(i: int) -> tuple[bool, bool]:
    return i % 2 == 0, i % 3 == 0


def _record(i: int, **kw: Any) -> dict[str, Any]:
    h1, h2 = judge_hits(i)
    return {"id": f"q{i:02d}", "response": f"reply {i}", "score": (h1 + h2 + 1) / 3,
            "criteria": [{"index": 1, "text": "one", "weight": 1, "hit": h1},
                         {"index": 2, "text": "two", "weight": 1, "hit": h2},
                         {"index": 3, "text": "short", "weight": 1, "hit": True, "check": {"type": "chars", "max": 99}}],
            **kw}


def _run(root: Path, records: list[dict[str, Any]], overall_value: float | None = None, exclude: bool = False) -> Path:
    spec = load_spec(DATA / "checks_mini")
    d = root / "run"
    d.mkdir(parents=True)
    scores = [r["score"] for r in records if r["id"] <= f"q{N:02d}"]  # the replies scored whole
    resolved = spec.resolved()
    if exclude:
        resolved["aggregation"]["no_positive_points"] = "exclude"
    (d / "spec.resolved.json").write_text(json.dumps(resolved), encoding="utf-8")
    (d / "summary.json").write_text(json.dumps({"benchmark": spec.name, "candidate": {"name": "m"}, "judge": {"name": "j"},
                                                "overall": overall_value if overall_value is not None
                                                else 100 * sum(scores) / len(scores), "counts": {}}), encoding="utf-8")
    (d / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return d


def key(i: int, index: int) -> str:
    return item_key(f"q{i:02d}", index, reply_hash(f"reply {i}"))


def labels(rows: list[tuple[str, int, int, bool]]) -> LabelSet:
    return LabelSet(labels=[Label(rater=r, key=key(i, x), met=m, file="f", row=n)
                            for n, (r, i, x, m) in enumerate(rows, 2)])


def people(rater: str, replies: range, item1: bool = True) -> list[tuple[str, int, int, bool]]:
    """`rater` says item 1 is met (where the judge said so only on even replies) and agrees on item 2."""
    return [row for i in replies for row in ((rater, i, 1, item1), (rater, i, 2, judge_hits(i)[1]))]


def _negative(i: int) -> dict[str, Any]:
    """A reply with no positive points: no score under no_positive_points=exclude (as the run leaves it out)."""
    return {"id": f"q{i:02d}", "response": f"reply {i}", "criteria": [
        {"index": 1, "text": "bad", "weight": -1, "hit": False},
        {"index": 2, "text": "short", "weight": -1, "hit": False, "check": {"type": "chars", "max": 99}}]}


def _unknown_rule(i: int) -> dict[str, Any]:
    """A reply the spec cannot score at all: an item of a failure rule the spec does not declare."""
    rec = _record(i)
    rec["criteria"][1] = {"index": 2, "text": "two", "weight": None, "rule": "nope", "hit": False}
    return rec


def _null_verdict(i: int) -> dict[str, Any]:
    rec = _record(i)
    rec["criteria"][1]["hit"] = None
    return rec


@pytest.fixture
def data(tmp_path: Path):  # noqa: ANN201
    extra = [_record(N + 1, judge_error="bad verdict"), _record(N + 2, candidate_error="boom", response=None),
             _record(N + 3, judge_error="bad again"), _record(N + 4, candidate_error="boom", response=None),
             _record(N + 5, response="   "), _negative(N + 6), _negative(N + 7), _null_verdict(N + 8),
             _unknown_rule(N + 9), _unknown_rule(N + 10)]
    _run(tmp_path, [_record(i) for i in range(1, N + 1)] + extra, exclude=True)
    return load_items([tmp_path / "run"])


def _hand(labelled: range, unlabelled: range) -> dict[str, Any]:
    y = [(1 + judge_hits(i)[1] + 1) / 3 for i in labelled]
    yhat = [(sum(judge_hits(i)) + 1) / 3 for i in labelled]
    return ppi.ppi_estimate(y, yhat, [(sum(judge_hits(i)) + 1) / 3 for i in unlabelled])


def test_values_estimate_and_counts(data) -> None:  # noqa: ANN001
    extra = [("ann", N + 1, 1, True), ("ann", N + 1, 2, True), ("ann", N + 8, 1, True), ("ann", N + 8, 2, True)]
    partly = [("ann", 11, 1, True), ("ann", 12, 2, judge_hits(12)[1])]  # q12: item 2 only (item 1 is skipped first)
    res = calibrate_run(data, data.runs[0], labels(people("ann", range(1, 11)) + partly + extra))
    hand = _hand(range(1, 11), range(11, N + 1))
    sc = res["score"]
    assert sc["estimate"] == pytest.approx(100 * hand["estimate"]) and sc["lambda"] == pytest.approx(hand["lambda"])
    assert sc["interval"] == pytest.approx([100 * x for x in hand["interval"]])
    assert sc["se"] == pytest.approx(100 * hand["se"])
    assert sc["human_only"]["interval"] == pytest.approx([100 * x for x in hand["human_only"]["interval"]])
    assert sc["judge_only"] == pytest.approx(res["run_overall"])  # 14 scored replies; the others left out
    assert sc["judge_on_labelled"] == pytest.approx(100 * hand["judge_on_labelled"])
    assert sc["labels_to_halve"] == hand["labels_to_halve"]
    assert (sc["labelled"], sc["unlabelled"]) == (10, 4)
    assert res["values"][0] == {"id": "q01", "judge": pytest.approx(100 / 3), "human": pytest.approx(200 / 3)}
    assert res["values"][10] == {"id": "q11", "judge": pytest.approx(100 / 3), "human": None}  # item 1 only
    assert res["replies"] == {"scored": 14, "judge_failed": 3, "no_reply": 3, "partly_labelled": 2, "unscorable": 4}
    assert res["warnings"] == ["2 reply(ies) labelled on some criteria only are used as unlabelled",
                               "3 reply(ies) with a failed judge call are left out",
                               "3 question(s) without a reply (candidate error) are left out",
                               "4 reply(ies) the spec cannot score are left out"]
    assert set(res) == {"benchmark", "run", "candidate", "judge", "scale", "run_overall", "raters", "human_raters",
                        "sheets", "score", "by", "bias", "replies", "values", "warnings", "settings"}
    assert (res["benchmark"], res["run"], res["scale"], res["sheets"], res["by"]) == (
        "checks_mini", str(data.runs[0].dir), 100.0, [], "ability")
    assert res["settings"] == {"interval": "95%, normal approximation", "min_labelled": 10,
                               "estimator": "PPI++ (power-tuned lambda)"}
    # bias over the 21 labelled judged items (checks never count): judge 5 + 3 hits of 10 + 10 (+ q11's item 1: no)
    allg = res["bias"]["(all)"]
    assert (allg["n"], allg["questions"]) == (23, 13)  # q22's null verdict left out, q15's judge error too
    assert allg["judge_rate"] == pytest.approx(10 / 23) and allg["human_rate"] == pytest.approx(16 / 23)
    # no ability in this spec: validity/items.py files such an item under "rule:None", as agree shows it
    assert allg["label"] == "all labelled items" and list(res["bias"]) == ["(all)", "rule:None"]
    assert (res["raters"], res["human_raters"], res["candidate"], res["judge"]) == ("majority", ["ann"], "m", "j")
    assert res["settings"]["estimator"] == "PPI++ (power-tuned lambda)"
    h, g = sc["human_only"], res["bias"]["(all)"]
    halve = ("Even labelling every reply of this run but one would not halve the interval." if sc["labels_to_halve"]
             is None else f"About {sc['labels_to_halve']} labelled replies would halve the interval.")
    assert render_markdown(res) == "\n".join([
        "# Human-corrected score: m (judge j)", "",
        "checks_mini, 10 labelled and 4 unlabelled replies, raters: majority of ann.", "",
        "| score | estimate | 95% interval |", "|---|---|---|",
        f"| human-corrected (PPI++ (power-tuned lambda): {sc['lambda']:.2f}) | {sc['estimate']:.1f} | "
        f"[{sc['interval'][0]:.1f}, {sc['interval'][1]:.1f}] |",
        f"| human-only (10 labelled replies) | {h['estimate']:.1f} | [{h['interval'][0]:.1f}, {h['interval'][1]:.1f}] |",
        f"| judge-only | {sc['judge_only']:.1f} | |", "", halve, "",
        "## Judge vs people per ability (hit rates on labelled items)", "",
        "| group | items | judge | people | judge - people | 95% interval |", "|---|---|---|---|---|---|",
        f"| all labelled items | 23 | {g['judge_rate']:.2f} | {g['human_rate']:.2f} | {g['difference']:+.2f} | "
        f"[{g['interval'][0]:.2f}, {g['interval'][1]:.2f}] |",
        f"| rule:None | 23 | {g['judge_rate']:.2f} | {g['human_rate']:.2f} | {g['difference']:+.2f} | "
        f"[{g['interval'][0]:.2f}, {g['interval'][1]:.2f}] |", "", "Warnings:", "",
        *[f"- {w}" for w in res["warnings"]]]) + "\n"
    res["bias"]["(all)"]["interval"] = None
    res["score"]["labels_to_halve"] = 7
    md = render_markdown(res)
    assert "| all labelled items | 23 | " in md and f"{g['difference']:+.2f} | - |" in md
    assert "About 7 labelled replies would halve the interval." in md


def test_plain_ppi(data) -> None:  # noqa: ANN001
    res = calibrate_run(data, data.runs[0], labels(people("ann", range(1, 11))), power=False)
    y = [(2 + judge_hits(i)[1]) / 3 for i in range(1, 11)]
    yhat = [(sum(judge_hits(i)) + 1) / 3 for i in range(1, 11)]
    unl = [(sum(judge_hits(i)) + 1) / 3 for i in range(11, N + 1)]
    assert res["score"]["lambda"] == 1.0
    assert res["score"]["estimate"] == pytest.approx(100 * (sum(unl) / 4 + (sum(y) - sum(yhat)) / 10))


def test_majority_tie_and_mean(data) -> None:  # noqa: ANN001
    rows = people("ann", range(1, 12)) + people("bob", range(1, 12), item1=False)
    wide = people("ann", range(1, 14)) + people("bob", range(1, 14), item1=False)
    tie = calibrate_run(data, data.runs[0], labels(wide + people("cid", range(3, 14))))  # q01, q02: ann and bob alone
    assert tie["warnings"][0] == "2 item(s) with a tie between raters have no majority; their replies are not labelled"
    assert tie["values"][0]["human"] is None and tie["values"][1]["human"] is None and tie["score"]["labelled"] == 11
    rows3 = rows + people("cid", range(1, 12))
    maj = calibrate_run(data, data.runs[0], labels(rows3))  # 2 of 3 say item 1 is met
    assert [v["human"] for v in maj["values"][:11]] == pytest.approx([100 * (2 + judge_hits(i)[1]) / 3
                                                                     for i in range(1, 12)])
    mean = calibrate_run(data, data.runs[0], labels(rows3), raters="mean")
    assert [v["human"] for v in mean["values"][:11]] == pytest.approx([100 * (2 / 3 + judge_hits(i)[1] + 1) / 3
                                                                      for i in range(1, 12)])
    assert mean["raters"] == "mean" and mean["human_raters"] == ["ann", "bob", "cid"]
    assert "raters: mean of ann, bob, cid." in render_markdown(mean)
    # the bias compares each item with the share of raters saying met: item 1 2/3, item 2 the judge's (3 of 11 met)
    assert mean["bias"]["(all)"]["human_rate"] == pytest.approx((11 * 2 / 3 + 3) / 22)
    assert maj["bias"]["(all)"]["human_rate"] == pytest.approx((11 + 3) / 22)


def test_tie_everywhere_is_no_label(data) -> None:  # noqa: ANN001
    rows = people("ann", range(1, 12)) + people("bob", range(1, 12), item1=False)
    with pytest.raises(DataError, match="no reply of this run is labelled whole by the labels files"):
        calibrate_run(data, data.runs[0], labels(rows))


def test_refusals(data, tmp_path: Path) -> None:  # noqa: ANN001
    with pytest.raises(DataError, match=rf"^calibrate: {tmp_path / 'run'}: 9 labelled and 5 unlabelled replies; an interval needs at least 10 labelled "
                                        r"and 1 unlabelled; label more whole replies \(review export unit=reply n=30\)$"):
        calibrate_run(data, data.runs[0], labels(people("ann", range(1, 10))))
    with pytest.raises(DataError, match=r"14 labelled and 0 unlabelled"):
        calibrate_run(data, data.runs[0], labels(people("ann", range(1, N + 1))))
    with pytest.raises(DataError, match=r"no reply of this run is labelled whole by the labels files "
                                        r"\(1 partly labelled\).*unit=reply"):
        calibrate_run(data, data.runs[0], labels([("ann", 3, 1, True)]))
    with pytest.raises(DataError) as exc:  # labels on a reply with a failed judge only: nothing partly labelled
        calibrate_run(data, data.runs[0], labels([("ann", N + 1, 1, True), ("ann", N + 1, 2, True)]))
    assert str(exc.value) == (f"calibrate: {tmp_path / 'run'}: no reply of this run is labelled whole by the labels "
                              "files; export the review sheet from this run with unit=reply and label every criterion "
                              "of each reply, or leave this run out")
    f = tmp_path / "labels.jsonl"
    f.write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match="raters='median'; use raters=majority or raters=mean"):
        calibrate_command([tmp_path / "run"], [f], raters="median")
    with pytest.raises(ConfigError, match="by=colour: no item has this field; fields: ability, candidate, dimension, "):
        calibrate_command([tmp_path / "run"], [f], by="colour")
    with pytest.raises(ConfigError, match=r"no usable label in the labels files \(0 blank, 0 unsure\)"):
        calibrate_command([tmp_path / "run"], [f])
    assert not (tmp_path / "run" / "calibration.json").exists()


def test_command_writes_beside_the_summary(data, tmp_path: Path) -> None:  # noqa: ANN001
    f = tmp_path / "labels.jsonl"
    f.write_text("".join(json.dumps({"id": f"q{i:02d}", "criterion_index": x, "rater": r, "met": m}) + "\n"
                         for r, i, x, m in people("ann", range(1, 11))), encoding="utf-8")
    [res] = calibrate_command([tmp_path / "run"], [f])
    assert json.loads((tmp_path / "run" / "calibration.json").read_text(encoding="utf-8")) == json.loads(json.dumps(res))
    assert (res["raters"], res["by"], res["score"]["method"]) == ("majority", "ability", "PPI++ (power-tuned lambda)")
    [other] = calibrate_command([tmp_path / "run"], [f], raters="mean", by="weight_sign", power=False)
    assert (other["raters"], other["by"], other["score"]["method"]) == ("mean", "weight_sign", "PPI (lambda = 1)")
    assert list(other["bias"]) == ["(all)", "positive"]
    assert (tmp_path / "run" / "calibration.md").read_text(encoding="utf-8") == render_markdown(other)


def test_a_clipped_or_changed_overall_is_a_warning(tmp_path: Path) -> None:
    _run(tmp_path, [_record(i) for i in range(1, N + 1)], overall_value=12.0)
    d = load_items([tmp_path / "run"])
    res = calibrate_run(d, d.runs[0], labels(people("ann", range(1, 11))))
    assert res["warnings"][-1].startswith("the run's overall (12) differs from the mean judge score these replies give")


def _q(qid: str, abilities: list[str], hits: list[bool]) -> tuple[Question, Any]:
    crits = tuple(Criterion(index=i + 1, label=a, weight=1, text=a, ability=a) for i, a in enumerate(abilities))
    return Question(id=qid, dialogue=(), criteria=crits), score_question(crits, hits, "linear", {}, [], Aggregation())


def test_contributions_average_to_the_macro_overall() -> None:
    how = Aggregation()  # macro over groups
    qs = [_q("a", ["x", "y"], [True, False]), _q("b", ["x"], [True]), _q("c", ["y", "z"], [True, True]),
          _q("d", ["y"], [False])]
    weights = overall_weights([s for _, s in qs], how)
    assert weights == {"x": pytest.approx(4 / (3 * 2)), "y": pytest.approx(4 / (3 * 3)), "z": pytest.approx(4 / 3)}
    values = [contribution(s, weights) for _, s in qs]
    dims = {"d": ["x", "y", "z"]}
    assert sum(values) / 4 == pytest.approx(overall([scored_question(q, s) for q, s in qs], dims, how))
    flat = Aggregation(overall="mean_over_questions")
    assert overall_weights([s for _, s in qs], flat) is None
    assert [contribution(s, None) for _, s in qs] == [s.score for _, s in qs]


def _hb_record(i: int) -> dict[str, Any]:
    """heartbench_en: warmth (2 points, tags t1 and t2) met on even replies, curiosity (1 point) on the even
    questions only, met; the role-confusion rule item fired on q03 (the question zeroed)."""
    crits = [{"index": 1, "label": "温暖", "ability": "warmth", "weight": 2, "text": "warm", "hit": i % 2 == 0,
              "tags": ["!t1", "t2"]}]
    if i % 2 == 0:
        crits.append({"index": 2, "label": "好奇心", "ability": "curiosity", "weight": 1, "text": "curious", "hit": True})
    crits.append({"index": len(crits) + 1, "label": "其他", "rule": "role_confusion", "weight": None, "text": "role",
                  "hit": i == 3})
    return {"id": f"q{i:02d}", "response": f"reply {i}", "criteria": crits}


def test_macro_overall_abilities_rules_and_groups(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from conftest import REPO

    spec = load_spec(REPO / "benchmarks" / "heartbench_en").resolved()
    records = [_hb_record(i) for i in range(1, 13)]
    rules = [SimpleNamespace(id="role_confusion", effect="zero_question", fires_when="hit")]
    scored = []
    for r in records:  # the reference: the engine's own scoring and aggregation of the judge's verdicts
        crits = tuple(Criterion(index=c["index"], label=c["label"], weight=c["weight"], text=c["text"],
                                ability=c.get("ability"), rule=c.get("rule")) for c in r["criteria"])
        qs = score_question(crits, [c["hit"] for c in r["criteria"]], "log_normalised", {}, rules, Aggregation())
        scored.append(scored_question(Question(id=r["id"], dialogue=(), criteria=crits), qs))
    dims = {d["id"]: [a["id"] for a in d["abilities"]] for d in spec["taxonomy"]["dimensions"]}
    reference = 100 * overall(scored, dims, Aggregation())
    d = tmp_path / "run"
    d.mkdir()
    (d / "spec.resolved.json").write_text(json.dumps(spec), encoding="utf-8")
    (d / "summary.json").write_text(json.dumps({"benchmark": spec["name"], "candidate": {"name": "m"},
                                                "judge": {"name": "j"}, "overall": reference, "counts": {}}),
                                    encoding="utf-8")
    (d / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    data = load_items([d])
    rows = [("ann", i, c["index"], c.get("ability") == "warmth" or (bool(c["hit"]) and "rule" not in c))
            for i, r in zip(range(1, 11), records) for c in r["criteria"]]  # people: warmth met, no rule fired
    res = calibrate_run(data, data.runs[0], labels_for(rows, records))
    assert res["score"]["judge_only"] == pytest.approx(reference) and res["warnings"] == []
    assert [g for g in res["bias"]] == ["(all)", "curiosity", "rule:role_confusion", "warmth"]
    assert res["bias"]["warmth"]["label"] == "Warmth" and res["bias"]["curiosity"]["label"] == "Curiosity"
    assert (res["bias"]["warmth"]["judge_rate"], res["bias"]["warmth"]["human_rate"]) == (0.5, 1.0)
    assert res["bias"]["rule:role_confusion"]["judge_rate"] == pytest.approx(0.1)
    assert res["bias"]["rule:role_confusion"]["human_rate"] == 0.0
    # q03's rule fired for the judge (question zeroed), not for the people: its human value is above the judge's
    q03 = res["values"][2]
    assert q03["judge"] == 0.0 and q03["human"] > 0.0
    # q01 as people see it: warmth met (2 of 2 points, log-normalised 1), its weight in the macro mean over 2
    # abilities held by 12 and 6 replies: 12 / (2 x 12) = 0.5, so 50 on the 100 scale; the judge's 0
    assert (res["values"][0]["human"], res["values"][0]["judge"]) == (pytest.approx(50.0), 0.0)
    by_dim = calibrate_run(data, data.runs[0], labels_for(rows, records), by="dimension")
    assert {g: v["label"] for g, v in by_dim["bias"].items() if g != "(all)"} == {
        dim: data.taxonomy.label(dim) for dim in by_dim["bias"] if dim != "(all)"}
    assert by_dim["bias"]["personality"]["label"] == "Personality"
    by_tags = calibrate_run(data, data.runs[0], labels_for(rows, records), by="tags")
    assert list(by_tags["bias"]) == ["(all)", "!t1", "t2"] and by_tags["bias"]["!t1"]["n"] == 10
    assert by_tags["bias"]["!t1"]["label"] == "!t1"


def labels_for(rows: list[tuple[str, int, int, bool]], records: list[dict[str, Any]]) -> LabelSet:
    return LabelSet(labels=[Label(rater=r, key=item_key(f"q{i:02d}", x, reply_hash(f"reply {i}")), met=m, file="f", row=n)
                            for n, (r, i, x, m) in enumerate(rows, 2)])


def test_reply_scorer_reads_the_spec_with_its_defaults() -> None:
    from rubric_engine.scoring.question import DEFAULT_FIRES_WHEN
    from rubric_engine.validity.replyscore import ReplyScorer

    bare = ReplyScorer.from_spec({})
    assert (bare.formula, bare.params, bare.rules, bare.how, bare.scale) == ("log_normalised", {}, (), Aggregation(), 100.0)
    assert DEFAULT_FIRES_WHEN == "hit"
    full = ReplyScorer.from_spec({"scoring": {"formula": "linear", "params": {"k": 2}, "scale": 10},
                                  "failure_rules": [{"id": "a"}, {"id": "b", "effect": "zero_group", "fires_when": "miss"}],
                                  "aggregation": {"overall": "mean_over_questions", "question": "all_items",
                                                  "ignored": 1}})
    assert (full.formula, full.params, full.scale) == ("linear", {"k": 2}, 10.0)
    assert [(r.id, r.effect, r.fires_when) for r in full.rules] == [("a", "zero_question", "hit"), ("b", "zero_group", "miss")]
    assert full.how == Aggregation(overall="mean_over_questions", question="all_items")
    # the spec's params reach the formula (a plugin formula reads them)
    plugin = ReplyScorer(lambda raw, lo, hi, params: params["k"] / 4, {"k": 2}, (), Aggregation(question="all_items"), 100.0)  # type: ignore[arg-type]
    crit = [Criterion(index=1, label="", weight=1, text="t")]
    assert plugin.score(crit, [True]).score == 0.5
