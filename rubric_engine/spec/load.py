"""Loading a benchmark spec: find it, merge its `extends` chain, validate it, and check what pydantic cannot.

Why apart from the schema: the cross-field rules (spec/checks.py) read the schema's models, and loading runs
them; with loading here, the schema imports neither, and every error still names the file, the line, the key
path and the fix.
"""

from __future__ import annotations

import difflib
import os
import re
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import jinja2
from pydantic import BaseModel, ValidationError

from rubric_engine.errors import ConfigError, DataError, SpecError
from rubric_engine.models.entries import FAKING_FIX, PARAMS_FIX, endpoint_params, faking_params
from rubric_engine.spec.checks import check_formula, check_language, check_model, fetchable_url
from rubric_engine.spec.files import (SPEC_FILE, Key, _find, _fmt, _get, _load_chain, _lookup, _split_key,
                                      list_benchmarks)
from rubric_engine.spec.schema import _TEMPLATE_FIELDS, BenchmarkSpec

__all__ = ["load_spec", "load_resolved"]

_ID_RE = re.compile(r"^[a-z][a-z0-9_]*$")


def _model_at(key: Key) -> type[BaseModel] | None:
    """The pydantic model validating the mapping at `key` (to list its allowed keys)."""
    tp: Any = BenchmarkSpec
    for part in (*key, None):
        if get_origin(tp) in (Union, types.UnionType):
            tp = next(a for a in get_args(tp) if a is not type(None))
        if part is None:
            break
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            fields = {(f.alias or n): f.annotation for n, f in tp.model_fields.items()}
            tp = fields.get(str(part))
        else:
            tp = get_args(tp)[-1] if get_origin(tp) in (list, dict) else None
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def _where(origins: Mapping[Key, tuple[Path, int]], key: Key, default: Path) -> str:
    o = _lookup(origins, key)
    return f"{o[0]}:{o[1]}" if o else str(default)


def _pydantic_error(exc: ValidationError, origins: Mapping[Key, tuple[Path, int]], default: Path) -> SpecError:
    e = sorted(exc.errors(), key=lambda err: err["type"] != "extra_forbidden")[0]  # a typo first
    key: Key = tuple(e["loc"])
    where, path = _where(origins, key, default), _fmt(key)
    more = f" (+{exc.error_count() - 1} more problem(s) after this one)" if exc.error_count() > 1 else ""
    if e["type"] == "extra_forbidden":
        model = _model_at(key[:-1])
        allowed = sorted((f.alias or n) for n, f in model.model_fields.items()) if model else []
        close = difflib.get_close_matches(str(key[-1]), allowed, n=1)
        fix = f"allowed keys here: {', '.join(allowed)}" + (f"; did you mean {close[0]!r}?" if close else "")
        return SpecError(where, path, "unknown key", value=key[-1], fix=fix + more)
    if e["type"] == "missing":
        return SpecError(where, path, "required key is missing", fix=f"add `{key[-1]}:` here" + more)
    if e["type"] == "literal_error":
        return SpecError(where, path, "unknown value", value=e["input"],
                         fix=f"allowed: {e.get('ctx', {}).get('expected', '')}" + more)
    return SpecError(where, path, e["msg"], value=e.get("input"), fix="see the spec layout in docs/authoring.md" + more)


def _check(spec: BenchmarkSpec, origins: Mapping[Key, tuple[Path, int]], file: Path, trust_code: bool = False) -> None:
    """Cross-field rules pydantic cannot express: ids, labels, formula, subsets, templates, judge model."""
    def fail(key: Key, msg: str, value: Any = None, fix: str = "") -> None:
        raise SpecError(_where(origins, key, file), _fmt(key), msg, value=value, fix=fix)

    seen: dict[tuple[str, str], Key] = {}
    entries: list[tuple[Key, Any, str]] = []
    for i, d in enumerate(spec._dims()):
        entries.append((("taxonomy", "dimensions", i), d, "dimension"))
        entries += [(("taxonomy", "dimensions", i, "abilities", j), a, "ability/rule")
                    for j, a in enumerate(d.abilities)]
    entries += [(("failure_rules", i), r, "ability/rule") for i, r in enumerate(spec.failure_rules)]
    for key, obj, kind in entries:
        if not _ID_RE.match(obj.id):
            fail(key + ("id",), "ids must be snake_case ASCII", obj.id, "use e.g. emotional_coping")
        if (kind, obj.id) in seen:
            fail(key + ("id",), f"duplicate {kind} id", obj.id, f"already used at {_fmt(seen[kind, obj.id])}")
        seen[kind, obj.id] = key + ("id",)
        for k, lab in enumerate(getattr(obj, "data_labels", [])):
            if ("label", lab) in seen:
                fail(key + ("data_labels", k), "data label used twice", lab,
                     f"already mapped at {_fmt(seen['label', lab])}; a data label maps to one ability or rule")
            seen["label", lab] = key + ("data_labels", k)
    check_language(spec, fail, trust_code)
    if "user" not in spec.data.roles.values():
        fail(("data", "roles"), "no role maps to 'user'", spec.data.roles, "map the replied-to speaker's label to user")
    subsets, decay = spec.data.subsets, spec.report.decay
    named = [(("report", "subsets", s), s) for s in spec.report.subsets]
    named += [(("report", "decay", "from"), decay.from_), (("report", "decay", "to"), decay.to)] if decay else []
    for key, value in named:
        if subsets and value not in subsets:
            fail(key, "unknown subset", value, f"data.subsets: {', '.join(subsets)}")
    if decay and decay.base not in (decay.from_, decay.to):
        fail(("report", "decay", "base"), "base must be the 'from' or the 'to' subset", decay.base)
    if spec.candidate.mode == "single_message" and not spec.candidate.template and spec.conversation.mode == "single":
        fail(("candidate", "template"), "single_message mode needs a template", fix="set candidate.template")
    for fld in (f for f in _TEMPLATE_FIELDS if _get(spec, _split_key(f))):
        path = spec.template_path(fld)
        if not path.is_file():
            fail(_split_key(fld), "template file not found", _get(spec, _split_key(fld)),
                 f"create {path} or fix the path (relative to {path.parent})")
        try:
            jinja2.Environment().parse(spec.read_template(fld))
        except jinja2.TemplateSyntaxError as exc:
            raise SpecError(f"{path}:{exc.lineno}", fld, f"template syntax error: {exc.message}",
                            fix="fix the jinja2 syntax") from exc
    _check_urls(spec, fail)
    if spec.judge is None:
        return  # every item is checked by the engine (spec/checks.py): no judge model to check
    sim = spec.conversation.simulator.model if spec.conversation.simulator else None
    base = spec.baseline.model if spec.baseline else None
    for key, ref in ((("judge", "model"), spec.judge.model), (("conversation", "simulator", "model"), sim),
                     (("baseline", "model"), base)):  # every model entry a spec declares, checked alike
        if ref is None:
            continue
        check_model(ref, _where(origins, key + ("model",), file), _fmt(key + ("model",)))
        for bad in endpoint_params(ref.params):
            fail(key + ("params", bad), "an endpoint or credential is not allowed in params "
                 "(it would receive the entry's key unseen)", fix=PARAMS_FIX)
        for bad in faking_params(ref.params):
            fail(key + ("params", bad), "a params key that fakes the model's answer is not allowed", fix=FAKING_FIX)


def _check_urls(spec: BenchmarkSpec, fail: Any) -> None:
    """Every URL a spec downloads from: https://, or http:// to this machine (a test server); never file:// or
    another scheme that reads local files (local data is a path key, confined to the spec's directories)."""
    refs, answers = spec.data.references, spec.baseline.answers if spec.baseline else None
    urls: list[tuple[Key, str | None]] = [(("data", "url"), spec.data.url),
                                          (("data", "references", "url"), refs.url if refs else None)]
    urls += [(("baseline", "answers", "files", group, "url"), f.url) for group, f in (answers.files.items()
                                                                                       if answers else ())]
    for key, url in urls:
        if url and not fetchable_url(url):
            fail(key, "only https:// URLs (or http:// to 127.0.0.1 / localhost) may be downloaded", url,
                 "a local file goes in the matching path key (data.path, data.references.path, "
                 "baseline.answers.files.<group>.path), inside the spec's directory")


def load_spec(name_or_path: str | Path, search_path: Sequence[str | Path] | None = None,
              trust_code: bool = False) -> BenchmarkSpec:
    """Load a benchmark by name (looked up on the search path) or by directory / benchmark.yaml path.

    A plain string without a path separator is a name, found on the search path, else a directory of that name
    in the working directory (`benchmark=my_bench` beside ./my_bench/benchmark.yaml); `.`, `..` and anything
    else (or a Path) is a path.
    trust_code=True allows a `module:function` scoring formula to be imported (see scoring/formulas.py).
    """
    s = str(name_or_path)
    if (isinstance(name_or_path, Path) or "/" in s or os.sep in s or s.endswith((".yaml", ".yml"))
            or s in (".", "..")):
        directory = Path(s).expanduser()
        directory = directory.parent if directory.suffix in (".yaml", ".yml") else directory
        if not (directory / SPEC_FILE).is_file():
            raise SpecError(str(directory), "", f"no {SPEC_FILE} here",
                            fix="give a benchmark directory containing benchmark.yaml, or a benchmark name")
    elif (Path(s) / SPEC_FILE).is_file() and s not in list_benchmarks(search_path):
        directory = Path(s)  # a bare directory name in the working directory (a name on the search path wins)
    else:
        directory = _find(s, search_path, s, "benchmark")
    data, origins, files = _load_chain(directory.resolve(), search_path, [])
    try:
        spec = BenchmarkSpec.model_validate(data)
    except ValidationError as exc:
        raise _pydantic_error(exc, origins, files[-1]) from None
    spec._dir, spec._files, spec._origins = files[-1].parent, files, dict(origins)
    _check(spec, origins, files[-1], trust_code)
    return spec


def load_resolved(data: Mapping[str, Any], where: str, trust_code: bool = False,
                  formula: str | None = None, coverage_k: float | None = None) -> BenchmarkSpec:
    """A run's stored spec (spec.resolved.json, `where`) as a BenchmarkSpec, its scoring formula resolved as a
    run resolves it: through the one registry (scoring/formulas.py), under the same trust rule (a module:function
    formula only with trust_code). `formula` replaces the run's own (rescore's scoring.formula=)."""
    fields = {k: v for k, v in data.items() if not k.startswith("_")}
    if formula is not None:
        fields["scoring"] = {**(fields.get("scoring") or {}), "formula": formula}
    if coverage_k is not None:  # rescore's aggregation.coverage.k=: a coverage spec's k (checked by the model)
        agg = dict(fields.get("aggregation") or {})
        if agg.get("question") != "coverage":
            raise ConfigError("rescore: aggregation.coverage.k= needs a run whose spec declares question: coverage")
        fields["aggregation"] = {**agg, "coverage": {**(agg.get("coverage") or {}), "k": coverage_k}}
    try:
        spec = BenchmarkSpec.model_validate(fields)
    except ValidationError as exc:
        raise DataError(where, f"not a valid resolved spec ({exc.error_count()} error(s): {exc.errors()[0]['msg']})",
                        fix="re-run the benchmark so the run holds a current spec") from None

    def fail(key: Key, msg: str, value: Any = None, fix: str = "") -> None:
        raise SpecError(where, _fmt(key), msg, value=value, fix=fix)

    check_formula(spec, fail, trust_code)
    return spec

