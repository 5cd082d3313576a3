"""Adaptive repeats against fixed ones: judge calls and the flip rate of the final verdicts, side by side (a script).

Why: `judge.repeats=auto` (judge/adaptive.py) promises most of what fixed repeats buy for a fraction of their
calls when most criteria never flip. This runs the real console script against the fake server (its own
process) judging HealthBench-shaped rows one criterion per call, where a share `--noisy` of the criteria flips
with probability `--p` per call and the rest never do, and prints for a single pass, fixed `judge.repeats=5` and
auto (its prior: a fixed `--prior-repeats` run of the same judge on another candidate's replies), and auto with no
prior on a spec whose judge says how sure it is (`judge.verdict.probability`: 0.6 where it flips, 0.97 elsewhere:
"auto, sure") the calls, their
ratio to a single pass, and the share of final verdicts that differ from the judge's settled verdict (a flip that
survived; the fake knows the settled verdict), over all criteria and over the noisy ones. Goal (issue 38): auto's
calls <= 1.5x a single pass and its final flip rate within 20% of fixed 5's. Each seed draws new flips.

    python bench/bench_repeats.py --questions 100 --criteria 5 --noisy 0.1 --p 0.3 --seeds 3

A run starts on a fresh server, so every run's n-th grading of a criterion is the same draw: auto and fixed 5
differ only where auto stopped early (the comparison is paired).

Measured on the shared 2-core machine on 2026-11-28 with the defaults (100 questions x 5 criteria, 10% of them at
p = 0.3, 3 seeds, a 10-vote prior): auto 607, 606 and 610 calls against 500 for a single pass and 2,500 for fixed
5 (1.22x a single pass); the final verdicts kept a flip in 2.80% of criteria for a single pass, 1.47% for fixed 5
and 1.53% for auto (1.05x fixed 5's); "auto, sure" (no prior) 616, 606 and 610 calls (1.22x) and the same 1.53%.
Per seed the ratio ranged from 0.90x to 1.5x: about 50 flipping criteria a seed is a small sample (the expected
ratio is 1.11x, docs/judge-noise.md), so read the mean.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import EXE, ROOT, ServerProcess, options, run_engine, served  # noqa: E402

_TAG, _CRIT, _SCRIPT = re.compile(r"(REPLY|PRIOR)\[q(\d+)\]"), re.compile(r"CRIT#(\d+)"), re.compile(r"SCRIPT\[([^\]]+)\]")
_SEEN: dict[tuple[str, int, int], int] = {}
_LOCK = threading.Lock()


def settled(q: int, i: int) -> bool:
    return (q + i) % 2 == 0


def flip_rate(seed: int, noisy: float, p: float, q: int, i: int) -> float:
    return p if random.Random(f"noisy|{seed}|{q}|{i}").random() < noisy else 0.0


def _reply(body: dict[str, Any]) -> Any:
    """The judge: criterion i of question q flips with its rate per call, the draw keyed by arrival number."""
    from fakeserver import Reply  # noqa: PLC0415 - tests/ is on sys.path in the server process

    text = json.dumps(body["messages"])
    tag, q = _TAG.search(text).groups()  # type: ignore[union-attr]
    i, (seed, noisy, p) = int(_CRIT.search(text).group(1)), _SCRIPT.search(text).group(1).split(",")  # type: ignore[union-attr]
    with _LOCK:
        k = _SEEN.get((tag, int(q), i), 0)
        _SEEN[(tag, int(q), i)] = k + 1
    rate = flip_rate(int(seed), float(noisy), float(p), int(q), i)
    flip = random.Random(f"{seed}|{tag}|{q}|{i}|{k}").random() < rate
    sure = 0.6 if rate else 0.97  # read only by the spec declaring judge.verdict.probability ("auto, sure")
    return Reply(text=json.dumps({"explanation": "e", "criteria_met": settled(int(q), i) != flip, "confidence": sure}))


def _files(tmp: Path, a: Any, seed: int) -> Path:
    script = f"SCRIPT[{seed},{a.noisy},{a.p}]"
    rows = [{"prompt": [{"role": "user", "content": f"question {n} {script}"}], "prompt_id": f"q{n}",
             "example_tags": ["theme:x"], "rubrics": [{"criterion": f"CRIT#{i} point", "points": 1 + i, "tags": ["axis:a"]}
                                                      for i in range(1, a.criteria + 1)]} for n in range(a.questions)]
    (tmp / "hb.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = tmp / "hb_sure"  # healthbench whose judge says how sure it is (judge.verdict.probability)
    shutil.copytree(ROOT / "benchmarks" / "healthbench", spec)
    text = (spec / "benchmark.yaml").read_text(encoding="utf-8")
    (spec / "benchmark.yaml").write_text(text.replace("met: criteria_met}", "met: criteria_met, probability: confidence}"),
                                         encoding="utf-8")
    for tag in ("REPLY", "PRIOR"):
        (tmp / f"{tag}.jsonl").write_text("".join(json.dumps({"prompt_id": f"q{n}", "response": f"{tag}[q{n}]"}) + "\n"
                                                  for n in range(a.questions)))
    return tmp / "hb.jsonl"


def _run(tmp: Path, a: Any, seed: int, name: str, tag: str, *extra: str) -> tuple[int, list[dict[str, Any]], dict[str, Any]]:
    """One run on a fresh server: (requests, records, summary)."""
    with ServerProcess(0.0, _reply) as srv:
        bench = next((e.split("=", 1)[1] for e in extra if e.startswith("benchmark=")), "healthbench")
        extra = tuple(e for e in extra if not e.startswith("benchmark="))
        run_engine([EXE, f"benchmark={bench}", f"data.path={tmp / 'hb.jsonl'}", "stage=score",
                    f"answers={tmp / (tag + '.jsonl')}", f"hydra.run.dir={tmp / name}", f"cache.dir={tmp / ('c-' + name)}",
                    "progress=none", f"concurrency={a.concurrency}", *served("judge", "judge", srv.url), *extra])
        sent = srv.stats()[0]
    records = [json.loads(x) for x in (tmp / name / "samples.jsonl").read_text().splitlines()]
    return sent, records, json.loads((tmp / name / "summary.json").read_text())


def _wrong(records: list[dict[str, Any]], a: Any, seed: int, noisy_only: bool) -> float:
    units = [(int(r["id"][1:]), c) for r in records for c in r["criteria"]
             if not noisy_only or flip_rate(seed, a.noisy, a.p, int(r["id"][1:]), c["index"]) > 0]
    return sum(c["hit"] != settled(q, c["index"]) for q, c in units) / len(units) if units else float("nan")


def main() -> None:
    a = options(__doc__, questions=100, criteria=5, noisy=0.1, p=0.3, seeds=3, prior_repeats=10, concurrency=32)
    print(f"{a.questions} questions x {a.criteria} criteria, one call each; {a.noisy:.0%} of criteria flip with "
          f"p={a.p}, the rest never; auto's prior: judge.repeats={a.prior_repeats} on another candidate's replies")
    print(f"{'seed':>4} {'mode':<11} {'calls':>6} {'x single':>9} {'final flips':>12} {'on noisy':>9}")
    totals: dict[str, list[float]] = {}
    for seed in range(a.seeds):
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            _files(tmp, a, seed)
            _run(tmp, a, seed, "prior", "PRIOR", f"judge.repeats={a.prior_repeats}")
            rows = {"single": _run(tmp, a, seed, "single", "REPLY"),
                    "fixed 5": _run(tmp, a, seed, "fixed", "REPLY", "judge.repeats=5"),
                    "auto": _run(tmp, a, seed, "auto", "REPLY", "judge.repeats=auto",
                                 f"judge.repeats_prior={tmp / 'prior'}"),
                    "auto, sure": _run(tmp, a, seed, "sure", "REPLY", "judge.repeats=auto",
                                       f"benchmark={tmp / 'hb_sure'}")}
        single = rows["single"][0]
        for mode, (sent, records, summary) in rows.items():
            every, noisy = _wrong(records, a, seed, False), _wrong(records, a, seed, True)
            for k, v in ((f"{mode} calls", sent / single), (f"{mode} flips", every)):
                totals.setdefault(k, []).append(v)
            print(f"{seed:>4} {mode:<11} {sent:>6} {sent / single:>8.2f}x {every:>11.2%} {noisy:>8.1%}")
        est = rows["auto"][2]["noise"]["adaptive"]
        print(f"     auto's own noise section: {est['saved_calls']} calls saved against judge.repeats=5, estimated "
              f"final flips {est['final_flip_rate']:.2%}")
    mean = {k: sum(v) / len(v) for k, v in totals.items()}
    ratio = mean["auto flips"] / mean["fixed 5 flips"] if mean["fixed 5 flips"] else float("nan")
    print(f"mean over {a.seeds} seed(s): auto {mean['auto calls']:.2f}x a single pass (goal <= 1.5x), fixed 5 "
          f"{mean['fixed 5 calls']:.2f}x; final flips: single {mean['single flips']:.2%}, fixed 5 "
          f"{mean['fixed 5 flips']:.2%}, auto {mean['auto flips']:.2%} = {ratio:.2f}x fixed 5's (goal <= 1.2x); "
          f"auto with the judge's probability and no prior: {mean['auto, sure calls']:.2f}x a single pass, final flips "
          f"{mean['auto, sure flips']:.2%}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
