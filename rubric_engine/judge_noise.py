"""summary.json's `noise` (judge.repeats > 1) and `jury` (several judges) sections, from typed results.

Why apart from the runner: these are pure numbers over the votes a Panel kept (jury.py); the runner only
hands over (question, result) pairs. Definitions (docs/judge-noise.md):

- flip rate: share of (judge, question, criterion) units whose K repeat verdicts are not all equal, with a
  95% percentile bootstrap interval over questions (1000 resamples, seed 0). With an independent flip
  probability p per verdict its expectation is 1 - p^K - (1-p)^K.
- question score SD: for each question the sample SD (n-1) of its K repeat scores, averaged over questions.
- overall SD: the sample SD of the K overall scores, repeat r scored from every judge's r-th grading
  (combined across judges by the jury rule). Per ability likewise.
- jury: each judge's own scores (its repeats combined by majority) and Krippendorff's nominal alpha between
  the judges per ability (agreement.py).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .aggregate import ScoredQuestion, aggregate, scored_question
from .agreement import krippendorff_alpha, multi_rater_alpha
from .datatypes import Question
from .jury import PanelResult, combine
from .scoring import score_question
from .verdicts import Verdict

if TYPE_CHECKING:
    from .spec import BenchmarkSpec

__all__ = ["panel_sections", "flip_rate", "print_panel"]

OVERALL = "overall"


def _sd(values: Sequence[float]) -> float | None:
    return statistics.stdev(values) if len(values) >= 2 else None


def _scored(spec: "BenchmarkSpec", q: Question, verdicts: list[Verdict]) -> ScoredQuestion | None:
    qs = score_question(q.criteria, [v.hit for v in verdicts], spec.formula(), spec.scoring.params,
                        spec.failure_rules, spec.aggregation_rule())
    return scored_question(q, qs)


def _aggregate(spec: "BenchmarkSpec", scored: Sequence[ScoredQuestion]) -> dict[str, Any]:
    agg = aggregate(scored, spec.dimensions_map(), scale=spec.scoring.scale, how=spec.aggregation_rule())
    return {"overall": agg["overall"], "abilities": agg["abilities"]}


def flip_rate(units: Sequence[tuple[str, bool]], n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Share of flipped units [(question id, flipped)], with a bootstrap interval over questions."""
    if not units:
        return {"rate": None, "units": 0, "ci": None}
    by_q: dict[str, list[int]] = {}
    for qid, flipped in units:
        by_q.setdefault(qid, [0, 0])
        by_q[qid][0] += int(flipped)
        by_q[qid][1] += 1
    counts = list(by_q.values())
    rate = sum(c[0] for c in counts) / sum(c[1] for c in counts)
    rng = random.Random(seed)
    reps = []
    for _ in range(n_boot):
        draw = [counts[rng.randrange(len(counts))] for _ in counts]
        reps.append(sum(c[0] for c in draw) / sum(c[1] for c in draw))
    reps.sort()
    lo, hi = reps[int(0.025 * (n_boot - 1))], reps[int(0.975 * (n_boot - 1))]
    return {"rate": rate, "units": len(units), "ci": [lo, hi]}


def _noise(spec: "BenchmarkSpec", done: Sequence[tuple[Question, PanelResult]], repeats: int, rule: str,
           tie: str) -> dict[str, Any]:
    units: dict[str, list[tuple[str, bool]]] = {OVERALL: []}
    per_repeat: list[list[ScoredQuestion]] = [[] for _ in range(repeats)]
    q_sd: dict[str, list[float]] = {OVERALL: []}
    for q, res in done:
        ability = {c.index: c.ability for c in q.criteria}
        for reps in res.votes.values():
            for pos, first in enumerate(reps[0] or []):
                flipped = len({(r or [])[pos].hit for r in reps}) > 1
                units[OVERALL].append((q.id, flipped))
                if ability.get(first.index):
                    units.setdefault(str(ability[first.index]), []).append((q.id, flipped))
        rep_scores = []
        for r in range(repeats):
            ballots = [reps[r] or [] for reps in res.votes.values()]
            verdicts = [Verdict(v.index, v.reasoning, combine([b[i].hit for b in ballots], rule, tie))
                        for i, v in enumerate(ballots[0])]
            sq = _scored(spec, q, verdicts)
            if sq is not None:
                per_repeat[r].append(sq)
                rep_scores.append(sq)
        if len(rep_scores) == repeats:
            q_sd[OVERALL].append(statistics.stdev([s.score for s in rep_scores]) * spec.scoring.scale)
            for a in rep_scores[0].abilities:
                if all(a in s.abilities for s in rep_scores):
                    q_sd.setdefault(a, []).append(statistics.stdev([s.abilities[a] for s in rep_scores])
                                                  * spec.scoring.scale)
    runs = [_aggregate(spec, scored) for scored in per_repeat]
    groups = list(dict.fromkeys([OVERALL, *units, *q_sd, *(runs[0]["abilities"] if runs else {})]))
    out: dict[str, Any] = {"repeats": repeats, "groups": {}}
    for g in groups:
        values = [r["overall"] if g == OVERALL else r["abilities"].get(g) for r in runs]
        known = [v for v in values if v is not None]
        sds = q_sd.get(g, [])
        out["groups"][g] = {"flip_rate": flip_rate(units.get(g, [])),
                            "question_score_sd": sum(sds) / len(sds) if sds else None,
                            "score_sd_across_repeats": _sd(known) if len(known) == len(values) else None,
                            "repeat_scores": values}
    return out


def _jury(spec: "BenchmarkSpec", done: Sequence[tuple[Question, PanelResult]], names: Sequence[str],
          rule: str, tie: str) -> dict[str, Any]:
    judges: dict[str, Any] = {}
    for name in names:
        scored = [s for q, res in done if (s := _scored(spec, q, res.judge_verdicts[name])) is not None]
        judges[name] = _aggregate(spec, scored)
    cols: dict[str, list[tuple[str, list[float]]]] = {OVERALL: []}
    for q, res in done:
        ability = {c.index: c.ability for c in q.criteria}
        for pos, v in enumerate(res.judge_verdicts[names[0]]):
            col = [float(res.judge_verdicts[n][pos].hit) for n in names]
            cols[OVERALL].append((q.id, col))
            if ability.get(v.index):
                cols.setdefault(str(ability[v.index]), []).append((q.id, col))
    alpha: dict[str, Any] = {}
    for g, items in cols.items():
        matrix = np.array([c for _, c in items], dtype=float).T if items else np.zeros((len(names), 0))
        if g == OVERALL:
            alpha[g] = multi_rater_alpha(matrix, [qid for qid, _ in items], n_boot=200) if items else None
        else:
            alpha[g] = {"krippendorff_alpha": krippendorff_alpha(matrix), "units": len(items)}
    return {"rule": rule, "tie": tie, "judges": judges, "alpha": alpha}


def panel_sections(spec: "BenchmarkSpec", results: Sequence[tuple[Question, Any]], names: Sequence[str],
                   repeats: int, rule: str, tie: str) -> dict[str, Any]:
    """The summary keys a repeated or jury run adds: `noise` (repeats > 1) and `jury` (2+ judges).
    Questions whose judging failed are left out (they are counted as judge errors elsewhere)."""
    done = [(q, r) for q, r in results if isinstance(r, PanelResult) and r.verdicts is not None]
    out: dict[str, Any] = {}
    if repeats > 1:
        out["noise"] = _noise(spec, done, repeats, rule, tie)
    if len(names) > 1:
        out["jury"] = _jury(spec, done, names, rule, tie)
    return out


def print_panel(summary: dict[str, Any], console: Any) -> None:
    """Console lines for the noise and jury sections (rich Console passed in; nothing imported here)."""
    noise, jury = summary.get("noise"), summary.get("jury")
    if noise:
        g = noise["groups"][OVERALL]
        fr, sd = g["flip_rate"], g["score_sd_across_repeats"]
        ci = f" (95% {fr['ci'][0]:.1%}-{fr['ci'][1]:.1%})" if fr.get("ci") else ""
        console.print(f"judge noise over {noise['repeats']} gradings: {fr['rate']:.1%} of verdicts flip{ci}; "
                      f"overall score SD across gradings {_num(sd)}, per-question score SD "
                      f"{_num(g['question_score_sd'])}", highlight=False, soft_wrap=True)
    if jury:
        alpha = (jury["alpha"].get(OVERALL) or {}).get("krippendorff_alpha")
        own = ", ".join(f"{name} {_num(j['overall'])}" for name, j in jury["judges"].items())
        console.print(f"jury ({jury['rule']}, ties {jury['tie'].replace('_', ' ')}): {_num(summary.get('overall'))}; "
                      f"each judge alone: {own}; Krippendorff alpha between judges {_num(alpha, 3)}",
                      highlight=False, soft_wrap=True)


def _num(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def pair_noise(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """The judge-noise SD of the difference of two runs' overall scores: sqrt(sd_a^2 + sd_b^2), each sd the
    run's SD of its overall across repeats (one grading's noise; 0 when the judge never flipped). None when
    neither run was judged more than once (the noise is then unmeasured, and nothing is marked)."""
    sds = [((s.get("noise") or {}).get("groups") or {}).get(OVERALL, {}).get("score_sd_across_repeats")
           for s in (a, b)]
    known = [x for x in sds if x is not None]
    return float(sum(x * x for x in known) ** 0.5) if known else None
