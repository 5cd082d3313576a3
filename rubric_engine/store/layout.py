"""The files of a run directory: what a run leaves behind and what later runs read back.

Why a module of its own: the runner writes these files, and score-only runs, resumed runs and
leaderboards read them back, so their layout is a public, versioned format (see docs/outputs.md).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import json
import logging
import re
import uuid
from datetime import datetime, timezone
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, cast

from rubric_engine.errors import AnswersError, ConfigError, DataError, DiskFull, RubricEngineError, disk_full
from rubric_engine.record.summary import Summary
from rubric_engine.text.surrogates import surrogate_path

__all__ = [
    "naming_full_disk",
    "close_naming_full_disk",
    "ANSWERS_FILE",
    "SAMPLES_FILE",
    "SUMMARY_FILE",
    "SPEC_FILE",
    "SUMMARY_SCHEMA_VERSION",
    "MANIFEST_FILE",
    "REPORT_FILE",
    "CALIBRATION_FILE",
    "ERROR_FILE",
    "REJECTED_FILE",
    "GENERATE_JOURNAL",
    "RERUN",
    "LOCK_FILE",
    "RunLock",
    "LogFile",
    "open_nofollow",
    "spec_hash",
    "read_manifest",
    "begin_run",
    "finish_run",
    "discard_untouched",
    "untouched",
    "write_json",
    "write_text",
    "write_jsonl",
    "read_jsonl",
    "iter_jsonl",
    "read_summary",
    "read_json",
    "read_answers",
]

ANSWERS_FILE = "answers.jsonl"
SAMPLES_FILE = "samples.jsonl"
SUMMARY_FILE = "summary.json"
SPEC_FILE = "spec.resolved.json"
MANIFEST_FILE = "manifest.json"
REPORT_FILE = "report.html"  # the run's own page (report/run_page.py)
CALIBRATION_FILE = "calibration.json"  # `calibrate`: the human-corrected score, beside summary.json
ERROR_FILE = "error.txt"  # what the command line leaves in a sweep job dir whose run failed
REJECTED_FILE = "rejected.txt"  # ... whose run was rejected before it wrote anything (bad spec, key, value)
GENERATE_JOURNAL = "answers.journal.jsonl"  # stage=generate's journal; it becomes answers.jsonl
RERUN = "re-run or re-score this run directory"  # the fix for a run directory that cannot be read
SUMMARY_SCHEMA_VERSION = 1
LOCK_FILE = ".rubric-engine.lock"
_RUN_FILES = (ANSWERS_FILE, SAMPLES_FILE, SUMMARY_FILE)


@contextlib.contextmanager
def naming_full_disk(path: Path) -> Iterator[None]:
    """Around a write to `path`: a full disk (ENOSPC, EDQUOT) becomes `DiskFull` naming `path`, since an error
    of a write to an open file names no file, and the user must know which disk to free."""
    try:
        yield
    except OSError as exc:
        if disk_full(exc):
            raise DiskFull(path) from exc
        raise


def close_naming_full_disk(fh: Any, path: Path, sync: Any) -> None:
    """Close a buffered append-only file after `sync()` (its flush and fsync); the file is closed even when
    the sync fails, and a full disk is `DiskFull` naming `path`."""
    if fh.closed:
        return
    with naming_full_disk(path):
        try:
            sync()
        finally:
            with contextlib.suppress(OSError):  # the sync's own error is the one reported
                fh.close()


def open_nofollow(path: Path, flags: int, mode: int = 0o644) -> int:
    """os.open that never follows a symbolic link at `path` (O_NOFOLLOW): a run directory prepared by
    someone else must not turn a run file into a write to ~/.bashrc. A link is one ConfigError line."""
    try:
        return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (os.path.islink(path) and exc.errno in (errno.EMLINK, errno.EEXIST)):
            raise ConfigError(f"{path} is a symbolic link; a run writes only its own files: remove the link "
                              "or use a new directory (hydra.run.dir=...)") from None
        raise


class RunLock:
    """One process owns a run directory: an exclusive flock on `<dir>/.rubric-engine.lock` for the whole run.

    Why: two identical commands into one directory would both pay every call and interleave the journal.
    The lock file holds the owner's pid (named in the refusal); the OS releases the lock when the process
    ends however it ends, so the same command resumes afterwards. A run that ends (finished, failed,
    interrupted) removes the file while it still holds the lock, so a finished run directory holds no lock
    file; a process that opened the file just before it was removed, and locks it just after, holds a lock
    on a file no longer there: it checks that the path still names the file it locked, and else tries
    again on a fresh one. Only a process killed with -9 leaves the file (unlocked: `view` reads it so)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir, self._fd = Path(run_dir), -1

    def __enter__(self) -> "RunLock":
        try:
            import fcntl
        except ImportError:  # no flock on this platform: nothing to lock with
            return self
        self.run_dir.mkdir(parents=True, exist_ok=True)
        path = self.run_dir / LOCK_FILE
        while True:
            fd = open_nofollow(path, os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.read(fd, 32).decode("ascii", "replace").strip()
                os.close(fd)
                who = f" (pid {holder})" if holder.isdigit() else ""
                raise ConfigError(f"{self.run_dir} is in use by another rubric-engine process{who}; wait for it to "
                                  "end (the same command then resumes), or use another directory "
                                  "(hydra.run.dir=...)") from None
            try:
                same = os.path.samestat(os.fstat(fd), os.lstat(path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # removed by the owner that just ended: lock the file that is there now
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        self._fd = fd
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._fd >= 0:
            try:
                (self.run_dir / LOCK_FILE).unlink()  # still ours: removed before the lock is let go
            except OSError:  # already gone with its directory (discard_untouched), or not removable
                pass
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = -1


_LOG_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _escape_line(text: str) -> str:
    """Control characters (newlines included) as visible escapes: a logged value cannot start a new line."""
    return _LOG_UNSAFE.sub(lambda m: m.group().encode("unicode_escape", "backslashreplace").decode("ascii")
                           if m.group() < "\ud800" else f"\\u{ord(m.group()):04x}", text)


class LogFile(logging.FileHandler):
    """rubric-engine.log (Hydra's job_logging names this class): opened without following a planted
    symbolic link, and one record is one line whatever its fields hold (a spec name with a newline)."""

    def _open(self):  # type: ignore[no-untyped-def]
        fd = open_nofollow(Path(self.baseFilename), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        return os.fdopen(fd, "a", encoding=self.encoding or "utf-8", errors=self.errors)

    def format(self, record: logging.LogRecord) -> str:
        return _escape_line(super().format(record))


def spec_hash(resolved: Mapping[str, Any], templates: Mapping[str, str]) -> str:
    """sha256 of the resolved spec (without where its files live) and its templates' text: two runs
    with the same hash were scored by the same rules and prompts."""
    body = {k: v for k, v in resolved.items() if k != "_files"}
    text = json.dumps({"spec": body, "templates": dict(sorted(templates.items()))}, sort_keys=True,
                      ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    """The run's manifest, or None when the directory has none (runs made before manifests existed)."""
    path = Path(run_dir) / MANIFEST_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return {"state": "unreadable"}
    return data if isinstance(data, dict) else {"state": "unreadable"}


def begin_run(run_dir: Path, identity: Mapping[str, Any]) -> dict[str, Any]:
    """Claim `run_dir` for this run: write the manifest (state running) before anything else.

    A directory holding another run's files is refused: the same run resuming (same identity: benchmark,
    spec hash, models, selection, stage) may continue, anything else would mix two runs' files."""
    run_dir = Path(run_dir)
    links = sorted(e.name for e in os.scandir(run_dir) if e.is_symlink()) if run_dir.is_dir() else []
    if links:
        raise ConfigError(f"{run_dir} holds symbolic links ({', '.join(links[:3])}); a run writes only its own "
                          "files: remove them or use a new directory (hydra.run.dir=...)")
    old = read_manifest(run_dir)
    if old is not None:
        mine = {k: old.get(k) for k in identity}
        if mine != dict(identity):
            differ = ", ".join(k for k in identity if old.get(k) != identity[k])
            raise ConfigError(f"{run_dir} holds another run (differs in: {differ}); use a new directory "
                              "(hydra.run.dir=...) or remove that one")
    elif any((run_dir / f).exists() for f in _RUN_FILES):
        raise ConfigError(f"{run_dir} holds files of an earlier run without a manifest; use a new directory "
                          "(hydra.run.dir=...) or remove that one")
    manifest = {**dict(identity), "run_id": (old or {}).get("run_id") or uuid.uuid4().hex[:12],
                "state": "running", "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "resumed": old is not None}
    write_json(run_dir / MANIFEST_FILE, manifest)
    return manifest


def finish_run(run_dir: Path, manifest: Mapping[str, Any]) -> None:
    """Mark the run complete: written last, after every other file."""
    write_json(Path(run_dir) / MANIFEST_FILE, {**dict(manifest), "state": "complete",
                                               "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")})


# what Hydra writes into a run directory before the engine runs, and the run's lock file (taken before
# anything is read): a run rejected before it wrote anything leaves only these, and its directory is
# removed (discard_untouched)
_HYDRA_ONLY = frozenset({".hydra", "rubric-engine.log", LOCK_FILE})


def untouched(run_dir: Path) -> bool:
    """True when the directory holds nothing the engine wrote (only what Hydra writes before a job runs)."""
    try:
        return {p.name for p in Path(run_dir).iterdir()} <= _HYDRA_ONLY
    except OSError:
        return False


def discard_untouched(run_dir: Path) -> bool:
    """Remove the directory of a run rejected before it wrote anything (a typo, a missing key, a bad spec),
    so no empty run is left for a leaderboard to list as unfinished. Only a directory holding nothing but
    Hydra's `.hydra/`, the log and the lock file is removed (never earlier results, a resumed run's files,
    the working directory or one above it, nor a directory another process holds the lock of: a run
    refused because the directory is in use must not remove it); in the default layout
    outputs/<benchmark>/<time>/ the parents go too when that leaves them empty. True when removed."""
    import shutil

    run_dir = Path(run_dir)
    try:
        here = Path.cwd().resolve()
        if not untouched(run_dir) or run_dir.resolve() in (here, *here.parents):
            return False
        with RunLock(run_dir):  # refused (ConfigError) while another process owns the directory
            if not untouched(run_dir):
                return False
            shutil.rmtree(run_dir)
        if run_dir.resolve().parent.parent.name == "outputs":
            for parent in (run_dir.parent, run_dir.parent.parent):
                if parent.resolve() in (here, *here.parents) or any(parent.iterdir()):
                    break
                parent.rmdir()
    except (OSError, ConfigError):
        return False
    return True


def write_json(path: Path, obj: Any) -> None:
    """Write atomically (temp file + rename) so a kill never leaves half a summary behind."""
    write_text(path, json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def write_text(path: Path, text: str, *, bom: bool = False, fsync: bool = False) -> None:
    """Write `text` atomically (write_lines); `bom` starts the file with a UTF-8 BOM, which lets spreadsheets
    detect UTF-8 in a CSV."""
    write_lines(path, (text,), bom=bom, fsync=fsync)


def write_lines(path: Path, lines: Iterable[str], *, bom: bool = False, fsync: bool = False,
                errors: str = "strict") -> None:
    """The one atomic writer (temp file + rename): a kill never leaves half a file. `lines` are written as
    they come (a generator keeps one line in memory); `fsync` makes the content durable before the rename,
    for a file that replaces the run's journal (a power cut must leave one or the other, whole); `errors`:
    the encoder's ("surrogatepass" for a file written so: the transcripts)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with naming_full_disk(path):  # a full disk: the one line names this file
        _write_lines(path, lines, bom=bom, fsync=fsync, errors=errors)


def _write_lines(path: Path, lines: Iterable[str], *, bom: bool, fsync: bool, errors: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8-sig" if bom else "utf-8", newline="", errors=errors) as fh:
            for line in lines:
                fh.write(line)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


MAX_LINE_BYTES = 64 * 1024 * 1024  # one JSONL row; `answers=/dev/zero` must stop, not fill the memory
MAX_FILE_BYTES = 2 * 1024 * 1024 * 1024


def _jsonl_error(error: type[RubricEngineError], path: Path, line: int | None, message: str,
                 fix: str) -> RubricEngineError:
    """`error` naming file, line and fix: a DataError takes them as fields, any other class as one message."""
    if issubclass(error, DataError):
        return error(str(path), message, line=line, fix=fix)
    where = f"{path}:{line}" if line is not None else str(path)
    return error(f"{where}: {message}" + (f"; {fix}" if fix else ""))


def iter_jsonl(path: Path, *, error: type[RubricEngineError] = AnswersError,
               fix: str = "each line must be one JSON object") -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, row) for each non-blank line of a JSON Lines file, read one line at a time.

    The one JSONL reader of the engine (answers, samples, labels): rows are split on "\\n" only (a reply
    may hold U+2028, U+2029 or U+0085, which str.splitlines() would treat as line ends); a UTF-8 BOM is
    accepted; reading stops with one line past a size bound. A bad row raises `error` (AnswersError by
    default; a DataError subclass gets file, line and `fix` as its fields) naming the file and line."""
    total = 0
    try:
        with open(path, "rb") as fh:
            for n in itertools.count(1):
                raw = fh.readline(MAX_LINE_BYTES + 1)
                if not raw:
                    break
                total += len(raw)
                if len(raw) > MAX_LINE_BYTES or total > MAX_FILE_BYTES:
                    raise _jsonl_error(error, path, n, f"the file is larger than this reader allows "
                                       f"({MAX_LINE_BYTES // 2**20} MB per line, {MAX_FILE_BYTES // 2**30} GB in all)",
                                       "is it the right file?")
                line = raw.decode("utf-8")
                if n == 1:
                    line = line.lstrip("\ufeff")
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise _jsonl_error(error, path, n, f"not valid JSON ({exc.msg})", fix) from None
                if not isinstance(row, dict):
                    raise _jsonl_error(error, path, n, f"expected a JSON object, got {type(row).__name__}", fix)
                bad = surrogate_path(row, line)
                if bad is not None:
                    raise _jsonl_error(error, path, n, f"{bad}: an unpaired UTF-16 surrogate (such as \\ud800), "
                                       "which is not valid Unicode", "fix or remove that character")
                yield n, row
    except (OSError, UnicodeDecodeError) as exc:
        raise _jsonl_error(error, path, None, f"cannot read the file ({exc.__class__.__name__}: {exc})",
                           "") from None


def read_jsonl(path: Path, *, error: type[RubricEngineError] = AnswersError,
               fix: str = "each line must be one JSON object") -> list[dict[str, Any]]:
    """Every row of a JSON Lines file (see iter_jsonl for the checks and the error raised)."""
    return [row for _, row in iter_jsonl(path, error=error, fix=fix)]


def read_json(path: Path, what: str) -> dict[str, Any]:
    """A run directory's JSON file (summary.json, spec.resolved.json) as a dict; DataError naming the file when
    it is missing, not JSON or not an object. `what` names the file in the message."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(str(path), f"missing {what}", fix=RERUN) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(str(path), f"not valid JSON ({exc})", fix=RERUN) from None
    if not isinstance(data, dict):
        raise DataError(str(path), f"expected a JSON object, got {type(data).__name__}")
    return data


def read_summary(run_dir: Path) -> Summary:
    """A run directory's summary.json, typed (record/summary.py; read_json: DataError when it cannot be read)."""
    return cast(Summary, read_json(Path(run_dir) / SUMMARY_FILE, SUMMARY_FILE))


def read_answers(path: Path, id_field: str, known_ids: Iterable[str]) -> dict[str, str | None]:
    """Map question id -> response from an answers file; ids the benchmark lacks are an error.

    A row whose response is missing, null or blank maps to None: the runner records it as a
    missing answer (counted), never as an empty reply to be judged.
    """
    path = Path(path)
    if path.is_dir():
        raise AnswersError(f"{path}: is a directory; for an earlier run use from_run={path}")
    known = set(known_ids)
    out: dict[str, str | None] = {}
    for n, row in enumerate(read_jsonl(path), 1):
        qid = row.get(id_field)
        if isinstance(qid, int) and not isinstance(qid, bool):
            qid = str(qid)  # ids are compared as strings everywhere: 7 in a file is question "7"
        if not isinstance(qid, str) or not qid:
            raise AnswersError(f"{path}: row {n}: no '{id_field}' field; answers rows are the benchmark's rows plus 'response'")
        if "response" not in row:
            raise AnswersError(f"{path}: row {n} ({qid}): no 'response' field; add the candidate's reply as 'response'")
        if qid in out:
            raise AnswersError(f"{path}: row {n}: duplicate {id_field} {qid!r}")
        resp = row["response"]
        if resp is not None and not isinstance(resp, str):
            raise AnswersError(f"{path}: row {n} ({qid}): 'response' must be a string or null, got {type(resp).__name__}")
        out[qid] = resp if resp and resp.strip() else None
    unknown = sorted(set(out) - known)
    if unknown:
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        raise AnswersError(f"{path}: {len(unknown)} id(s) not in this benchmark's data: {shown}; is it the right benchmark?")
    return out
