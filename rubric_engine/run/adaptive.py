"""`judge.repeats=auto` resolved for a run: the cap, the one judge it grades with, and the prior read from the
earlier runs `judge.repeats_prior=` names, checked before the run starts (one line each, exit 2).

Why in run/: the prior is read from stored run directories (their samples.jsonl votes), a run-level input like
answers= or from_run=; the rule itself (judge/adaptive.py) only sees what was read. The prior is keyed by
question id and criterion text, so a run whose checked items renumber the judged ones still finds its votes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubric_engine.errors import ConfigError
from rubric_engine.judge.adaptive import DEFAULT_CAP, DEFAULT_CONFIDENCE, AdaptiveRule
from rubric_engine.models.entries import ModelSpec
from rubric_engine.run.settings import RunSettings
from rubric_engine.shapes.base import Verdict
from rubric_engine.stats.adaptive import AdaptiveFold
from rubric_engine.store.layout import SAMPLES_FILE, SUMMARY_FILE

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["adaptive_rule", "prior_votes", "adaptive_fold"]


def adaptive_rule(settings: RunSettings, judges: Sequence[ModelSpec], verdict: Verdict, samples: int,
                  stated: bool) -> AdaptiveRule:
    """The rule of a `judge.repeats=auto` run (`settings`: its judge.repeats_max, _prior and _confidence;
    `stated`: the spec declares judge.verdict.probability), or a ConfigError naming what to change."""
    if settings.repeats_confidence is not None and not stated:
        raise ConfigError("judge.repeats_confidence: the spec's judge gives no probability; declare "
                          "judge.verdict.probability in the spec (the field where the judge says how sure it is) or "
                          "drop judge.repeats_confidence")
    if not verdict.adapts:
        raise ConfigError(f"judge.repeats=auto: a {verdict.name} verdict has no per-criterion votes to repeat; "
                          "use judge.repeats=K")
    if len(judges) != 1:
        raise ConfigError("judge.repeats=auto grades with one judge; use judge=NAME, or judge.repeats=K with a jury")
    if samples > 1:
        raise ConfigError("judge.repeats=auto with candidate.samples > 1 is not supported; use judge.repeats=K")
    cap = DEFAULT_CAP if settings.repeats_max is None else settings.repeats_max
    sure = DEFAULT_CONFIDENCE if settings.repeats_confidence is None else settings.repeats_confidence
    if not settings.repeats_prior:
        return AdaptiveRule(cap, confidence=sure)
    for d in settings.repeats_prior:
        _same_judge(Path(d), judges[0])
    prior, sources = prior_votes([Path(d) for d in settings.repeats_prior], judges[0].name)
    return AdaptiveRule(cap, prior, sources, sure)


def _same_judge(run: Path, judge: ModelSpec) -> None:
    """A prior graded by another model under the same name says nothing of this judge's flips: refused."""
    summary = run / SUMMARY_FILE
    if not summary.is_file():
        return  # its samples.jsonl is checked next; a run without a summary is refused there or read by name
    try:
        graded = (json.loads(summary.read_text(encoding="utf-8")).get("judge") or {}).get("model")
    except (OSError, ValueError, AttributeError):
        raise ConfigError(f"judge.repeats_prior={run}: its {SUMMARY_FILE} is unreadable; give a finished run's "
                          "directory") from None
    if graded is not None and graded != judge.model:
        raise ConfigError(f"judge.repeats_prior={run}: graded by {graded}, not by this run's judge {judge.model}; "
                          "a prior must come from the same judge model")


def prior_votes(dirs: Sequence[Path], judge: str) -> tuple[dict[tuple[str, str], tuple[int, int]], tuple[str, ...]]:
    """Per (question id, criterion text), the minority votes and the votes judge `judge` gave it in the runs
    `dirs` (pooled), and each run's samples.jsonl content hash (the run's identity records them)."""
    pooled: dict[tuple[str, str], list[int]] = {}
    sources = []
    for d in dirs:
        path = d / SAMPLES_FILE
        if not path.is_file():
            raise ConfigError(f"judge.repeats_prior={d}: no {SAMPLES_FILE} there; give a finished run's directory")
        before = sum(v[1] for v in pooled.values())
        for qid, text, votes in _votes(path, judge):
            got = pooled.setdefault((qid, text), [0, 0])
            got[0] += sum(votes)
            got[1] += len(votes)
        if sum(v[1] for v in pooled.values()) == before:
            raise ConfigError(f"judge.repeats_prior={d}: no repeated gradings by judge {judge} there; give a run of "
                              f"the same judge with judge.repeats=K (K >= 2) or auto")
        sources.append(hashlib.sha256(path.read_bytes()).hexdigest()[:16])
    return {k: (min(met, n - met), n) for k, (met, n) in pooled.items()}, tuple(sources)


def _votes(path: Path, judge: str) -> Iterator[tuple[str, str, list[bool]]]:
    """(question id, criterion text, the judge's votes) of every judged item of a samples.jsonl with votes."""
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            rec: Mapping[str, Any] = json.loads(line)
            for entry in rec.get("samples") or [rec]:
                if entry.get("judge_error") or entry.get("candidate_error"):
                    continue
                for c in entry.get("criteria") or []:
                    votes = [v for v in ((c.get("votes") or {}).get(judge) or []) if v is not None]
                    if votes and "check" not in c:
                        yield str(rec.get("id")), str(c.get("text")), [bool(v) for v in votes]


def adaptive_fold(rule: AdaptiveRule | None, judges: Sequence[ModelSpec], spec: "BenchmarkSpec") -> AdaptiveFold | None:
    """The `noise` fold of a judge.repeats=auto run (`rule`; None for any other run); a request grades one
    criterion with granularity per_criterion, else the whole rubric (the calls it counts)."""
    if rule is None or spec.judge is None:
        return None
    per_criterion = spec.judge.verdict.granularity == "per_criterion"
    return AdaptiveFold(judges[0].name, rule.cap, per_criterion, rule.sources)
