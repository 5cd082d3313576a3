"""`rubric-engine new NAME`: create a variant benchmark directory that extends an existing one.

Why a generator: a variant is a few keys plus prompt templates, and the usual mistakes (a template path
resolved against the wrong directory, a typo in a key, a name clash) are cheaper to prevent than to debug.
The new directory is validated with load_spec before the command reports success.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from rubric_engine.errors import ConfigError, RubricEngineError

__all__ = ["create_variant", "default_parent", "spec_yaml", "check_name", "USAGE"]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_TEMPLATE_FIELDS = (("candidate", "template"), ("candidate", "system"), ("judge", "template"), ("judge", "system"))
USAGE = "usage: rubric-engine new NAME [extends=BENCHMARK] [dir=DIR] [locale=LL]"


def check_name(name: str) -> None:
    """A variant's name becomes a directory name: letters, digits, '_', '.', '-'."""
    if not _NAME_RE.match(name):
        raise ConfigError(f"new: {name!r} is not a valid benchmark name; use letters, digits, '_', '.', '-' "
                          "(it becomes a directory name)")


def default_parent() -> str | None:
    """The benchmark the shipped run config uses by default (conf/config.yaml `benchmark:`), if readable."""
    candidates: list[Path] = []
    try:
        from importlib.resources import files

        candidates.append(Path(str(files("rubric_engine.conf") / "config.yaml")))
    except (ImportError, TypeError, ValueError):
        pass
    candidates.append(Path(__file__).resolve().parents[2] / "conf" / "config.yaml")
    for path in candidates:
        try:
            value = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("benchmark")
        except (OSError, yaml.YAMLError, AttributeError):
            continue
        if isinstance(value, str) and value:
            return value
    return None


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


def create_variant(name: str, parent_name: str, directory: Path, locale: str | None = None) -> Path:
    """Create <directory>/<name>/ (benchmark.yaml + copies of the parent's templates) and validate it."""
    from rubric_engine.spec.files import benchmark_search_path
    from rubric_engine.spec.load import load_spec

    search = benchmark_search_path([directory])
    target = directory / name
    if target.exists():
        raise ConfigError(f"new: {target} already exists; choose another name or remove it first (nothing was changed)")
    parent = load_spec(parent_name, search)
    templates: dict[str, str] = {}
    sources: dict[str, Path] = {}
    for section, key in _TEMPLATE_FIELDS:
        if getattr(getattr(parent, section), key, None):  # (a spec without a judge has no judge templates)
            src = parent.template_path(f"{section}.{key}")
            rel = src.name if sources.get(src.name, src) == src else f"{section}_{src.name}"
            sources[rel], templates[f"{section}.{key}"] = src, rel
    target.mkdir(parents=True)
    try:
        for rel, src in sources.items():
            shutil.copyfile(src, target / rel)
        (target / "benchmark.yaml").write_text(spec_yaml(name, parent, locale or parent.locale, templates),
                                               encoding="utf-8")
        load_spec(target, search)
    except (RubricEngineError, OSError):
        shutil.rmtree(target, ignore_errors=True)  # never leave a half-made benchmark that blocks a retry
        raise
    return target
