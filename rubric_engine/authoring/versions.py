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

__all__ = ["CHANGELOG_FILE", "MATCH", "Change", "check_changelog", "successors", "criteria_changes"]

CHANGELOG_FILE = "changelog.yaml"
MATCH = 0.5  # the least similarity at which a new criterion is the old one reworded


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


def _pairs(old: Sequence[Any], new: Sequence[Any], n: int) -> list[tuple[int, int]]:
    """(old position, new position) of matched criteria: the same normalised text, then the most similar."""
    pairs, free_old, free_new = [], list(range(len(old))), list(range(len(new)))
    for i in list(free_old):
        j = next((j for j in free_new if normalised(old[i].text) == normalised(new[j].text)), None)
        if j is not None:
            pairs.append((i, j)), free_old.remove(i), free_new.remove(j)
    scored = sorted(((similarity(old[i].text, new[j].text, n), i, j) for i in free_old for j in free_new),
                    key=lambda t: (-t[0], t[1], t[2]))
    for sim, i, j in scored:
        if sim >= MATCH and i in free_old and j in free_new:
            pairs.append((i, j)), free_old.remove(i), free_new.remove(j)
    return sorted(pairs)


def _question_changes(qid: str, old: Sequence[Any], new: Sequence[Any], n: int) -> list[Change]:
    pairs = _pairs(old, new, n)
    out = [Change(qid, "removed", old[i].index, None, repr(old[i].text))
           for i in range(len(old)) if i not in {a for a, _ in pairs}]
    out += [Change(qid, "added", None, new[j].index, repr(new[j].text))
            for j in range(len(new)) if j not in {b for _, b in pairs}]
    for i, j in pairs:
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
    out = [Change(qid, "question removed", None, None, f"{len(before[qid].criteria)} criteria")
           for qid in before if qid not in after]
    out += [Change(qid, "question added", None, None, f"{len(after[qid].criteria)} criteria")
            for qid in after if qid not in before]
    for qid in (q for q in before if q in after):
        out += _question_changes(qid, before[qid].criteria, after[qid].criteria, n)
    return out
