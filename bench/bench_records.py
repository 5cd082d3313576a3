"""Reading samples.jsonl through the record codec (issue #36): seconds to read N records as parsed JSON only,
through the check the reader made before the codec (weights and verdicts of every criterion), and through
`record.codec.decode` (the typed Record), then `encode` back; the ratios side by side.

Records are shaped like a real run's (a reply, ten criteria with judge reasoning, ability scores, usage).

    python bench/bench_records.py            # 100,000 records
    python bench/bench_records.py 20000
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from rubric_engine.record.codec import decode, encode

ABILITIES = ["warmth", "curiosity", "coping", "humor"]


def line(i: int) -> str:
    s = ((i * 7919) % 100) / 100
    rec = {"id": f"q{i:07d}", "subset": "a", "scenario": "b", "response": "I hear you. " * 60,
           "candidate_error": None, "judge_error": None,
           "criteria": [{"index": k, "label": ABILITIES[k % 4], "ability": ABILITIES[k % 4], "rule": None, "weight": 2,
                         "text": "responds to the feeling named " * 3,
                         "reasoning": "the reply names the feeling and stays with it " * 3, "hit": k % 2 == 0}
                        for k in range(1, 11)],
           "abilities": {a: {"raw": 2.0, "lo": -4.0, "hi": 10.0, "score": s} for a in ABILITIES}, "score": s,
           "failed_rules": [], "catastrophic": False,
           "tokens": {"candidate": {"prompt": 100, "completion": 200}, "judge": {"prompt": 900, "completion": 300}},
           "cost": {"candidate": None, "judge": None}, "cache_hits": {"candidate": 0, "judge": 0}, "truncated": False}
    return json.dumps(rec, ensure_ascii=False)


def checked(rec: dict[str, Any]) -> dict[str, Any]:
    """What store/runs.iter_samples checked of each record before the codec."""
    for c in rec.get("criteria") or []:
        weight, hit = c.get("weight"), c.get("hit")
        if weight is not None and (isinstance(weight, bool) or not isinstance(weight, (int, float))):
            raise ValueError(weight)
        if hit is not None and not isinstance(hit, bool):
            raise ValueError(hit)
    return rec


def timed(lines: list[str], step: Callable[[str], Any]) -> float:
    start = time.perf_counter()
    for x in lines:
        step(x)
    return time.perf_counter() - start


def main(n: int) -> None:
    lines = [line(i) for i in range(n)]
    base = timed(lines, json.loads)
    old = timed(lines, lambda x: checked(json.loads(x)))
    new = timed(lines, lambda x: decode(json.loads(x)))
    back = timed(lines, lambda x: encode(decode(json.loads(x))))
    print(f"{n} records: json.loads {base:.2f}s; + the former check {old:.2f}s; + decode {new:.2f}s "
          f"({new / old:.2f}x the former reader); decode + encode {back:.2f}s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
