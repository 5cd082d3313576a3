"""What makes a run the same run: its identity and spec hash, its judges, and whether its spec is a shipped one.

Why apart from the runner: the identity decides which directory a run may resume (rundir.begin_run)
and which journal is its own (journal.run_fingerprint), so it is kept in one small place that
changes only when what a run *is* changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rubric_engine.dataset.fetch import sha256_file
from rubric_engine.models.redact import redact
from rubric_engine.run.plan import RunPlan
from rubric_engine.run.settings import RunSettings
from rubric_engine.spec.schema import BenchmarkSpec
from rubric_engine.store import layout as rundir

__all__ = ["run_identity", "spec_digest"]


def _shipped_dir() -> Path | None:
    from rubric_engine.spec.files import packaged_dir

    found = packaged_dir()
    return found.resolve() if found else None


def is_shipped(spec: BenchmarkSpec) -> bool:
    shipped = _shipped_dir()
    return shipped is not None and spec.dir.resolve().parent == shipped


def is_shipped_name(name: str) -> bool:
    shipped = _shipped_dir()
    return shipped is not None and (shipped / name / "benchmark.yaml").is_file()


def spec_digest(spec: BenchmarkSpec) -> str:
    fields = ("candidate.template", "candidate.system", "judge.template", "judge.system")
    texts = {}
    for f in fields:
        section, name = f.split(".")
        if getattr(getattr(spec, section), name, None):
            texts[f] = spec.read_template(f)
    sim = spec.conversation.simulator
    for f, set_ in (("conversation.simulator.system", sim and sim.system), ("conversation.simulator.template",
                                                                           sim and sim.template)):
        if set_:  # only a simulated spec has them: every other spec's hash is unchanged
            texts[f] = spec.read_template(f)
    return rundir.spec_hash(spec.resolved(), texts)


def run_identity(settings: RunSettings, plan: RunPlan, spec: BenchmarkSpec, digest: str,
                 data_sha256: str | None = None) -> dict[str, Any]:
    """What makes a run the same run: a directory is resumed only by a run with this same identity.

    The data's and the answers file's content hashes and each model's sampling params are part of it:
    a run over a changed data file, changed answers or another temperature is another run, never a
    resume that would mix two runs' answers in one directory. Endpoints are recorded redacted (manifest.json
    keeps the identity): a password or token inside an api_base is never written."""
    cand, judges, judge, judged = plan.candidate, plan.judges, plan.judges[0] if plan.judges else None, plan.judged
    panel = {"jury": [[j.name, j.model, redact(j.api_base), j.revision] for j in judges], "jury_rule": plan.rule,
             "repeats": plan.repeats, "tie": plan.tie} if plan.panel else {}  # a single grading keeps its old identity
    if plan.samples > 1:
        panel["samples"] = plan.samples
    if plan.adaptive is not None:  # judge.repeats=auto: its cap and prior decide which gradings are asked
        panel.update({"repeats": "auto", "repeats_max": plan.adaptive.cap, "repeats_prior": list(plan.adaptive.sources),
                      "repeats_confidence": plan.adaptive.confidence})
    base = plan.baseline  # pairwise: another baseline model or answers file is another run
    if base is not None or settings.baseline_answers:
        panel["baseline"] = ([base.name, base.model, redact(base.api_base), base.revision, dict(base.params)]
                             if base else
                             [settings.baseline_answers, _file_sha256(Path(settings.baseline_answers or ""))])
    if plan.user is not None:  # a simulated user is part of what the run is (absent otherwise: old identities hold)
        u = plan.user
        panel["user"] = [u.name, u.model, redact(u.api_base), u.revision, dict(u.params)]
    return {**panel, "benchmark": spec.name, "spec_hash": digest, "stage": plan.stage,
            "data_sha256": data_sha256,
            "candidate": [cand.name, cand.model, redact(cand.api_base), cand.revision] if cand else None,
            "answers": str(settings.answers or settings.from_run or "") or None,
            "answers_sha256": _answers_sha256(settings),
            "judge": [judge.name, judge.model, redact(judge.api_base), judge.revision] if judged and judge else None,
            "params": {"candidate": dict(cand.params) if cand else None,
                       "judge": [dict(j.params) for j in judges] if judged else None},
            "selection": {"subset": settings.subset, "limit": settings.limit,
                          "ids": [str(i) for i in settings.ids] if settings.ids else None}}


def _answers_sha256(settings: RunSettings) -> str | None:
    """The answers file's content hash (answers= or from_run's answers.jsonl), None without one."""
    path = Path(settings.answers) if settings.answers else \
        Path(settings.from_run) / rundir.ANSWERS_FILE if settings.from_run else None
    return _file_sha256(path) if path is not None else None


def _file_sha256(path: Path) -> str | None:
    return sha256_file(path) if path.is_file() else None
