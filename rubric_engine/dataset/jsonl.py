"""The one reader of the side files a spec names beside its data (baseline answers, reference answers).

Why one: each of them is one JSON object a line, blank lines skipped, and a broken line must be the same
one-line error naming the file and line whichever file it is in.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rubric_engine.errors import DataError

__all__ = ["jsonl_rows"]


def jsonl_rows(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed row) for every non-blank line of a UTF-8 JSONL file (a BOM is allowed)."""
    with open(path, encoding="utf-8-sig") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(str(path), f"invalid JSON: {exc.msg}", line=n, fix="one JSON object a line") from None
