"""Peak memory of ranking stored runs: streamed compact scores vs holding every record (issue 15).

Writes synthetic run directories (records shaped like a real run's: a reply, ten criteria with judge
reasoning, ability scores), then, each in a fresh process, measures peak RSS of
- `stream`: what `rubric-engine leaderboard` does (runs.collect_runs + build_leaderboard), and
- `whole`: the earlier reader, every record of every run held as parsed JSON, then the same ranking.
Prints both peaks and their ratio for a few sizes, plus the per-question slope of each.

    python bench/bench_leaderboard.py            # 2 runs x 2,000 / 10,000 / 30,000 questions
    python bench/bench_leaderboard.py 5000 50000
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ABILITIES = {"mind": ["warmth", "curiosity"], "heart": ["coping", "humor"]}
SPEC = {"name": "benchbench", "version": "1", "taxonomy": {"dimensions": [
    {"id": d, "labels": {"en": d}, "abilities": [{"id": a, "labels": {"en": a}} for a in abilities]}
    for d, abilities in ABILITIES.items()]}, "scoring": {"scale": 100.0}, "report": {}, "data": {}}

MEASURE = r"""
import json, resource, sys
from pathlib import Path
mode, dirs = sys.argv[1], [Path(p) for p in sys.argv[2:]]
from rubric_engine.results.leaderboard import build_leaderboard
from rubric_engine.store.runs import collect_runs
runs = collect_runs(dirs)
held = []
if mode == "whole":  # the earlier reader: every record of every run, parsed and kept
    held = [[json.loads(x) for x in (r.dir / "samples.jsonl").read_text(encoding="utf-8").splitlines() if x]
            for r in runs]
lb = build_leaderboard(runs, n_boot=50)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, len(held))
"""


def write_run(root: Path, name: str, n: int) -> Path:
    run = root / name
    run.mkdir(parents=True)
    abilities = [a for v in ABILITIES.values() for a in v]
    with (run / "samples.jsonl").open("w", encoding="utf-8") as fh:
        for i in range(n):
            s = ((i * 7919) % 100) / 100
            rec = {"id": f"q{i:07d}", "subset": "", "scenario": "", "score": s, "catastrophic": False,
                   "abilities": {a: {"score": s} for a in abilities}, "response": "I hear you. " * 60,
                   "criteria": [{"index": k, "label": abilities[k % 4], "ability": abilities[k % 4], "weight": 2,
                                 "text": "responds to the feeling named " * 3, "hit": k % 2 == 0,
                                 "reasoning": "the reply names the feeling and stays with it " * 3}
                                for k in range(1, 11)],
                   "candidate_error": None, "judge_error": None}
            fh.write(json.dumps(rec) + "\n")
    summary = {"benchmark": "benchbench", "candidate": {"name": name}, "judge": {"name": "j"}, "overall": None,
               "counts": {"questions": n}}
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    (run / "spec.resolved.json").write_text(json.dumps(SPEC), encoding="utf-8")
    return run


def peak(mode: str, dirs: list[Path]) -> float:
    out = subprocess.run([sys.executable, "-c", MEASURE, mode, *map(str, dirs)], capture_output=True, text=True,
                         check=True).stdout.split()
    return float(out[0])


def main(sizes: list[int]) -> None:
    print(f"{'questions/run':>14} {'stream MB':>10} {'whole MB':>10} {'whole/stream':>13}")
    points = []
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            dirs = [write_run(Path(tmp), f"model{k}", n) for k in range(2)]
            s, w = peak("stream", dirs), peak("whole", dirs)
        points.append((n, s, w))
        print(f"{n:>14,} {s:>10.0f} {w:>10.0f} {w / s:>12.2f}x")
    if len(points) > 1:
        (n0, s0, w0), (n1, s1, w1) = points[0], points[-1]
        per = 2 * (n1 - n0)
        print(f"slope per question: stream {(s1 - s0) * 1024 / per:.1f} KB, whole {(w1 - w0) * 1024 / per:.1f} KB")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [2000, 10000, 30000])
