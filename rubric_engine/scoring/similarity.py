"""Text similarity between a reply and a reference, as OpenAI's `text_similarity` grader names its metrics.

Why here, pure and without a library: an imported OpenAI eval's similarity graders become checks the engine
decides itself (scoring/checks.py `similarity`), so the number must be the same on every machine, offline and
free. Each metric returns a value in [0, 1]:
- `fuzzy_match`: the normalised indel similarity of the two strings, 2 * LCS / (len(a) + len(b)) (what
  rapidfuzz's `fuzz.ratio` computes, divided by 100); two empty strings are 1;
- `bleu`: sentence BLEU over whitespace tokens, n-grams 1..4 with equal weights, clipped counts, the brevity
  penalty, no smoothing (a reply sharing no 4-gram with the reference scores 0);
- `gleu`: Google-BLEU, min(precision, recall) of the n-grams 1..4 pooled;
- `rouge_1` .. `rouge_5`: the F1 of n-gram overlap, `rouge_l`: the F1 of the longest common subsequence, both
  on rouge-score's tokens (lower case, runs of ASCII letters and digits, no stemming).
`cosine` needs an embedding model and `meteor` a synonym dictionary: REFUSED says so, and the importer stops.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence

__all__ = ["METRICS", "REFUSED", "similarity", "MAX_CHARS"]

MAX_CHARS = 20_000  # the quadratic metrics (fuzzy_match, rouge_l) compare at most this much of each text


def _lcs(a: Sequence[object], b: Sequence[object]) -> int:
    """Length of the longest common subsequence (one row of the table at a time)."""
    if len(a) < len(b):
        a, b = b, a
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, 1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def fuzzy_match(output: str, reference: str) -> float:
    a, b = output[:MAX_CHARS], reference[:MAX_CHARS]
    total = len(a) + len(b)
    return 1.0 if total == 0 else 2 * _lcs(a, b) / total


def _ngrams(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def bleu(output: str, reference: str) -> float:
    hyp, ref = output.split(), reference.split()
    if not hyp or not ref:
        return 0.0
    logs = []
    for n in range(1, 5):
        h, r = _ngrams(hyp, n), _ngrams(ref, n)
        matched, total = sum(min(c, r[g]) for g, c in h.items()), sum(h.values())
        if matched == 0 or total == 0:
            return 0.0
        logs.append(math.log(matched / total) / 4)
    penalty = 1.0 if len(hyp) > len(ref) else math.exp(1 - len(ref) / len(hyp))
    return penalty * math.exp(sum(logs))


def gleu(output: str, reference: str) -> float:
    hyp, ref = output.split(), reference.split()
    matched = hyp_total = ref_total = 0
    for n in range(1, 5):
        h, r = _ngrams(hyp, n), _ngrams(ref, n)
        matched += sum(min(c, r[g]) for g, c in h.items())
        hyp_total, ref_total = hyp_total + sum(h.values()), ref_total + sum(r.values())
    if hyp_total == 0 or ref_total == 0:
        return 0.0
    return min(matched / hyp_total, matched / ref_total)


def _rouge_tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _f1(overlap: int, hyp: int, ref: int) -> float:
    if overlap == 0 or hyp == 0 or ref == 0:
        return 0.0
    p, r = overlap / hyp, overlap / ref
    return 2 * p * r / (p + r)


def _rouge_n(n: int) -> Callable[[str, str], float]:
    def rouge(output: str, reference: str) -> float:
        h, r = _ngrams(_rouge_tokens(output), n), _ngrams(_rouge_tokens(reference), n)
        return _f1(sum(min(c, r[g]) for g, c in h.items()), sum(h.values()), sum(r.values()))
    return rouge


def rouge_l(output: str, reference: str) -> float:
    h, r = _rouge_tokens(output[:MAX_CHARS]), _rouge_tokens(reference[:MAX_CHARS])
    return _f1(_lcs(h, r), len(h), len(r))


METRICS: dict[str, Callable[[str, str], float]] = {
    "fuzzy_match": fuzzy_match, "bleu": bleu, "gleu": gleu, "rouge_l": rouge_l,
    **{f"rouge_{n}": _rouge_n(n) for n in range(1, 6)}}
REFUSED = {"cosine": "it compares embeddings, which needs an embedding model call",
           "meteor": "it needs a synonym dictionary (WordNet) this engine does not ship"}


def similarity(metric: str, output: str, reference: str) -> float:
    """The metric's value for `output` against `reference`, in [0, 1]; KeyError for a metric not in METRICS."""
    return METRICS[metric](output, reference)
