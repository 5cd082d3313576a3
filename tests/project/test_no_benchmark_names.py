"""The engine stays benchmark-agnostic: no benchmark name, Chinese label or benchmark field name in code.

Why a test: those belong in benchmarks/<name>/benchmark.yaml; once one leaks into rubric_engine/, the next
benchmark silently inherits HeartBench's assumptions.

"difficulty" is also an ordinary English word, so prose ("question difficulty cancels out") is allowed;
it is forbidden as code: an identifier, or a string literal that is exactly the field name.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from conftest import REPO
PACKAGE = REPO / "rubric_engine"
ANYWHERE = re.compile(r"heartbench|healthbench|prompt_id|question_id|primary_scene|secondary_scene|reference_qa|"
                      r"counselling_dynamic|counselling_turns|counselling_sage",
                      re.IGNORECASE)
AS_CODE = {"difficulty"}
# CJK ideographs and extensions, CJK punctuation, kana, Hangul, fullwidth forms.
CJK = re.compile(r"[\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
                 r"\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003134f]")
SOURCES = sorted(PACKAGE.rglob("*.py"))


def problems_in(text: str, name: str = "<src>") -> list[str]:
    """Every leak in one source text, as 'file:line: what'."""
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        out += [f"{name}:{n}: benchmark name/field {m.group()!r}" for m in ANYWHERE.finditer(line)]
        if m := CJK.search(line):
            out.append(f"{name}:{n}: CJK character {m.group()!r}")
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        value = tok.string.lower()
        if tok.type == tokenize.STRING:
            value = re.sub(r"^[a-z]*(['\"]{1,3})(.*)\1$", r"\2", value, flags=re.DOTALL)
        if tok.type in (tokenize.NAME, tokenize.STRING) and value in AS_CODE:
            out.append(f"{name}:{tok.start[0]}: benchmark field name {tok.string!r} used as code")
    return out


def test_there_are_sources() -> None:
    assert len(SOURCES) >= 2


def test_the_checker_catches_leaks() -> None:
    assert problems_in('x = row["difficulty"]\n') and problems_in("difficulty = 1\n")
    assert problems_in("# see HeartBench\n") and problems_in('k = "primary_scene"\n')
    assert problems_in('label = "\u5176\u4ed6"\n')
    assert not problems_in('"""Question difficulty cancels out."""\n')


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_benchmark_specific_text(path: Path) -> None:
    problems = problems_in(path.read_text(encoding="utf-8"), str(path))
    assert not problems, "move these into the benchmark's spec YAML:\n" + "\n".join(problems)
