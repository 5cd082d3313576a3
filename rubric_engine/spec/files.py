"""Reading `benchmark.yaml` files: YAML with line numbers, `extends` chains, deep_merge and the search path.

Why apart from the pydantic models in spec/schema.py: this is the file-system and YAML side, which knows nothing of
the spec's schema; it remembers where every key was written so spec/schema.py can point an error at file:line.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from rubric_engine.errors import SpecError

__all__ = ["SPEC_FILE", "Key", "benchmark_search_path", "list_benchmarks", "deep_merge", "read_bounded_yaml",
           "shipped_data_dir"]

SPEC_FILE = "benchmark.yaml"
MAX_SPEC_BYTES = 256 * 1024  # a spec is a few KB; specs come from strangers, so the parser's input is bounded
MAX_YAML_DEPTH = 64  # nesting levels; composing a YAML document recurses once per level
Key = tuple[str | int, ...]


# ----------------------------------------------------------------------------------------------- search path

def _shipped(module: str, folder: str) -> Path:
    """A folder the package installs as `module` (pyproject's package-dir), or the same folder at the top of a
    checkout when the package is imported from one: a source tree on sys.path (a Ray worker started from a
    checkout has the driver's working directory there) holds conf/, benchmarks/ and data/ beside rubric_engine/."""
    try:
        from importlib.resources import files

        return Path(os.fspath(files(module)))  # type: ignore[arg-type]
    except (ImportError, TypeError, ValueError):
        return Path(__file__).resolve().parents[2] / folder


def packaged_dir() -> Path | None:
    """The benchmarks shipped with the package (installed) or at the top of a checkout."""
    p = _shipped("rubric_engine.benchmarks", "benchmarks")
    return p if p.is_dir() else None


def benchmark_search_path(extra: Sequence[str | Path] = ()) -> list[Path]:
    """extra dirs, $RUBRIC_ENGINE_BENCHMARKS, ./benchmarks, packaged benchmarks (first match wins)."""
    env = [p for p in os.environ.get("RUBRIC_ENGINE_BENCHMARKS", "").split(os.pathsep) if p]
    dirs = [*extra, *env, Path.cwd() / "benchmarks", *filter(None, [packaged_dir()])]
    return list(dict.fromkeys(Path(d).expanduser().resolve() for d in dirs))


def list_benchmarks(search_path: Sequence[str | Path] | None = None) -> dict[str, Path]:
    """Benchmark name -> directory; an earlier search dir shadows a later one."""
    found: dict[str, Path] = {}
    for d in benchmark_search_path() if search_path is None else [Path(p) for p in search_path]:
        if d.is_dir():
            for sub in sorted(d.iterdir()):
                if (sub / SPEC_FILE).is_file():
                    found.setdefault(sub.name, sub)
    return found


_LISTED = 12  # closest known benchmarks an unknown name's line lists (the rest counted): the line stays short


def _find(name: str, search_path: Sequence[str | Path] | None, file: str, key: str,
          near: Path | None = None) -> Path:
    if near is not None and (near / name / SPEC_FILE).is_file():
        return near / name
    known = list_benchmarks(search_path)
    if name in known:
        return known[name]
    dirs = benchmark_search_path() if search_path is None else list(search_path)
    close = difflib.get_close_matches(name, list(known), n=1)
    # closest names first: with several benchmark families the likely one leads the list
    ranked = sorted(known, key=lambda k: (-difflib.SequenceMatcher(None, name, k).ratio(), k))
    # the hint first: the line is capped, and a long search path must not cut it off
    listed = ", ".join(ranked[:_LISTED]) + (f" and {len(ranked) - _LISTED} more" if len(ranked) > _LISTED else "")
    fix = (f"did you mean {close[0]!r}? " if close else "") + (
        f"known benchmarks: {listed or '(none)'}; searched: {os.pathsep.join(map(str, dirs))}")
    raise SpecError(file, key, "unknown benchmark", value=name, fix=fix)


# ------------------------------------------------------------------------------------------------ YAML + merge

def _fmt(key: Key) -> str:
    out = ""
    for part in key:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _split_key(key: str) -> Key:
    return tuple(int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", key))


def _lookup(origins: Mapping[Key, tuple[Path, int]], key: Key) -> tuple[Path, int] | None:
    for n in range(len(key), -1, -1):
        if key[:n] in origins:
            return origins[key[:n]]
    return None


def _get(obj: Any, key: Key) -> Any:
    for part in key:
        if isinstance(obj, (list, tuple)) and isinstance(part, int):
            obj = obj[part] if part < len(obj) else None
        else:
            obj = obj.get(part) if isinstance(obj, Mapping) else getattr(obj, str(part), None)
    return obj


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases: nested aliases expand without bound ("billion laughs"), and a
    spec never needs them (write the value out, or use `extends`)."""

    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise SpecError(f"{self.name}:{event.start_mark.line + 1}", "", "YAML aliases (*name) are not allowed "
                            "in spec files", fix="write the value out, or share settings with extends:")
        if self.depth >= MAX_YAML_DEPTH:  # composing recurses: 20,000 '[' would end in a RecursionError
            event = self.peek_event()
            raise SpecError(f"{self.name}:{event.start_mark.line + 1}", "", f"YAML nested deeper than "
                            f"{MAX_YAML_DEPTH} levels", fix="a spec is a few levels deep; flatten that value")
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _parse(path: Path) -> tuple[dict[str, Any], dict[Key, tuple[Path, int]]]:
    """Parse one YAML file into data plus key-path -> (file, line); duplicate keys are errors."""
    try:
        size = path.stat().st_size
        if size > MAX_SPEC_BYTES:
            raise SpecError(str(path), "", f"spec file is {size} bytes (limit {MAX_SPEC_BYTES})",
                            fix="a benchmark.yaml is a few KB; keep data in data files")
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise SpecError(str(path), "", f"cannot read spec file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise SpecError(str(path), "", f"spec file is not UTF-8 ({exc.reason} at byte {exc.start})",
                        fix="save the file as UTF-8") from None
    loader = _NoAliasLoader(text)
    loader.name = str(path)  # errors raised while composing name the file
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else {}
    except yaml.MarkedYAMLError as exc:
        mark, ctx = exc.problem_mark or exc.context_mark, exc.context_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        started = f" ({exc.context} at line {ctx.line + 1})" if ctx and exc.context else ""
        raise SpecError(where, "", f"YAML syntax error: {exc.problem or exc.context}{started}",
                        fix="fix the YAML at that line (indentation, quotes, a missing ':')") from exc
    except yaml.YAMLError as exc:
        raise SpecError(str(path), "", f"YAML error: {exc}", fix="fix the YAML syntax") from exc
    except RecursionError:
        raise SpecError(str(path), "", "YAML nested too deeply to read", fix="flatten the nested values") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise SpecError(str(path), "", "the top level must be a mapping of keys", value=type(data).__name__)
    marks: dict[Key, tuple[Path, int]] = {(): (path, 1)}

    def walk(n: yaml.Node, key: Key) -> None:
        if isinstance(n, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for k, v in n.value:
                name = k.value if isinstance(k, yaml.ScalarNode) else str(k.start_mark.line)
                line = k.start_mark.line + 1
                if name in seen:
                    raise SpecError(f"{path}:{line}", _fmt(key + (name,)), "duplicate key",
                                    fix=f"it is already set at line {seen[name]}; keep one")
                seen[name] = line
                marks[key + (name,)] = (path, line)
                walk(v, key + (name,))
        elif isinstance(n, yaml.SequenceNode):
            for i, v in enumerate(n.value):
                marks[key + (i,)] = (path, v.start_mark.line + 1)
                walk(v, key + (i,))

    if node is not None:
        walk(node, ())
        for k, v in node.value if isinstance(node, yaml.MappingNode) else []:
            if getattr(k, "value", None) == "version" and isinstance(v, yaml.ScalarNode) and v.tag.endswith(
                    (":float", ":int")):
                data["version"] = v.value  # `version: 1.10` means "1.10", not the number 1.1
    return data, marks


def read_bounded_yaml(path: Path) -> dict[str, Any]:
    """A YAML mapping read as strictly as a spec file (size bounded, no aliases, depth bounded, duplicate keys
    refused): the reader of every YAML a stranger may hand in (an imported test suite too)."""
    return _parse(path)[0]


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Mappings merge recursively; lists and scalars (including null) in `over` replace."""
    out = dict(base)
    for k, v in over.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def _merge_origins(base: dict[Key, tuple[Path, int]], over: dict[Key, tuple[Path, int]],
                   over_data: Mapping[str, Any]) -> dict[Key, tuple[Path, int]]:
    replaced = [k for k in over if k and not isinstance(_get(over_data, k), Mapping)]
    out = {k: v for k, v in base.items() if not any(k[:len(r)] == r and len(k) > len(r) for r in replaced)}
    out.update({k: v for k, v in over.items() if k})
    return out


def _load_chain(directory: Path, search_path: Sequence[str | Path] | None, chain: list[Path]
                ) -> tuple[dict[str, Any], dict[Key, tuple[Path, int]], list[Path]]:
    file = (directory / SPEC_FILE).resolve()
    if file in chain:
        cycle = " -> ".join(str(f.parent.name) for f in chain + [file])
        raise SpecError(str(chain[-1]), "extends", f"extends cycle: {cycle}", fix="remove one of the extends")
    data, marks = _parse(file)
    parent = data.get("extends")
    if parent is None:
        return data, marks, [file]
    if not isinstance(parent, str) or not parent:
        raise SpecError(f"{file}:{marks[('extends',)][1]}", "extends", "must be a benchmark name",
                        value=parent, fix="write extends: <name of another benchmark directory>")
    line = marks[("extends",)][1]
    if "/" in parent or os.sep in parent:
        pdir = (file.parent / parent).resolve()
        if not (pdir / SPEC_FILE).is_file():
            raise SpecError(f"{file}:{line}", "extends", f"no {SPEC_FILE} in that directory", value=parent,
                            fix="point extends at a benchmark directory")
    else:
        pdir = _find(parent, search_path, f"{file}:{line}", "extends", near=file.parent.parent)
    bdata, bmarks, bfiles = _load_chain(pdir, search_path, chain + [file])
    bdata, bmarks = _own_data_source(bdata, bmarks, data)
    return deep_merge(bdata, data), _merge_origins(bmarks, marks, data), bfiles + [file]


_SOURCE = ("url", "path", "sha256")  # where a spec's data comes from, and the pin of that content


def _own_data_source(base: dict[str, Any], marks: dict[Key, tuple[Path, int]], over: Mapping[str, Any]
                     ) -> tuple[dict[str, Any], dict[Key, tuple[Path, int]]]:
    """A child whose `data:` names a source of its own (`path` or `url`) inherits none of the parent's source:
    not the other of the two, and not its `sha256`, which pins the parent's file (kept, every run of the child
    would warn that its data differs). Field names, format and subsets still merge as usual."""
    own = over.get("data")
    if not (isinstance(own, Mapping) and any(own.get(k) is not None for k in ("url", "path"))
            and isinstance(base.get("data"), Mapping)):
        return base, marks
    data = {k: v for k, v in base["data"].items() if k not in _SOURCE}
    return ({**base, "data": data},
            {k: v for k, v in marks.items() if not (k[:1] == ("data",) and len(k) > 1 and k[1] in _SOURCE)})


def shipped_data_dir() -> Path:
    """The package's own data directory (shipped samples the shipped specs name with ../../data/...), installed or
    at the top of a checkout."""
    return _shipped("rubric_engine.data", "data").resolve()
