"""One shard of a sharded run, as a node runs it: the run's checks again, its own questions, its own segment.

Why apart from run/shards.py: this is the part that runs the pipeline (it needs the runner), while the head's
side (which question is whose, the merge) must not import the runner that imports it. Ray-free: the cluster
layer (cluster/shards.py) sends `run_shard` to a node as a task; any other executor could call it the same way.
"""

from __future__ import annotations

from pathlib import Path

from rubric_engine.errors import ConfigError
from rubric_engine.models.workers import WorkerPool
from rubric_engine.run import stream as runstream
from rubric_engine.run.journal import read_journal
from rubric_engine.run.loops import run_sync
from rubric_engine.run.runner import check_run, journal_questions
from rubric_engine.run.shards import ShardDone, ShardJob, segment_path, shard_of, transcript_segment
from rubric_engine.text.terminal import SafeConsole

__all__ = ["run_shard"]


def run_shard(job: ShardJob) -> ShardDone:
    """Run shard `job.index` of `job.count`: the questions dealt to it (run/shards.shard_of) that neither the run's
    journal nor the shard's own segment holds, each journalled into the segment as it finishes, its calls written
    to the shard's transcripts segment (run/shards.transcript_segment). Refuses (one line)
    a node that sees another spec or data file than the head did. No run lock: the head holds it for the run."""
    return run_sync(_run_shard(job))


async def _run_shard(job: ShardJob) -> ShardDone:
    console = SafeConsole(stderr=True)  # a node's log, not the user's terminal
    inputs = check_run(job.settings, console, set())
    seen = (inputs.digest, inputs.dataset.sha256)
    if seen != job.expect:
        what = "spec" if seen[0] != job.expect[0] else "data file"
        raise ConfigError(f"shard {job.name} sees another {what} than the head (its files differ on this node); "
                          "put the benchmark, data and run directory on storage every node shares")
    done = runstream.resume(inputs.journal, job.fingerprint, lambda _: None).done  # merged by the head before
    segment = segment_path(Path(job.settings.out_dir), job.index, job.count)
    segment.parent.mkdir(parents=True, exist_ok=True)
    kept = read_journal(segment, job.fingerprint).done  # an earlier attempt of this shard (its node was lost)
    rows = inputs.rows
    mine = shard_of([r.id for r in rows.refs], job.count)
    todo = rows.view([r for r in rows.refs if mine[r.id] == job.index and r.id not in done and r.id not in kept])
    workers = WorkerPool(job.settings.workers)
    try:
        calls, stages = await journal_questions(inputs, todo, segment, job.fingerprint,
                                                {"questions": len(rows.refs), "shard": job.name}, console, workers,
                                                transcripts=transcript_segment(segment.parent, job))
    finally:
        await workers.aclose()
    return ShardDone(job.index, job.count, ran=len(todo), kept=len(kept), calls=calls, stages=stages)
