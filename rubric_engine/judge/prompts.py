"""Prompt construction: the candidate and judge messages, rendered from the spec's jinja2 templates.

Why templates: the wording of a benchmark's prompts (language, persona, rubric layout) belongs to the
benchmark, not to the engine; the engine only supplies neutral variables. StrictUndefined makes a typo in
a template a loud `SpecError` naming the file and the variable instead of a silently empty prompt.

Template variables
  candidate template: `dialogue`, `question`, `reference`, `choices` (multiple choice: list of {letter, text};
                      [] otherwise)
  judge template (judge.verdict.granularity all_criteria): `dialogue`, `question`, `response`, `reference`,
                      `criteria`, `n_criteria`, `tag`
  judge template (per_criterion): `dialogue`, `question`, `response`, `reference`, `criterion` (one item), `tag`
  judge template (judge.verdict.kind pairwise): `dialogue`, `question`, `reference`, `response_a`, `response_b`, `tag`
  judge templates also get `transcript`: the conversation a scripted / simulated run generated ({role, content};
                      [] for a single reply; each content's lines after the first indented by two spaces, so a
                      reply cannot write a line that reads as a new turn: `turn_text`); the simulator's
                      templates: see judge/dialogue.py
  judge template (judge.verdict.kind score): also `turn` (the candidate turn graded, 1-based) and `references`
                      (the per-turn references, [] when none); under judge.scope each_turn `transcript` ends with
                      the graded reply, and `reference` is the graded turn's own when the data gives one per turn
  `tag`: a suffix derived from the response and dialogue; wrap untrusted text in `<response-{{ tag }}>` ...
         `</response-{{ tag }}>` so a reply cannot close the wrapper and speak as the judge's instructions.
  `dialogue`: list of {role: 'system'|'user'|'assistant'|'other' (per spec.data.roles), speaker: the data's
              role label as is, content}
  `criteria`: list of {index (1..n), label, weight (int when integral, None when the data has none), text,
              ability, rule, tags} — ALL items, ability items and failure-rule items alike, in data order.
  `reference`: the row's reference answer (data.fields.reference), "" when none.

`chat_turns` mode: every dialogue turn becomes a chat message (system -> "system", user -> "user",
assistant and other -> "assistant"); the
candidate template, if set, is rendered (with the same variables) into an extra system message placed
after `candidate.system`, so a benchmark can add an instruction without touching the turns.

The judge template must itself describe the verdict JSON (see rubric_engine.judge.grading): when a server refuses
response_format json_schema, the judge falls back to instructed JSON and the prompt is all the model sees.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from rubric_engine.datatypes import Criterion, Question
from rubric_engine.errors import DataError, SpecError
from rubric_engine.spec.limits import MAX_PROMPT_CHARS, RENDER_SECONDS

if TYPE_CHECKING:  # spec/schema.py imports nothing from here; this keeps the import graph one-way
    from rubric_engine.spec.schema import BenchmarkSpec

__all__ = ["candidate_messages", "judge_messages", "PROMPT_ERRORS", "unrenderable", "pair_messages", "dialogue_vars",
           "criteria_vars", "render_template", "data_tag", "choice_vars", "turn_text", "time_limit", "RenderTimeout"]

# Specs are shared by strangers: templates render sandboxed (no attribute walks to Python internals, no
# mutation of the engine's objects) and an undefined variable is an error, never an empty string.
_ENV = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
MAX_OUTPUT_CHARS = MAX_PROMPT_CHARS  # a rendered prompt longer than this is a runaway template, not a prompt
_CACHE: dict[tuple[str, str], jinja2.Template] = {}
_LOCK = threading.Lock()
_CHAT_ROLES = {"system": "system", "user": "user", "assistant": "assistant", "other": "assistant"}
_TEMPLATE_FIELDS: dict[str, Callable[["BenchmarkSpec"], str | None]] = {  # a field name -> what it holds
    "candidate.template": lambda s: s.candidate.template, "candidate.system": lambda s: s.candidate.system,
    "judge.template": lambda s: s.judge.template, "judge.system": lambda s: s.judge.system,
    "conversation.simulator.system": lambda s: s.conversation.simulator and s.conversation.simulator.system,
    "conversation.simulator.template": lambda s: s.conversation.simulator and s.conversation.simulator.template}


def _template(spec: "BenchmarkSpec", field: str) -> tuple[jinja2.Template, Path]:
    """Compiled template, cached per resolved file: specs and their templates don't change during a run."""
    path = spec.template_path(field)
    key = (str(path.parent), path.name)
    with _LOCK:
        cached = _CACHE.get(key)
    if cached is not None:
        return cached, path
    source = spec.read_template(field)
    try:
        template = _ENV.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise SpecError(f"{path}:{exc.lineno}", field, f"template syntax error: {exc.message}",
                        fix="fix the jinja2 syntax") from exc
    with _LOCK:
        _CACHE[key] = template
    return template, path


class RenderTimeout(Exception):
    """A template ran past RENDER_SECONDS (raised inside its own code, so the render stops where it is)."""


@contextmanager
def time_limit(seconds: float = RENDER_SECONDS) -> Iterator[None]:
    """Bound the time a rendering takes: a trace function on this thread counts the lines of template code run
    (jinja2 compiles a template to Python whose file is '<template>'; every loop iteration is a line) and raises
    RenderTimeout inside the template once `seconds` have passed, checked every 4,096 lines. Only template frames
    are traced, so the engine's own code runs at full speed; the rendering stops in its own thread, in `validate`
    and inside an async run alike. A tracer already installed (a debugger, coverage) is left alone, unbounded."""
    if sys.gettrace() is not None:
        yield
        return
    deadline, count = time.monotonic() + seconds, [0]

    def line(frame: Any, event: str, arg: Any) -> Any:
        count[0] += 1
        if count[0] & 4095 == 0 and time.monotonic() > deadline:
            raise RenderTimeout
        return line

    def call(frame: Any, event: str, arg: Any) -> Any:
        return line if frame.f_code.co_filename == "<template>" else None

    sys.settrace(call)
    try:
        yield
    finally:
        sys.settrace(None)


def render_template(spec: "BenchmarkSpec", field: str, variables: dict[str, Any]) -> str:
    """Render the template a spec field names ('judge.template'); an undefined variable becomes a
    SpecError naming the file and the variable."""
    if not _TEMPLATE_FIELDS[field](spec):
        raise SpecError(_spec_file(spec), field, "no template set", fix=f"set {field} to a jinja2 file")
    template, path = _template(spec, field)
    try:
        with time_limit():
            text = template.render(**variables)
    except RenderTimeout:
        raise SpecError(str(path), field, f"template rendering ran past the limit of {RENDER_SECONDS:g} s",
                        fix="a template only lays out its variables: check its loops") from None
    except SecurityError as exc:
        raise SpecError(f"{path}{_line(exc)}", field, f"template tried something the sandbox forbids: {exc}",
                        fix="templates may only read the variables they are given") from None
    except jinja2.UndefinedError as exc:
        known = ", ".join(sorted(variables))
        raise SpecError(f"{path}{_line(exc)}", field, f"template uses an undefined variable: {exc.message}",
                        fix=f"available variables: {known}") from None
    except jinja2.TemplateError as exc:
        raise SpecError(f"{path}{_line(exc)}", field, f"template failed to render: {exc}") from None
    except (OverflowError, MemoryError, RecursionError, TypeError, ValueError, ArithmeticError, LookupError) as exc:
        raise SpecError(f"{path}{_line(exc)}", field, f"template failed to render ({type(exc).__name__}: {exc})",
                        fix="simplify the template") from None
    if len(text) > MAX_OUTPUT_CHARS:
        given = _data_chars(variables)
        if given * 2 >= len(text):  # most of the prompt is the question's own text: the data is at fault
            question = variables.get("question")
            raise DataError(f"question {getattr(question, 'id', '?')}", f"its dialogue, reply and reference come "
                            f"to {given} characters, and the prompt ({field}) to {len(text)}, over the limit of "
                            f"{MAX_OUTPUT_CHARS}", fix="leave the question out (ids=...) or shorten it in the data")
        raise SpecError(str(path), field, f"template rendered {len(text)} characters (limit {MAX_OUTPUT_CHARS})",
                        fix="a prompt is far shorter; check loops in the template")
    return text


PROMPT_ERRORS = (SpecError, DataError)  # what rendering one row's prompt may raise (a template, an oversized row)


def unrenderable(exc: Exception) -> str:
    """A judge prompt that cannot be made for one row (a template failing on that row's text only, or the row
    with its reply past the prompt limit): that question's judge error, naming the template; the run goes on."""
    return f"the judge prompt could not be made for this question: {exc}"


def _data_chars(variables: dict[str, Any]) -> int:
    """Characters of the question's own text among the variables (dialogue turns, the conversation's transcript,
    reply, reference)."""
    turns = [*(variables.get("dialogue") or []), *(variables.get("transcript") or [])]
    texts = [t.get("content") for t in turns if isinstance(t, dict)]
    texts += [variables.get("response"), variables.get("reference")]
    return sum(len(t) for t in texts if isinstance(t, str))


def _line(exc: BaseException) -> str:
    """':<line>' of the template frame in the traceback (jinja2 maps it to the template source)."""
    tb, line = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return f":{line}" if line else ""


def _role_of(spec: "BenchmarkSpec", label: str) -> str:
    roles = dict(spec.data.roles)
    role = roles.get(label)
    if role not in _CHAT_ROLES:
        raise SpecError(_spec_file(spec), "data.roles", f"dialogue role label {label!r} has no mapping",
                        value=roles, fix=f"add {label!r}: system|user|assistant|other to data.roles")
    return str(role)


def _spec_file(spec: "BenchmarkSpec") -> str:
    return str(spec.files[-1]) if spec.files else str(spec.dir)


def dialogue_vars(spec: "BenchmarkSpec", question: Question) -> list[dict[str, str]]:
    """Dialogue turns as template variables; speaker is the data's label so prompts match the paper."""
    return [{"role": _role_of(spec, t.role), "speaker": t.role, "content": t.content} for t in question.dialogue]


def _weight(value: float | None) -> int | float | None:
    """4.0 -> 4 so prompts show weights as the data writes them."""
    if value is None:
        return None
    return int(value) if float(value).is_integer() else float(value)


def criteria_vars(criteria: tuple[Criterion, ...] | list[Criterion]) -> list[dict[str, Any]]:
    """All criteria numbered 1..n in data order (the numbers the judge must answer with)."""
    return [
        {"index": i, "label": c.label, "weight": _weight(c.weight), "text": c.text, "ability": c.ability,
         "rule": c.rule, "tags": list(c.tags)}
        for i, c in enumerate(criteria, start=1)
    ]


def _system(spec: "BenchmarkSpec", field: str, variables: dict[str, Any]) -> list[dict[str, str]]:
    """A system message from an optional template field ([] when the field is unset)."""
    if not _TEMPLATE_FIELDS[field](spec):
        return []
    return [{"role": "system", "content": render_template(spec, field, variables)}]


def choice_vars(question: Question) -> list[dict[str, str]]:
    """A multiple-choice question's options as {letter, text}, lettered A, B, ... ([] for other questions)."""
    return [{"letter": chr(ord("A") + i), "text": t} for i, t in enumerate(question.choices)]


def candidate_messages(spec: "BenchmarkSpec", question: Question, mode: str | None = None) -> list[dict[str, str]]:
    """Messages for the model under test, per spec.candidate.mode (see module docstring); `mode` overrides it
    (a conversation's prefix is always built as chat_turns: judge/dialogue.py)."""
    variables: dict[str, Any] = {"dialogue": dialogue_vars(spec, question), "question": question,
                                 "reference": question.reference, "choices": choice_vars(question)}
    messages = _system(spec, "candidate.system", variables)
    mode = mode or spec.candidate.mode
    if mode == "single_message":
        content = render_template(spec, "candidate.template", variables)
        return messages + [{"role": "user", "content": content}]
    if mode == "chat_turns":
        messages += _system(spec, "candidate.template", variables)
        turns = [{"role": _CHAT_ROLES[t["role"]], "content": t["content"]} for t in variables["dialogue"]]
        return messages + turns
    raise SpecError(_spec_file(spec), "candidate.mode", "unknown candidate mode", value=mode,
                    fix="use single_message or chat_turns")


def data_tag(*texts: str) -> str:
    """A suffix for the tags that wrap untrusted text in the judge prompt (`<response-{tag}>`).

    Derived from the wrapped text itself, so it is stable (the cache key stays the same on resume) yet
    the text cannot contain its own closing tag: it would have to contain a hash of itself."""
    digest = hashlib.sha256("\x00".join(texts).encode("utf-8")).hexdigest()
    size = 12
    while any(digest[:size] in t for t in texts) and size < len(digest):
        size += 4
    return digest[:size]


def turn_text(content: str) -> str:
    """A conversation turn's text as the judge's templates quote it: every line after the first indented by two
    spaces, so only the template's own turn lines (`[user] ...`, `Client: ...`) start at the line's beginning,
    and a reply writing its own `Client:` or `[user]` lines (or a closing tag) stays visibly inside its turn."""
    return content.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\n  ")


def judge_messages(spec: "BenchmarkSpec", question: Question, response: str,
                   criterion: int | None = None, transcript: Sequence[Mapping[str, str]] | None = None,
                   extra: dict[str, Any] | None = None) -> list[dict[str, str]]:
    """Messages for the judge: optional system + one user message with every criterion numbered 1..n, or,
    with `criterion` (a 1-based index; per_criterion judging), with that one criterion only. `transcript`: the
    conversation a multi-turn run generated ({role, content} list; [] for a single reply), its text inside the tag.
    `extra`: more variables (scores on a scale: `turn`, `references`, `reference`; judge/scores.py)."""
    criteria = criteria_vars(question.criteria)
    dialogue = dialogue_vars(spec, question)
    said = [t["content"] for t in transcript or ()]
    variables: dict[str, Any] = {
        "dialogue": dialogue,
        "question": question,
        "response": response,
        "reference": question.reference,
        "transcript": [{"role": t["role"], "content": turn_text(t["content"])} for t in transcript or ()],
        "tag": data_tag(response, *(t["content"] for t in dialogue), *said),
    }
    if criterion is None:
        variables.update(criteria=criteria, n_criteria=len(criteria))
    else:
        variables["criterion"] = criteria[criterion - 1]
    if extra:
        variables.update(extra)
    messages = _system(spec, "judge.system", variables)
    content = render_template(spec, "judge.template", variables)
    return messages + [{"role": "user", "content": content}]


def pair_messages(spec: "BenchmarkSpec", question: Question, response_a: str, response_b: str) -> list[dict[str, str]]:
    """Messages for a pairwise judge (judge.verdict.kind: pairwise): the two replies as `response_a` and
    `response_b`, each to be wrapped in `<response-{{ tag }}>`-style tags like a single reply."""
    dialogue = dialogue_vars(spec, question)
    variables: dict[str, Any] = {"dialogue": dialogue, "question": question, "reference": question.reference,
                                 "response_a": response_a, "response_b": response_b,
                                 "tag": data_tag(response_a, response_b, *(t["content"] for t in dialogue))}
    return _system(spec, "judge.system", variables) + [
        {"role": "user", "content": render_template(spec, "judge.template", variables)}]

