"""Which format a data file is read in, and where that was decided: said in every error reading the file.

Why: `data.format` is a spec key like any other, inherited through `extends` or left at its default, while
`data.path` may be set by a child spec or on the command line. A JSONL file under a parent that declared
`format: csv` is read as CSV and fails with an error that never mentions the format ("no rows", "missing
field 'id'"). Every error raised while reading the rows names the format and the file:line that set it (or
"the default"), and a file whose name says another format gets a notice before it is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rubric_engine.errors import DataError

if TYPE_CHECKING:
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["format_source", "name_mismatch", "with_format", "reading", "keyed_rows"]

_T = TypeVar("_T")
_BY_SUFFIX = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv"}


def format_source(spec: BenchmarkSpec) -> str:
    """`data.format csv, set in DIR/benchmark.yaml:12` or `data.format jsonl, the default`."""
    origin = spec.origin("data.format")
    where = f"set in {origin[0]}:{origin[1]}" if origin else "the default"
    return f"data.format {spec.data.format}, {where}"


def name_mismatch(spec: BenchmarkSpec, file: Path) -> str | None:
    """The notice for a file whose name says another format than the one it is read in, or None."""
    named = _BY_SUFFIX.get(file.suffix.lower())
    if named is None or named == spec.data.format:
        return None
    return (f"{file} is read as {spec.data.format} ({format_source(spec)}) though its name says {named}; "
            f"set data.format: {named} in your spec if the file is {named}")


class _Said(DataError):
    """A DataError that already names the format (never said twice)."""


def with_format(exc: DataError, spec: BenchmarkSpec, file: Path) -> DataError:
    """`exc` (raised while reading `file`) saying the format the file was read in and where that came from."""
    if isinstance(exc, _Said):
        return exc
    mismatch = name_mismatch(spec, file)
    said = (f"read as {spec.data.format} though the name says {_BY_SUFFIX[file.suffix.lower()]}: {format_source(spec)}"
            if mismatch else f"read as {format_source(spec)}")
    return _Said(exc.file, f"{exc.message} ({said})", line=exc.line, fix=exc.fix)


@contextmanager
def reading(spec: BenchmarkSpec, file: Path, warnings: list[str]) -> Iterator[Callable[[Iterable[_T]], Iterator[_T]]]:
    """While `file`'s rows are read: a notice first when its name says another format; the rows' parse errors
    (what the context's function wraps) say the format and its source, and when the name says another format
    every error does (a JSONL file read as CSV fails as "missing field 'id'")."""
    mismatch = name_mismatch(spec, file)
    if mismatch:
        warnings.append(mismatch)

    def parsed(records: Iterable[_T]) -> Iterator[_T]:
        try:
            yield from records
        except DataError as exc:
            raise with_format(exc, spec, file) from None

    try:
        yield parsed
    except DataError as exc:
        if mismatch:
            raise with_format(exc, spec, file) from None
        raise


def keyed_rows(parsed: Any, id_field: str) -> Any:
    """A `json` file's rows: an object whose every value is a row object (EQ-Bench's `{"1": {...}, ...}`) becomes
    those rows in file order, each key its row's `id_field` unless the row has one; anything else is returned as
    parsed (an array of rows, or what the reader then refuses)."""
    if isinstance(parsed, dict) and parsed and all(isinstance(row, dict) for row in parsed.values()):
        return [{id_field: key, **row} for key, row in parsed.items()]
    return parsed
