"""Peak memory of reading human labels (`rubric-engine agree RUNS labels=FILE`): 10 MB vs 100 MB of CSV.

Writes a review.csv-shaped labels file (sheet_id, item_key, question id, criterion_index, criterion,
weight, met, rater, note) over synthetic items, several raters per item, then, each in a fresh process,
measures the peak RSS of building the items alone (the baseline) and of building them plus
labels.read_labels. Prints both sizes side by side: what reading the labels adds, and its ratio.

    python bench/bench_labels.py              # 10 MB and 100 MB
    python bench/bench_labels.py 20 200       # other sizes, in MB
"""

from __future__ import annotations

import csv
import subprocess
import sys
import tempfile
from pathlib import Path

QUESTIONS, CRITERIA = 2_000, 10  # 20,000 items; raters are added until the file reaches its size
NOTE = "a reviewer's note on why this criterion is met or not, as people write them. " * 3

MEASURE = r"""
import resource, sys
from pathlib import Path
from rubric_engine.validity.items import Item, RunItems
from rubric_engine.validity.labels import read_labels
items = {}
for q in range(int(sys.argv[2])):
    for c in range(1, int(sys.argv[3]) + 1):
        key = f"q{q}#{c}@r{q % 97:08x}"
        items[key] = Item(key=key, qid=f"q{q}", criterion_index=c, reply_id=f"r{q % 97:08x}", text="crit",
                          weight=1.0, fields={}, n_criteria=int(sys.argv[3]))
data = RunItems(benchmark="bench", items=items, verdicts=[], replies={}, dialogues={}, taxonomy=None, spec={},
                runs=[], id_field="question_id")
n = len(read_labels([Path(sys.argv[1])], data).labels) if sys.argv[1] != "-" else 0
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, n)
"""


def write_labels(path: Path, megabytes: float) -> int:
    """A labels CSV of about `megabytes` MB; returns its rows."""
    target, rows, rater = megabytes * 2**20, 0, 0
    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["sheet_id", "item_key", "question_id", "criterion_index", "criterion", "weight", "met", "rater",
                    "note"])
        while fh.tell() < target:
            rater += 1
            for q in range(QUESTIONS):
                for c in range(1, CRITERIA + 1):
                    w.writerow(["s1", f"q{q}#{c}@r{q % 97:08x}", f"q{q}", c, f"criterion {c} of question {q}", 1,
                                ("yes", "no")[(q + c + rater) % 2], f"rater{rater}", NOTE])
                    rows += 1
                    if rows % 1000 == 0 and fh.tell() >= target:
                        return rows
    return rows


def peak(labels: str) -> tuple[float, int]:
    out = subprocess.run([sys.executable, "-c", MEASURE, labels, str(QUESTIONS), str(CRITERIA)], check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), int(out[1])


def main(sizes: list[float]) -> None:
    base, _ = peak("-")
    print(f"items alone ({QUESTIONS * CRITERIA:,} items): {base:.1f} MB peak RSS")
    print(f"{'labels file':>12} {'rows':>10} {'labels kept':>12} {'peak RSS':>10} {'added':>10} {'added/file':>11}")
    for mb in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "labels.csv"
            rows = write_labels(path, mb)
            size = path.stat().st_size / 2**20
            rss, kept = peak(str(path))
        print(f"{size:>9.1f} MB {rows:>10,} {kept:>12,} {rss:>7.1f} MB {rss - base:>7.1f} MB {(rss - base) / size:>10.2f}x")


if __name__ == "__main__":
    main([float(a) for a in sys.argv[1:]] or [10.0, 100.0])
