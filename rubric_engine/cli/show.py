"""`rubric-engine show RUN_DIR QUESTION` and `rubric-engine prompts benchmark=... question=ID`.

Why together: both answer "what did (or will) the models see for this question?" `show` reads a finished or
interrupted run directory (its record and transcripts/), `prompts` renders a question's candidate and judge prompts
from the spec and data without calling anything (LiteLLM is never imported). Both print plain text as it is,
never wrapped, so it can be redirected or piped whole.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubric_engine.errors import ConfigError

__all__ = ["show_command", "prompts_command", "REPLY_PLACEHOLDER"]

from rubric_engine.shapes.plan import REPLY_PLACEHOLDER

if TYPE_CHECKING:
    from rubric_engine.record.types import Record


def _find_record(run_dir: Path, question: str) -> Record | None:
    """The question's record from samples.jsonl (or the journal of a run still going), decoded; None when absent."""
    from rubric_engine.record.codec import decode
    from rubric_engine.store import layout

    for name in (layout.SAMPLES_FILE, layout.GENERATE_JOURNAL, layout.ANSWERS_FILE):
        path = run_dir / name
        if not path.is_file():
            continue
        with path.open("rb") as fh:
            for raw in fh:
                if question.encode("utf-8") not in raw:  # cheap skip: most lines are other questions
                    continue
                try:
                    rec = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(rec, dict) and rec.get("id") == question:
                    return decode(rec, str(path))
    return None


def _write(text: str) -> None:
    """Plain text, never wrapped, with every control character but the line break shown as an escape (replies
    and data are untrusted: an escape sequence must not reach the terminal); a closed pipe ends quietly with
    141 in cli/main.py."""
    from rubric_engine.text.terminal import shown

    sys.stdout.write(shown(text, markup=False, newlines=True))
    sys.stdout.flush()


def show_command(run_dir: Path, question: str) -> int:
    """Print one question's whole story: its record, then every call it made in the order they ended."""
    from rubric_engine.report.calls_view import calls_text
    from rubric_engine.store.layout import MANIFEST_FILE, SAMPLES_FILE
    from rubric_engine.store.transcripts import TRANSCRIPTS_DIR, read_calls

    if not run_dir.is_dir() or not any((run_dir / f).exists() for f in (MANIFEST_FILE, SAMPLES_FILE)):
        raise ConfigError(f"show: {run_dir} is not a run directory (no {MANIFEST_FILE} or {SAMPLES_FILE}); "
                          "pass the directory a run wrote (its `outputs:` line)")
    rec = _find_record(run_dir, question)
    calls = read_calls(run_dir, question)
    if rec is None and not calls:
        if not (run_dir / TRANSCRIPTS_DIR).is_dir():
            raise ConfigError(f"show: question {question!r} is not in {run_dir}, which has no {TRANSCRIPTS_DIR}/ "
                              "either (made by a version that did not record calls); check the id")
        raise ConfigError(f"show: question {question!r} is not in {run_dir}; check the id (the `id` of a line "
                          f"in {SAMPLES_FILE})")
    _write(calls_text(question, rec, calls))
    return 0


def _messages_text(messages: Sequence[dict[str, Any]]) -> list[str]:
    return [f"--- message {i} [{m.get('role')}] ---\n{m.get('content')}" for i, m in enumerate(messages, 1)]


def prompts_command(benchmark: str, benchmark_dirs: Sequence[str], data_path: str | None, cache_dir: str | None,
                    question: str | None, trust_code: bool = False) -> int:
    """Render the candidate's and the judge's prompts for one question, with the reply marked as a placeholder."""
    from rubric_engine.dataset.load import load_dataset
    from rubric_engine.shapes.plan import question_calls
    from rubric_engine.shapes.registry import shape_for
    from rubric_engine.spec.files import benchmark_search_path
    from rubric_engine.spec.load import load_spec

    if not question:
        raise ConfigError("prompts: which question? pass question=ID (an id of the benchmark's data)")
    spec = load_spec(benchmark, benchmark_search_path(benchmark_dirs), trust_code)
    ds = load_dataset(spec, data_path, Path(cache_dir) if cache_dir else None)
    found = next((q for q in ds.questions if q.id == question), None)
    if found is None:
        ids = ", ".join(q.id for q in list(ds.questions)[:5])
        raise ConfigError(f"prompts: no question {question!r} in {spec.name}'s data; ids look like: {ids}")
    calls = question_calls(spec, shape_for(spec), found)  # the plan of calls the dry run counts and the run sends
    out = [f"benchmark {spec.name}, question {found.id}"]
    for request in (calls.candidate, calls.user):
        if request is not None:
            out += ["", f"=== {request.title} ==="] + _messages_text(request.messages)
    if not calls.judge:  # no judge, or every item of this question is checked by the engine
        out += ["", "=== judge: none (every item is checked by the engine) ==="]
    for request in calls.judge:
        out += ["", f"=== {request.title} ==="] + _messages_text(request.messages)
    out += ["", f"note: {REPLY_PLACEHOLDER} stands for the reply; the `tag` around untrusted text is derived from "
                "the real reply, so it differs in the run."]
    _write("\n".join(out) + "\n")
    return 0
