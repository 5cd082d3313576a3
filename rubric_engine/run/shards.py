"""One run split into shards of questions: which question is whose, where each shard journals, and the merge.

Why here, Ray-free: a run that spreads over a cluster (rubric_engine/cluster/shards.py) is still one run of
this package. The head (the command line's process) checks everything, claims the run directory and hands
`ShardJob`s to a `Spread` it was given at construction; each shard runs the normal pipeline over its own
questions (run/shardrun.py) into its own journal segment under the run directory, `shards/K-of-N.jsonl` (the
journal format of run/journal.py, the run's fingerprint); the head then merges the segments into the run's
journal and finishes it as any run (run/stream.py), so the final files are a one-process run's. Each shard writes
its calls to a transcripts segment of its own, `shards/transcripts/K-of-N-TOKEN.jsonl` (one writer per file), which
the head appends to the run's transcripts/calls.jsonl (`merge_transcripts`: the calls renumbered, each marked with
its segment's name, texts the file holds not written again) before it merges the journal segments.

Resume: every segment belongs to the run whatever `shards=` wrote it. Before anything is read, the head merges
whatever segments a killed run left into the journal (`merge_segments`, one atomic replace, a question journalled
twice kept once); a shard then skips every question the journal or its own segment holds. So `shards=` is not
part of the run's identity: the same command with another count, or without Ray, resumes the same run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
from collections.abc import Awaitable, Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from rubric_engine.errors import DataError
from rubric_engine.models.cache import default_cache_dir
from rubric_engine.run.journal import JOURNAL_VERSION, read_journal
from rubric_engine.run.settings import RunSettings
from rubric_engine.store import layout as rundir
from rubric_engine.store.transcripts import calls_path, text_hash, whole_lines

__all__ = ["SHARDS_DIR", "ShardJob", "ShardDone", "Spread", "shard_of", "segment_path", "segments", "merge_segments",
           "shard_jobs", "merged_calls", "merged_stages", "spread_run", "transcript_segment", "merge_transcripts"]

SHARDS_DIR = "shards"
SHARD_TRANSCRIPTS = "transcripts"  # under SHARDS_DIR: each shard's calls until the head merges them


def shard_of(ids: Sequence[str], count: int) -> dict[str, int]:
    """The shard (0-based) of each question among `count`: the ids ranked by their sha256 (the same on every machine
    and in every Python process; never `hash()`, which is salted per process) and dealt out in turn, so shards
    differ by one question at most. The ids are the run's selection, part of its identity: every shard and every
    run of the same command deal them the same way."""
    ranked = sorted(ids, key=lambda qid: hashlib.sha256(qid.encode("utf-8")).digest())
    return {qid: rank % count for rank, qid in enumerate(ranked)}


def segment_path(out: Path, index: int, count: int) -> Path:
    """Shard `index` (0-based) of `count`'s journal segment: `shards/K-of-N.jsonl`, K counted from 1."""
    return Path(out) / SHARDS_DIR / f"{index + 1}-of-{count}.jsonl"


def segments(out: Path) -> list[Path]:
    """Every journal segment under the run directory, whatever count wrote it."""
    return sorted((Path(out) / SHARDS_DIR).glob("*-of-*.jsonl"))


@dataclass(frozen=True)
class ShardJob:
    """What a shard is asked: the run's settings (paths absolute, so any node finds them on shared storage), its
    place, the run's fingerprint (its segment's header) and what the head checked (spec digest, data sha256)."""

    settings: RunSettings
    index: int
    count: int
    fingerprint: str
    expect: tuple[str, str]
    token: str  # the head's, one per spreading: names the shard's transcripts segment (transcript_segment)

    @property
    def name(self) -> str:
        return f"{self.index + 1}-of-{self.count}"


@dataclass
class ShardDone:
    """What a shard reports: questions it ran, records its segment held already (a shard run again after its node
    was lost), its calls (summary.json's `calls`) and seconds per stage."""

    index: int
    count: int
    ran: int
    kept: int
    calls: dict[str, dict[str, int]] = field(default_factory=dict)
    stages: dict[str, float | None] = field(default_factory=dict)


class Spread(Protocol):
    """Where shards run (cluster/shards.RaySpread): how many there are, and running every job to its end."""

    def count(self) -> int: ...

    def run(self, jobs: Sequence[ShardJob], say: Callable[[str], None]) -> Awaitable[list[ShardDone]]: ...


def _absolute(value: str | None) -> str | None:
    return str(Path(value).absolute()) if value else value


def shard_jobs(settings: RunSettings, count: int, fingerprint: str, expect: tuple[str, str]) -> list[ShardJob]:
    """One job per shard. Every path is made absolute (a node's worker starts elsewhere) and the call cache is
    named (its default reads this machine's environment); a shard shows no progress (its console is a node's)."""
    bench = Path(settings.benchmark)
    shard = replace(settings, out_dir=Path(settings.out_dir).absolute(), data_path=_absolute(settings.data_path),
                    data_cache_dir=_absolute(settings.data_cache_dir),
                    cache_dir=_absolute(settings.cache_dir) or str(default_cache_dir().absolute()),
                    benchmark=str(bench.absolute()) if bench.exists() else settings.benchmark,
                    benchmark_dirs=[str(Path(d).absolute()) for d in settings.benchmark_dirs],
                    answers=_absolute(settings.answers), from_run=_absolute(settings.from_run),
                    baseline_answers=_absolute(settings.baseline_answers),
                    repeats_prior=[str(Path(d).absolute()) for d in settings.repeats_prior],
                    progress="none", quiet=True, resume_command=None)
    token = secrets.token_hex(4)
    return [ShardJob(shard, k, count, fingerprint, expect, token) for k in range(count)]


def transcript_segment(shards_dir: Path, job: ShardJob) -> Path:
    """Shard `job`'s transcripts segment, `shards/transcripts/K-of-N-TOKEN.jsonl` (the transcripts format, its calls
    numbered from 1). The head's token is one per spreading: a shard run again after its node was lost continues
    its file, and a later command's shards write new ones, never a merged one's name again."""
    return Path(shards_dir) / SHARD_TRANSCRIPTS / f"{job.name}-{job.token}.jsonl"


def _call_line(path: Path, raw: bytes) -> dict[str, Any]:
    """A call line of a transcripts file, or DataError naming the file (a damaged file: move it away)."""
    try:
        rec = json.loads(raw.decode("utf-8", "surrogatepass"))
        int(rec["call"])
    except (ValueError, TypeError, KeyError) as exc:
        raise DataError(str(path), f"a line that is not a call ({type(exc).__name__}: {str(exc)[:80]})",
                        fix="the transcripts file is damaged; move it away (its calls leave the transcripts, "
                            "nothing else) and run the same command") from None
    return rec


def _transcripts_state(path: Path) -> tuple[set[str], set[str], int]:
    """What the run's transcripts file holds: its texts' hashes, the segments merged into it, its last call number."""
    texts: set[str] = set()
    merged: set[str] = set()
    last = 0
    if path.is_file():
        for _, raw in whole_lines(path):
            if (h := text_hash(raw)) is not None:
                texts.add(h)
                continue
            rec = _call_line(path, raw)
            last = max(last, int(rec["call"]))
            if isinstance(rec.get("shard"), str):
                merged.add(rec["shard"])
    return texts, merged, last


def _renumbered(segment: Path, offset: int, texts: set[str]) -> Generator[str, None, int]:
    """One segment's lines for the run's file: texts not there yet, calls numbered after `offset` (their `after`
    and `reask_of` too) and marked with the segment's name; returns the segment's last call number."""
    top = 0
    for _, raw in whole_lines(segment):
        if (h := text_hash(raw)) is not None:
            if h not in texts:
                texts.add(h)
                yield raw.decode("utf-8", "surrogatepass")
            continue
        rec = _call_line(segment, raw)
        top = max(top, int(rec["call"]))
        for key in ("call", "after", "reask_of"):
            if isinstance(rec.get(key), int):
                rec[key] += offset
        rec["shard"] = segment.stem
        yield json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n"
    return top


def merge_transcripts(out: Path) -> int:
    """Append every shard's transcripts segment to the run's transcripts/calls.jsonl by one atomic, fsync'd replace,
    then remove the segments; returns how many segments were merged. A segment whose name the file holds already
    (a crash after the replace, before the removal) is skipped, so a merge is never repeated."""
    folder = Path(out) / SHARDS_DIR / SHARD_TRANSCRIPTS
    parts = sorted(folder.glob("*-of-*.jsonl"))
    if not parts:
        return 0
    target = calls_path(Path(out))
    texts, merged, last = _transcripts_state(target)
    fresh = [p for p in parts if p.stem not in merged]

    def lines() -> Iterator[str]:
        if target.is_file():
            yield from (raw.decode("utf-8", "surrogatepass") for _, raw in whole_lines(target))
        offset = last
        for part in fresh:
            offset += yield from _renumbered(part, offset, texts)

    if fresh:
        rundir.write_lines(target, lines(), fsync=True, errors="surrogatepass")
    for part in parts:
        part.unlink()
    with contextlib.suppress(OSError):  # something else lives there: left alone
        folder.rmdir()
    return len(fresh)


def merge_segments(journal: Path, fingerprint: str, header: Mapping[str, Any]) -> int:
    """Fold every segment under the journal's directory into the journal (its records first, then each segment's,
    a question already seen skipped) by one atomic, fsync'd replace, then remove the segments; returns how many
    records the segments added. Each file is checked against `fingerprint` first (another run's is refused) and an
    incomplete last line, left by a killed shard, is cut off (its question runs again). A crash after the replace
    leaves segments whose records the journal holds: the next merge skips them. The shards' transcripts segments
    are merged first (merge_transcripts), as a question's calls reach the disk before its journal record."""
    merge_transcripts(journal.parent)
    parts = segments(journal.parent)
    if not parts:
        return 0
    sources = ([journal] if journal.exists() and journal.stat().st_size else []) + parts
    for src in sources:
        if _has_header(src):
            read_journal(src, fingerprint)  # this run's, repaired
    seen: set[str] = set()
    added = {"n": 0}

    def lines() -> Iterator[str]:
        yield json.dumps({"journal": JOURNAL_VERSION, "run": fingerprint, **dict(header)}, ensure_ascii=False,
                         separators=(",", ":")) + "\n"
        for src in sources:
            with src.open("rb") as fh:
                for raw in fh:
                    rec = json.loads(raw)
                    if "journal" in rec or rec["id"] in seen:
                        continue
                    seen.add(rec["id"])
                    added["n"] += src is not journal
                    yield raw.decode("utf-8")

    rundir.write_lines(journal, lines(), fsync=True)
    for part in parts:
        part.unlink()
    try:
        (journal.parent / SHARDS_DIR).rmdir()
    except OSError:  # something else lives there: left alone
        pass
    return added["n"]


def _has_header(path: Path) -> bool:
    with path.open("rb") as fh:
        first = fh.readline()
    try:
        return "journal" in json.loads(first)
    except (ValueError, TypeError):
        return True  # an unreadable first line: read_journal says what is wrong with it


def merged_calls(done: Sequence[ShardDone]) -> dict[str, dict[str, int]]:
    """summary.json's `calls` of a sharded run: every shard's counts added up."""
    out: dict[str, dict[str, int]] = {}
    for d in done:
        for role, counts in d.calls.items():
            mine = out.setdefault(role, {})
            for k, v in counts.items():
                mine[k] = mine.get(k, 0) + v if isinstance(v, (int, float)) else v
    return out


def merged_stages(done: Sequence[ShardDone]) -> dict[str, float | None]:
    """Seconds per stage of a sharded run: the slowest shard's (shards run side by side)."""
    out: dict[str, float | None] = {}
    for d in done:
        for name, sec in d.stages.items():
            out[name] = sec if out.get(name) is None else max(out[name] or 0.0, sec or 0.0)
    return out


async def spread_run(spread: Spread, settings: RunSettings, fingerprint: str, expect: tuple[str, str], todo: int,
                     say: Callable[[str], None]) -> tuple[dict[str, dict[str, int]], dict[str, float | None]]:
    """The head's part while its shards run: one job per shard handed to `spread`, one line before and one after;
    returns the calls and seconds per stage of all shards together. The caller merges the segments."""
    count = spread.count()
    say(f"sharded: {todo} questions to run over {count} shard(s), each journalling under "
        f"{Path(settings.out_dir) / SHARDS_DIR}")
    done = await spread.run(shard_jobs(settings, count, fingerprint, expect), say)
    kept = sum(d.kept for d in done)
    say(f"sharded: {sum(d.ran for d in done)} questions run by {len(done)} shard(s)"
        + (f", {kept} kept from the segments of shards run again" if kept else ""))
    return merged_calls(done), merged_stages(done)
