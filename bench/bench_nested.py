"""Speed of the hierarchical bootstrap (a script, not a test: no timed assertions in the suite).

Why: a sampled or re-graded run computes a 1000-resample hierarchical interval at its end, and the
leaderboard one per row and two per adjacent pair (the interval and the judge-noise-only component).
Prints the time per 1000 resamples of HeartBench-sized values (296 questions, 15 abilities, K samples,
R gradings) and its ratio to the question-only bootstrap (stats/bootstrap.py) on the same questions.

    python bench/bench_nested.py --questions 296 --samples 3 --repeats 3
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ABILITIES, DIMS, options, timed  # noqa: E402

from rubric_engine.scoring.aggregate import ScoredQuestion  # noqa: E402
from rubric_engine.stats.bootstrap import bootstrap_overall  # noqa: E402
from rubric_engine.stats.nested import Nested, multisets, nested_stats  # noqa: E402


def main() -> None:
    args = options(__doc__, questions=296, samples=3, repeats=3, resamples=1000)
    rng = random.Random(1)
    m, k, r = args.questions, args.samples, args.repeats
    sets = len(multisets(r))
    values = np.full((m, k, sets, len(ABILITIES)), np.nan)
    qs = []
    for i in range(m):
        cols = rng.sample(range(len(ABILITIES)), rng.randint(3, 8))
        values[i][:, :, cols] = np.array([[[rng.random() for _ in cols] for _ in range(sets)] for _ in range(k)])
        scores = {ABILITIES[c]: float(values[i, 0, 0, c]) for c in cols}
        qs.append(ScoredQuestion(f"q{i}", "normal", "", scores, sum(scores.values()) / len(scores), False))
    nested = Nested([f"q{i}" for i in range(m)], values, r)
    t_nested, _ = timed(nested_stats, nested, args.resamples)
    t_plain, _ = timed(bootstrap_overall, qs, DIMS, n=args.resamples)
    print(f"{args.resamples} hierarchical resamples of {m} questions x {k} samples x {r} gradings: {t_nested:.3f} s; "
          f"question-only bootstrap {t_plain:.3f} s; ratio {t_nested / t_plain:.2f}")


if __name__ == "__main__":
    main()
