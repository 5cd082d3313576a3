"""Speed of the leaderboard's bootstrap (a script, not a test: no timed assertions in the suite).

Why: the leaderboard computes a 1000-resample interval per model on every build; the goal is well under
a second for ~300 questions. Prints the time per 1000 resamples and its ratio to that 1 s budget.

    python bench/bench_bootstrap.py --questions 296 --resamples 1000
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DIMS, options, scored_questions, timed  # noqa: E402

from rubric_engine.stats.bootstrap import bootstrap_overall  # noqa: E402


def main() -> None:
    args = options(__doc__, questions=296, resamples=1000, repeat=3)
    qs = scored_questions(args.questions)
    best = min(timed(bootstrap_overall, qs, DIMS, n=args.resamples)[0] for _ in range(args.repeat))
    per_1000 = best * 1000 / args.resamples
    print(f"{args.resamples} resamples of {args.questions} questions: {best:.3f} s "
          f"({per_1000:.3f} s per 1000; ratio to the 1 s budget: {per_1000:.2f})")


if __name__ == "__main__":
    main()
