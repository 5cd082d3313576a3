"""write_leaderboard's chart_formats: each chart is written in exactly the formats asked, and report.html
embeds whichever was written (an SVG-only leaderboard used to fail: the page looked for radar.png)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from rubric_engine.report.leaderboard import write_leaderboard
from rubric_engine.results.leaderboard import build_leaderboard
from rubric_engine.store.runs import collect_runs
from test_html_report import _page
from test_leaderboard import make_run


@pytest.fixture(scope="module")
def lb(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("formats")
    make_run(root / "a", "model-a", 0.8)
    make_run(root / "b", "model-b", 0.4)
    return build_leaderboard(collect_runs([root]), n_boot=20)


def _embedded(html: Path) -> list[tuple[str, bytes]]:
    """(media type, bytes) of every <img> data URI of the page."""
    out = []
    for tag, name, value in _page(html).attrs:
        if tag == "img" and name == "src":
            head, data = value.split(",", 1)
            out.append((head.removeprefix("data:").removesuffix(";base64"), base64.b64decode(data)))
    return out


@pytest.mark.parametrize("formats", [("svg",), ("png",), ("png", "svg")])
def test_charts_in_the_formats_asked_and_embedded(lb, tmp_path: Path, formats: tuple[str, ...]) -> None:
    files = write_leaderboard(lb, tmp_path, chart_formats=formats)
    charts = sorted(p.name for p in tmp_path.iterdir() if p.suffix in (".png", ".svg"))
    assert charts == sorted(f"{c}.{ext}" for c in ("radar", "subsets", "length") for ext in formats)
    assert sorted(k for k in files if k.rsplit("_", 1)[-1] in ("png", "svg")) == \
        sorted(f"{c}_{ext}" for c in ("radar", "subsets", "length") for ext in formats)
    images = _embedded(files["html"])
    assert len(images) == 3  # radar, subsets, length: each once, in the first format asked
    want = {"png": "image/png", "svg": "image/svg+xml"}[formats[0]]
    assert {kind for kind, _ in images} == {want}
    for kind, data in images:
        assert data.startswith(b"\x89PNG") if kind == "image/png" else b"<svg" in data[:2000]
