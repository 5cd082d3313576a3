"""A spec's versions: its changelog (`changelog.yaml` in the spec directory) and `diff` between two versions.

Why: a benchmark's criteria change between releases (reworded, re-weighted, regrouped, added, removed) and a
score is only comparable with the version it was computed under. The changelog records each version in turn;
one that skips a version (1, 2, 4) or ends elsewhere than the spec's `version` is refused, so the history a
reader trusts has no hole. `diff` pairs the two versions' criteria per question: by the same normalised text
first, then by the most similar text (character n-grams, authoring/lint.py's measure) above MATCH, so a
rewording is told from a removal plus an addition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rubric_engine.authoring.lint import normalised, rules_for, similarity
from rubric_engine.errors import ConfigError

__all__ = ["CHANGELOG_FILE", "MATCH", "Change", "check_changelog", "successors", "pairs", "criteria_changes"]

CHANGELOG_FILE = "changelog.yaml"
MATCH = 0.35  # the least similarity (character n-gram Jaccard) at which a new criterion is the old one reworded


def _parts(version: str, file: Any) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in str(version).split("."))
    except ValueError:
        raise ConfigError(f"{file}: version {version!r} is not numbers joined by dots (1, 2 or 1.2); "
                          "renumber it") from None


def successors(version: tuple[int, ...]) -> set[tuple[int, ...]]:
    """The versions that may follow `version`: one part raised by one, the parts after it zero (1.2 -> 1.3, 2.0)."""
    return {version[:i] + (version[i] + 1,) + (0,) * (len(version) - i - 1) for i in range(len(version))}


def check_changelog(spec: Any) -> list[dict[str, Any]]:
    """The spec's changelog entries, oldest first ([] without the file); ConfigError when it skips a version,
    repeats one, or does not end at the spec's `version`."""
    from rubric_engine.spec.files import read_bounded_yaml

    file = spec.dir / CHANGELOG_FILE
    if not file.is_file():
        return []
    raw = read_bounded_yaml(file).get("versions")
    if not isinstance(raw, list) or not raw or not all(isinstance(e, dict) and "version" in e for e in raw):
        raise ConfigError(f"{file}: expected versions: [{{version: 1, changes: [...]}}, ...], oldest first; fix the file")
    versions = [str(e["version"]) for e in raw]
    for before, after in zip(versions, versions[1:]):
        if _parts(after, file) not in successors(_parts(before, file)):
            raise ConfigError(f"{file}: version {after} follows {before}, skipping or repeating a version; add the "
                              "missing version's entry or renumber")
    if _parts(versions[-1], file) != _parts(spec.version, file):
        raise ConfigError(f"{file}: the last entry is version {versions[-1]} but the spec says version "
                          f"{spec.version}; add an entry for {spec.version} (or set the spec's version)")
    return list(raw)


@dataclass(frozen=True)
class Change:
    """One difference: `kind` added, removed, reworded, reweighted or regrouped; `old`/`new` 1-based criteria."""
    question: str
    kind: str
    old: int | None
    new: int | None
    detail: str

    def line(self) -> str:
        where = " -> ".join(f"criterion {n}" for n in (self.old, self.new) if n is not None)
        if self.old is not None and self.new is not None and self.old == self.new:
            where = f"criterion {self.old}"
        return f"{self.question}{' ' + where if where else ''}: {self.kind}: {self.detail}"


def pairs(old: Sequence[Any], new: Sequence[Any], n: int) -> list[tuple[int, int]]:
    """(old position, new position) of matched criteria: the same normalised text, then the most similar."""
    same = [(0.0, i, j) for i in range(len(old)) for j in range(len(new))
            if normalised(old[i].text) == normalised(new[j].text)]
    near = sorted(((-similarity(old[i].text, new[j].text, n), i, j) for i in range(len(old)) for j in range(len(new))
                   if similarity(old[i].text, new[j].text, n) >= MATCH))
    out: list[tuple[int, int]] = []
    for _, i, j in same + near:  # exact matches claim their pair first, then the most similar pairs
        if all(i != a and j != b for a, b in out):
            out.append((i, j))
    return sorted(out)


def _question_changes(qid: str, old: Sequence[Any], new: Sequence[Any], n: int) -> list[Change]:
    matched = pairs(old, new, n)
    out = [Change(qid, "removed", old[i].index, None, repr(old[i].text))
           for i in range(len(old)) if i not in {a for a, _ in matched}]
    out += [Change(qid, "added", None, new[j].index, repr(new[j].text))
            for j in range(len(new)) if j not in {b for _, b in matched}]
    for i, j in matched:
        a, b = old[i], new[j]
        if a.text != b.text:
            out.append(Change(qid, "reworded", a.index, b.index, f"{a.text!r} -> {b.text!r}"))
        if a.weight != b.weight:
            out.append(Change(qid, "reweighted", a.index, b.index, f"{a.weight:g} -> {b.weight:g}"
                              if a.weight is not None and b.weight is not None else f"{a.weight} -> {b.weight}"))
        if a.label != b.label:
            out.append(Change(qid, "regrouped", a.index, b.index, f"{a.label} -> {b.label}"))
    return sorted(out, key=lambda c: (c.old or c.new or 0, c.kind))


def criteria_changes(old: Sequence[Any], new: Sequence[Any], locale: str) -> list[Change]:
    """Every change between two versions' questions (matched by id): criteria per question, and questions
    added or removed whole."""
    n = rules_for(locale).ngram
    before, after = {q.id: q for q in old}, {q.id: q for q in new}
    out: list[Change] = []
    for qid in [*before, *(q for q in after if q not in before)]:  # the old order, then the questions added
        if qid not in after:
            out.append(Change(qid, "question removed", None, None, f"{len(before[qid].criteria)} criteria"))
        elif qid not in before:
            out.append(Change(qid, "question added", None, None, f"{len(after[qid].criteria)} criteria"))
        else:
            out += _question_changes(qid, before[qid].criteria, after[qid].criteria, n)
    return out
