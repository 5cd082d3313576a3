"""rubric_engine.scoring.aggregate: hand-computed cases, samples.jsonl parsing, and a property test on real data."""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest
from conftest import MISSING, heartbench_dir

from rubric_engine.dataset.load import Criterion
from rubric_engine.scoring.aggregate import ScoredQuestion, aggregate, overall, scored_from_samples
from rubric_engine.scoring.question import score_question



def sq(qid: str, abilities: dict[str, float], subset: str = "normal", scenario: str = "s1") -> ScoredQuestion:
    score = sum(abilities.values()) / len(abilities)
    return ScoredQuestion(qid, subset, scenario, abilities, score, False)


DIMS = {"x": ["A", "C"], "y": ["B"], "z": ["D"]}  # C and D never occur in the questions below


def test_macro_average_differs_from_question_mean():
    qs = [sq("q1", {"A": 1.0, "B": 0.0}), sq("q2", {"A": 0.0}, "hard"), sq("q3", {"A": 0.5}, scenario="")]
    r = aggregate(qs, DIMS, decay=("normal", "hard", "hard"))
    # A = (1 + 0 + 0.5) / 3 = 0.5 ; B = 0 / 1 = 0 ; C, D: no question -> None, left out
    assert r["abilities"] == {"A": 50.0, "B": 0.0, "C": None, "D": None}
    # overall = mean(A, B) = 0.25 -> 25, whereas the mean over questions = (0.5 + 0 + 0.5) / 3 = 33.3
    assert r["overall"] == 25.0
    assert r["overall"] != pytest.approx(100 * sum(q.score for q in qs) / len(qs))  # not the question mean (33.3)
    # x = mean(A) (C is None) = 50 ; y = B = 0 ; z has no ability with a question -> None
    assert r["dimensions"] == {"x": 50.0, "y": 0.0, "z": None}
    # normal = {q1, q3}: A = 0.75, B = 0 -> 37.5 ; hard = {q2}: A = 0 -> 0 ; base hard = 0 -> decay None
    assert r["subsets"] == {"normal": 37.5, "hard": 0.0, "decay_pct": None, "decay_base": "hard"}
    # scenario s1 = {q1, q2}: A = 0.5, B = 0 -> 25 ; empty label -> "(none)" = {q3}: A = 0.5 -> 50
    assert r["scenarios"] == {"s1": 25.0, "(none)": 50.0}
    assert overall(qs, DIMS) == 0.25


def test_decay_bases_and_paper_numbers():
    qs = [sq("n", {"A": 0.5994}), sq("h", {"A": 0.4349}, "hard")]
    # base hard: (59.94 - 43.49) / 43.49 * 100 = 37.82 % (the paper's "37.8%")
    r = aggregate(qs, DIMS, decay=("normal", "hard", "hard"))
    assert r["subsets"]["decay_pct"] == pytest.approx(37.8248, abs=1e-4)
    assert r["subsets"]["decay_base"] == "hard"
    # base normal: 16.45 / 59.94 * 100 = 27.44 %
    r = aggregate(qs, DIMS, decay=("normal", "hard", "normal"))
    assert r["subsets"]["decay_pct"] == pytest.approx(27.4441, abs=1e-4)
    # a missing subset -> None; no decay asked -> no decay keys
    assert aggregate(qs, DIMS, decay=("normal", "extreme", "extreme"))["subsets"]["decay_pct"] is None
    assert aggregate(qs, DIMS)["subsets"] == {"normal": pytest.approx(59.94), "hard": pytest.approx(43.49)}


def test_scale_empty_and_unknown_ability():
    assert aggregate([sq("q", {"A": 0.5})], DIMS, scale=1.0)["overall"] == 0.5
    r = aggregate([], DIMS)
    assert r["overall"] is None and r["subsets"] == {} and r["scenarios"] == {}
    with pytest.raises(ValueError, match="'E' that is not in the taxonomy"):
        aggregate([sq("q", {"E": 1.0})], DIMS)


def test_scored_from_samples_skips_errors():
    recs = [
        {"id": "q1", "subset": "hard", "scenario": "", "score": 0.5, "catastrophic": False,
         "abilities": {"A": {"raw": 1, "lo": 0, "hi": 2, "score": 0.5}}},
        {"id": "q2", "subset": "hard", "scenario": "s", "score": None, "judge_error": "wrong count",
         "abilities": {}, "catastrophic": False},
        {"id": "q3", "subset": "normal", "scenario": "s", "score": 0.0, "catastrophic": True,
         "abilities": {"A": {"raw": 2, "lo": 0, "hi": 2, "score": 0.0}, "B": {"raw": 0, "lo": -1, "hi": 0, "score": 0}}},
    ]
    got = scored_from_samples(recs)
    assert [q.id for q in got] == ["q1", "q3"]  # the error record is left for the caller to count
    assert got[0] == ScoredQuestion("q1", "hard", "", {"A": 0.5}, 0.5, False)
    assert got[1].abilities == {"A": 0.0, "B": 0.0} and got[1].catastrophic is True
    with pytest.raises(ValueError, match="missing key 'abilities'"):
        scored_from_samples([{"id": "x", "score": 1.0}])
    with pytest.raises(ValueError, match=r"abilities\.A\.score must be a number"):
        scored_from_samples([{"id": "x", "score": 1.0, "abilities": {"A": {"score": None}}}])


# --- property test: the engine against a direct re-implementation of eq. 1 on the real data ---------

OTHER = "其他"
TAXONOMY = {
    "personality": ["言语表达", "好奇心", "温暖", "第一人称使用", "自主性", "幽默", "自我认知"],
    "emotion": ["情绪应对", "情绪理解", "情绪感知", "情绪反应"],
    "social": ["主动性", "关系构建"],
    "motivation": ["动机"],
    "morality": ["道德"],
}


@dataclass(frozen=True)
class Rule:
    id: str
    effect: str
    fires_when: str


@lru_cache(maxsize=1)
def real_rows() -> list[dict]:
    found = heartbench_dir()
    if found is None:
        pytest.skip(MISSING)
    text = (found / "question_all.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def reference(rows: list[dict], hits: list[list[bool]], rule_fires_on_null: bool) -> dict:
    """Eq. 1 and the README's averaging, written independently of the engine (0-100)."""
    q_scores, per_ability = [], defaultdict(list)
    by_subset, by_scene = defaultdict(lambda: defaultdict(list)), defaultdict(lambda: defaultdict(list))
    for row, h in zip(rows, hits):
        items = defaultdict(list)
        failed = False
        for it, hit in zip(row["rubric"], h):
            if it["dimension"] == OTHER:
                w = it["score"]
                if hit and (rule_fires_on_null or (w is not None and w > 0)):
                    failed = True
            else:
                items[it["dimension"]].append((it["score"], hit))
        s = {}
        for d, pairs in items.items():
            raw = sum(w for w, hit in pairs if hit)
            mn = sum(w for w, _ in pairs if w < 0)
            mx = sum(w for w, _ in pairs if w > 0)
            s[d] = 0.0 if failed or mx - mn <= 0 else math.log(raw - mn + 1) / math.log(mx - mn + 1)
        q_scores.append(sum(s.values()) / len(s))
        for d, v in s.items():
            per_ability[d].append(v)
            by_subset[row["difficulty"]][d].append(v)
            by_scene[row["primary_scene"] or "(none)"][d].append(v)

    def macro(groups):
        return sum(sum(v) / len(v) for v in groups.values()) / len(groups) * 100

    abilities = {d: sum(v) / len(v) * 100 for d, v in per_ability.items()}
    subsets = {k: macro(g) for k, g in by_subset.items()}
    return {
        "questions": q_scores,
        "abilities": abilities,
        "overall": sum(abilities.values()) / len(abilities),
        "dimensions": {k: sum(abilities[a] for a in v) / len(v) for k, v in TAXONOMY.items()},
        "subsets": subsets,
        "decay": (subsets["normal"] - subsets["hard"]) / subsets["hard"] * 100,
        "scenarios": {k: macro(g) for k, g in by_scene.items()},
    }


def engine(rows: list[dict], hits: list[list[bool]], fires_when: str) -> tuple[list[float], dict]:
    rules = (Rule("role_confusion", "zero_question", fires_when),)
    scored = []
    for row, h in zip(rows, hits):
        criteria = [
            Criterion(index=i, label=it["dimension"], weight=it["score"], text=it["content"],
                      ability=None if it["dimension"] == OTHER else it["dimension"],
                      rule="role_confusion" if it["dimension"] == OTHER else None)
            for i, it in enumerate(row["rubric"], 1)
        ]
        q = score_question(criteria, h, "log_normalised", {}, rules)
        scored.append(ScoredQuestion(row["question_id"], row["difficulty"], row["primary_scene"],
                                     {a: s.score for a, s in q.abilities.items()}, q.score, q.catastrophic))
    return [q.score for q in scored], aggregate(scored, TAXONOMY, decay=("normal", "hard", "hard"))


@pytest.mark.parametrize("seed", range(50))
def test_engine_matches_reference_on_real_questions(seed: int):
    rows = real_rows()
    assert len(rows) == 296
    rng = random.Random(seed)
    p_item, p_rule = rng.random(), rng.choice([0.0, 0.05, 0.3])
    hits = [[rng.random() < (p_rule if it["dimension"] == OTHER else p_item) for it in row["rubric"]] for row in rows]
    fires_when = "hit" if seed % 2 == 0 else "hit_positive_weight"  # the paper / the official variant
    ref = reference(rows, hits, rule_fires_on_null=fires_when == "hit")
    q_scores, got = engine(rows, hits, fires_when)

    assert q_scores == pytest.approx(ref["questions"], abs=1e-9)
    assert got["overall"] == pytest.approx(ref["overall"], abs=1e-9)
    assert got["abilities"] == pytest.approx(ref["abilities"], abs=1e-9)
    assert got["dimensions"] == pytest.approx(ref["dimensions"], abs=1e-9)
    assert got["scenarios"] == pytest.approx(ref["scenarios"], abs=1e-9)
    assert {k: got["subsets"][k] for k in ("normal", "hard")} == pytest.approx(ref["subsets"], abs=1e-9)
    assert got["subsets"]["decay_pct"] == pytest.approx(ref["decay"], abs=1e-9)
    assert len(got["abilities"]) == 15 and len(got["scenarios"]) == 6  # 5 labels + "(none)"
