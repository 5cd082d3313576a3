"""Speed of the leaderboard's bootstrap (a script, not a test: no timed assertions in the suite).

Why: the leaderboard computes a 1000-resample interval per model on every build; the goal is well under
a second for ~300 questions. Prints the time per 1000 resamples and its ratio to that 1 s budget.

    python bench/bench_bootstrap.py --questions 296 --resamples 1000
"""

from __future__ import annotations

import argparse
import random
import time

from rubric_engine.aggregate import ScoredQuestion
from rubric_engine.bootstrap import bootstrap_overall

ABILITIES = [f"a{i}" for i in range(15)]
DIMS = {"d0": ABILITIES[:7], "d1": ABILITIES[7:11], "d2": ABILITIES[11:13], "d3": ABILITIES[13:14], "d4": ABILITIES[14:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=296)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(1)
    qs = []
    for i in range(args.questions):
        scores = {a: rng.random() for a in rng.sample(ABILITIES, rng.randint(3, 8))}
        qs.append(ScoredQuestion(f"q{i}", "normal", "", scores, sum(scores.values()) / len(scores), False))
    best = min(_timed(qs, args.resamples) for _ in range(args.repeat))
    per_1000 = best * 1000 / args.resamples
    print(f"{args.resamples} resamples of {args.questions} questions: {best:.3f} s "
          f"({per_1000:.3f} s per 1000; ratio to the 1 s budget: {per_1000:.2f})")


def _timed(qs: list[ScoredQuestion], n: int) -> float:
    start = time.perf_counter()
    bootstrap_overall(qs, DIMS, n=n)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
