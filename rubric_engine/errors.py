"""The exception tree. Every error the engine raises on purpose derives from `RubricEngineError`.

    RubricEngineError            root: catch this to catch everything below
    ├── SpecError                a benchmark spec file is wrong (file, key path, value, fix)
    ├── DataError                a data file is wrong (file, line, what, fix)
    ├── ConfigError              a run configuration / override / CLI argument is wrong
    ├── ModelCallError           a model call failed (model, status, attempts)
    │   └── FatalModelError      retrying cannot help (401, 404, 400, context too long)
    ├── AnswersError             an answers file for score-only runs is wrong
    ├── CacheError               the durable call cache cannot be opened, read or written
    ├── DiskFull                 a file of the run could not be written: no space left (the file, the fix)
    └── NothingScored            a run finished but scored nothing (the Python API's exit 1: evaluate())

Messages are one line a user can act on; the attributes carry the same facts for code.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "RubricEngineError",
    "SpecError",
    "DataError",
    "ConfigError",
    "ModelCallError",
    "FatalModelError",
    "AnswersError",
    "CacheError",
    "DiskFull",
    "disk_full",
    "NothingScored",
]


class RubricEngineError(Exception):
    """Root of every error the engine raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        # picklable whatever a subclass's constructor takes: a Ray actor or task raises it to its caller, which
        # must get the same error (type, one-line message, attributes), not a failure to unpickle it
        return (_restored, (type(self), self.args, self.__dict__))


def _restored(cls: type[RubricEngineError], args: tuple[Any, ...], state: dict[str, Any]) -> RubricEngineError:
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class SpecError(RubricEngineError):
    """A benchmark spec is invalid: names the file, the key path, the bad value and the fix."""

    def __init__(self, file: str, key_path: str, message: str, *, value: Any = None, fix: str = "") -> None:
        self.file, self.key_path, self.value, self.fix = str(file), key_path, value, fix
        text = f"{self.file}: {key_path or '<root>'}: {message}"
        if value is not None:
            text += f" (got {value!r})"
        if fix:
            text += f"; {fix}"
        super().__init__(text)


class DataError(RubricEngineError):
    """A data file is invalid: names the file, the 1-based line (if any) and the fix."""

    def __init__(self, file: str, message: str, *, line: int | None = None, fix: str = "") -> None:
        self.file, self.line, self.fix, self.message = str(file), line, fix, message
        where = f"{self.file}:{line}" if line is not None else self.file
        super().__init__(f"{where}: {message}" + (f"; {fix}" if fix else ""))


class ConfigError(RubricEngineError):
    """A run configuration, override or command-line argument is invalid."""


class AnswersError(RubricEngineError):
    """An answers file given for a score-only run is unreadable or does not match the benchmark."""


class CacheError(RubricEngineError):
    """The durable call cache failed; raised rather than losing a paid-for answer silently."""


class DiskFull(RubricEngineError):
    """A run's file could not be written because its disk (or quota) is full. `path`: that file; `kept`: what
    became of the answers that arrived while the run stopped (filled in by the run, one clause)."""

    def __init__(self, path: Any, kept: str = "") -> None:
        super().__init__()
        self.path, self.kept = str(path), kept

    def __str__(self) -> str:
        return (f"no space left on the disk holding {self.path}: could not write it; free space there, then run the "
                f"same command again (a run resumes where it stopped){'; ' + self.kept if self.kept else ''}")


class NothingScored(RubricEngineError):
    """A run finished but scored nothing (every question a candidate or judge error): what the command line ends
    with exit 1 for. `reason`: the one line why; `run_dir`: the run's directory (samples.jsonl holds each error);
    `summary`: its summary.json. The same run with `retry_errors=True` asks the failed questions again."""

    def __init__(self, reason: str, run_dir: Any, summary: Any) -> None:
        super().__init__(f"{reason}; run directory {run_dir} (the same call with run_dir= it and retry_errors=True "
                         "asks the failed questions again)")
        self.reason, self.run_dir, self.summary = reason, run_dir, summary


def disk_full(exc: BaseException) -> bool:
    """True for the OS's "no space left" (ENOSPC) and "quota exceeded" (EDQUOT) errors."""
    import errno

    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


class ModelCallError(RubricEngineError):
    """A model call failed after the retries it was allowed."""

    def __init__(self, model: str, message: str, *, status: int | None = None, attempts: int = 1) -> None:
        self.model, self.status, self.attempts = model, status, attempts
        code = f" [HTTP {status}]" if status is not None else ""
        super().__init__(f"{model}{code}: {message} (after {attempts} attempt{'s' if attempts != 1 else ''})")


class FatalModelError(ModelCallError):
    """A model call failed in a way retrying cannot fix: bad key, unknown model, bad request.

    `stops_run` says whether the same failure would hit every question (bad key, no access, unknown
    model, no server): then the run stops. Otherwise (400 content filter, 413, 422, context window) the
    failure belongs to this one question and is recorded against it while the run goes on."""

    STOPS_RUN_STATUSES = frozenset({401, 403, 404})

    def __init__(self, model: str, message: str, *, status: int | None = None, attempts: int = 1,
                 stops_run: bool | None = None) -> None:
        super().__init__(model, message, status=status, attempts=attempts)
        self.stops_run = (status is None or status in self.STOPS_RUN_STATUSES) if stops_run is None else stops_run
