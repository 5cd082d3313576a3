"""`rubric-engine new NAME`: create a benchmark directory, from scratch or as a variant that extends another.

Why a generator: a variant is a few keys plus prompt templates, and the usual mistakes (a template path
resolved against the wrong directory, a typo in a key, a name clash) are cheaper to prevent than to debug.
The new directory is validated (the spec loaded; from scratch, its sample data too) before the command reports
success; a failure leaves nothing behind. The from-scratch files are authoring/blank.py's.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from rubric_engine.errors import ConfigError, RubricEngineError

__all__ = ["create_variant", "create_blank", "spec_yaml", "check_name", "fill", "USAGE"]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_TEMPLATE_FIELDS = (("candidate", "template"), ("candidate", "system"), ("judge", "template"), ("judge", "system"))
USAGE = "usage: rubric-engine new NAME [extends=BENCHMARK] [dir=DIR] [locale=LL]"


def check_name(name: str) -> None:
    """A variant's name becomes a directory name: letters, digits, '_', '.', '-'."""
    if not _NAME_RE.match(name):
        raise ConfigError(f"new: {name!r} is not a valid benchmark name; use letters, digits, '_', '.', '-' "
                          "(it becomes a directory name)")


def spec_yaml(name: str, parent: Any, locale: str, templates: dict[str, str]) -> str:
    """The new benchmark.yaml: the keys a variant sets, plus commented keys users typically override."""
    def q(value: Any) -> str:
        return yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=1 << 16).strip().removesuffix("\n...")

    lines = [
        f"# {name}: a variant of {parent.name}. Every key not set here is inherited from {parent.name}:",
        "# mappings merge key by key, while lists (taxonomy.dimensions, failure_rules, data.subsets) replace the",
        "# parent's list as a whole. File paths resolve relative to the directory of the file that sets them.",
        f"extends: {parent.name}",
        f"name: {name}",
        'version: "1.0"',
        f"locale: {q(locale)}",
        f"description: {q(f'Variant of {parent.name}: describe what differs (language, audience, data).')}",
        "",
        "# Data: your own JSONL file in the parent's row schema (field names: data.fields of the parent).",
        "# data:",
        "#   url: null",
        "#   path: data.jsonl                 # relative to this directory, or absolute",
        "#   sha256: <sha256sum of the file>  # optional pin; a mismatch is reported as a warning",
        "",
    ]
    for section in ("candidate", "judge"):
        keys = [(k.split(".", 1)[1], v) for k, v in templates.items() if k.startswith(section + ".")]
        prefix = "" if keys else "# "  # an empty `candidate:` would be null and replace the parent's mapping
        lines.append(f"{prefix}{section}:        # templates copied from {parent.name}: rewrite them for your audience")
        lines += [f"  {key}: {rel}" for key, rel in keys]
        if section == "candidate":
            lines.append(f"  # mode: {parent.candidate.mode}     # single_message | chat_turns")
        elif parent.judge is not None:  # None: every item is checked by the engine, no judge to override
            lines += [f"  # model: {{name: {parent.judge.model.name}, model: {parent.judge.model.model}}}",
                      f"  # max_reasks: {parent.judge.max_reasks}"]
        lines.append("")
    lines += [
        "# scoring:",
        f"#   formula: {parent.scoring.formula}     # log_normalised | linear | met_over_positive",
        "# report:",
        "#   scenarios: {<scenario label in the data>: {en: English name}}",
        "# failure_rules: [...]                  # a list: repeat every rule you keep",
    ]
    return "\n".join(lines) + "\n"


def _free(directory: Path, name: str) -> Path:
    """The new benchmark's directory, refused when it exists (nothing is ever overwritten)."""
    target = directory / name
    if target.exists():
        raise ConfigError(f"new: {target} already exists; choose another name or remove it first (nothing was changed)")
    return target


def fill(target: Path, files: dict[str, str | Path], check: Callable[[], Any]) -> Path:
    """Make `target` with `files` (name -> text, or a file to copy) and check it; on failure remove it, never
    leaving a half-made benchmark that blocks a retry."""
    target.mkdir(parents=True)
    try:
        for rel, content in files.items():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Path):
                shutil.copyfile(content, target / rel)
            else:
                (target / rel).write_text(content, encoding="utf-8")
        check()
    except (RubricEngineError, OSError):
        shutil.rmtree(target, ignore_errors=True)
        raise
    return target


def create_variant(name: str, parent_name: str, directory: Path, locale: str | None = None) -> Path:
    """Create <directory>/<name>/ (benchmark.yaml + copies of the parent's templates) and validate it."""
    from rubric_engine.spec.files import benchmark_search_path
    from rubric_engine.spec.load import load_spec

    search = benchmark_search_path([directory])
    target = _free(directory, name)
    parent = load_spec(parent_name, search)
    templates: dict[str, str] = {}
    sources: dict[str, str | Path] = {}
    for section, key in _TEMPLATE_FIELDS:
        if getattr(getattr(parent, section), key, None):  # (a spec without a judge has no judge templates)
            src = parent.template_path(f"{section}.{key}")
            rel = src.name if sources.get(src.name, src) == src else f"{section}_{src.name}"
            sources[rel], templates[f"{section}.{key}"] = src, rel
    sources["benchmark.yaml"] = spec_yaml(name, parent, locale or parent.locale, templates)
    return fill(target, sources, lambda: load_spec(target, search))


def create_blank(name: str, directory: Path, locale: str | None = None) -> Path:
    """Create <directory>/<name>/ from scratch (authoring/blank.py), then load it and check its sample data."""
    from rubric_engine.authoring.blank import blank_files
    from rubric_engine.dataset.load import load_dataset
    from rubric_engine.spec.files import benchmark_search_path
    from rubric_engine.spec.load import load_spec

    def check() -> None:
        spec = load_spec(target, benchmark_search_path([directory]))
        load_dataset(spec, spec.data_path())

    target = _free(directory, name)
    return fill(target, dict(blank_files(name, locale or "en")), check)
