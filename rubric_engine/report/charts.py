"""Leaderboard charts: a radar of ability scores and grouped bars of subset scores.

matplotlib is imported inside the functions (it costs ~1 s and only the leaderboard needs it) and
drives the Agg canvas directly through `Figure`, never pyplot, so no GUI backend or global figure
state is involved (safe in sweep workers and headless CI). Every chart draws inside the rc settings of
report/fonts.py: Latin text in DejaVu Sans, Chinese (a model name, a scenario, a tag) in the embedded
Noto Sans CJK face, so no glyph is drawn as a box on a machine without CJK fonts. Missing numbers (None)
are drawn as gaps, never as zeros.
"""

from __future__ import annotations

import functools
import math
import textwrap
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeVar

__all__ = ["radar_chart", "subsets_chart", "length_chart", "FORMATS"]

FORMATS = ("png", "svg")
_F = TypeVar("_F", bound=Callable[..., Any])


def _fonts(draw: _F) -> _F:
    """Run a chart function with the CJK fallback font (report/fonts.py) in force while it builds and saves."""
    @functools.wraps(draw)
    def wrapper(*args: Any, **kw: Any) -> Any:
        import matplotlib

        from rubric_engine.report.fonts import chart_fonts

        with matplotlib.rc_context(chart_fonts()):
            return draw(*args, **kw)
    return wrapper  # type: ignore[return-value]


def _figure(width: float, height: float, polar: bool = False) -> tuple[Any, Any]:
    """A Figure on the Agg canvas (explicit, no pyplot) and one axes."""
    # The Agg canvas explicitly, not matplotlib.use(): switching the global backend would change the
    # backend of a caller's own pyplot session (e.g. a notebook).
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(111, projection="polar" if polar else None)
    return fig, ax


def _save(fig: Any, out_base: Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """PNG and SVG (or the formats asked) next to each other; metadata without dates so reruns give
    identical files."""
    import matplotlib

    out_base.parent.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    with matplotlib.rc_context({"svg.hashsalt": "rubric-engine", "svg.fonttype": "path"}):
        for ext in formats:
            path = out_base.with_suffix(f".{ext}")
            meta = {"Date": None} if ext == "svg" else {"Software": None}
            fig.savefig(path, format=ext, bbox_inches="tight", metadata=meta)
            paths.append(path)
    return paths


def _colors(n: int) -> list[Any]:
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _nan(values: Sequence[float | None]) -> list[float]:
    return [math.nan if v is None else float(v) for v in values]


@_fonts
def radar_chart(axes: Sequence[str], series: Mapping[str, Sequence[float | None]], out_base: Path, *,
                title: str = "", value_range: tuple[float, float] = (0.0, 100.0),
                formats: Sequence[str] = FORMATS) -> list[Path]:
    """One polygon per model over all abilities, the radius spanning value_range (bottom, top of the scale);
    writes out_base.png/.svg and returns the paths."""
    n = len(axes)
    if n < 3:  # a radar of fewer than 3 axes is not a polygon; still draw it so the report is complete
        axes = [*axes, *[""] * (3 - n)]
        series = {k: [*v, *[None] * (3 - n)] for k, v in series.items()}
        n = 3
    angles = [2 * math.pi * i / n for i in range(n)]
    fig, ax = _figure(10, 8.5, polar=True)
    ax.set_theta_offset(math.pi / 2)
    ax.set_theta_direction(-1)
    for color, (name, values) in zip(_colors(len(series)), series.items()):
        vals = _nan(values)
        closed_a, closed_v = [*angles, angles[0]], [*vals, vals[0]]
        ax.plot(closed_a, closed_v, color=color, linewidth=1.6, label=name, marker="o", markersize=3)
        if not any(math.isnan(v) for v in vals):
            ax.fill(closed_a, closed_v, color=color, alpha=0.08)
    ax.set_xticks(angles)
    ax.set_xticklabels([textwrap.fill(a, 16) for a in axes], fontsize=9)
    for label, angle in zip(ax.get_xticklabels(), angles):  # anchor outward so neighbours never collide
        x = math.sin(angle)
        label.set_horizontalalignment("left" if x > 0.1 else "right" if x < -0.1 else "center")
    ax.tick_params(axis="x", pad=6)
    lo, span = value_range[0], value_range[1] - value_range[0]
    ax.set_ylim(lo, value_range[1])
    ax.set_yticks([lo + span * f for f in (0.2, 0.4, 0.6, 0.8, 1.0)])
    ax.tick_params(axis="y", labelsize=7, colors="#666666")
    ax.set_rlabel_position(180 / n)  # between the first two axes, off the data
    if title:
        ax.set_title(title, pad=40, fontsize=12)
    if series:
        ax.legend(loc="upper left", bbox_to_anchor=(1.08, 1.0), fontsize=8, frameon=False)
    return _save(fig, Path(out_base), formats)


@_fonts
def subsets_chart(subsets: Sequence[str], series: Mapping[str, Sequence[float | None]], out_base: Path, *,
                  title: str = "", ylabel: str = "Score", notes: Mapping[str, str] | None = None,
                  intervals: Mapping[str, Sequence[tuple[float, float] | None]] | None = None,
                  formats: Sequence[str] = FORMATS) -> list[Path]:
    """Grouped bars: one group per model, one bar per subset; notes (e.g. decay) above each group;
    intervals: per model, one (lo, hi) per subset drawn as an error bar (None: no bar)."""
    models = list(series)
    k = max(1, len(subsets))
    width = 0.8 / k
    fig, ax = _figure(max(6.0, 1.1 * len(models) + 2.5), 5.0)
    xs = list(range(len(models)))
    top = 0.0
    for j, (color, subset) in enumerate(zip(_colors(k), subsets)):
        vals = [series[m][j] if j < len(series[m]) else None for m in models]
        pos = [x - 0.4 + width * (j + 0.5) for x in xs]
        bars = ax.bar(pos, [0.0 if v is None else v for v in vals], width=width * 0.95, color=color, label=subset)
        for bar, v, m in zip(bars, vals, models):
            if v is None:  # a missing subset score is labelled, not drawn as a zero-height "score"
                bar.set_alpha(0.0)
                ax.annotate("n/a", (bar.get_x() + bar.get_width() / 2, 0), ha="center", va="bottom", fontsize=7)
            else:
                top = max(top, v)
                iv = (intervals or {}).get(m, [])
                iv = iv[j] if j < len(iv) else None
                x = bar.get_x() + bar.get_width() / 2
                if iv is not None:  # asymmetric percentile interval around the point
                    ax.errorbar([x], [v], yerr=[[max(0.0, v - iv[0])], [max(0.0, iv[1] - v)]], fmt="none",
                                ecolor="#222222", elinewidth=1, capsize=3)
                    top = max(top, iv[1])
                ax.annotate(f"{v:.1f}", (x, v), ha="left", va="bottom",
                            fontsize=7, xytext=(2, 2), textcoords="offset points")
    for x, m in zip(xs, models):
        if notes and notes.get(m):
            ax.annotate(notes[m], (x, top * 1.08 + 1), ha="center", va="bottom", fontsize=8, color="#444444")
    ax.set_xticks(xs)
    ax.set_xticklabels(models, rotation=20 if len(models) > 3 else 0, ha="right" if len(models) > 3 else "center",
                       fontsize=9)
    ax.set_ylim(0, max(top * 1.2 + 4, 10))
    ax.set_ylabel(ylabel)
    ax.spines[["top", "right"]].set_visible(False)
    if title:
        ax.set_title(title, fontsize=12)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _save(fig, Path(out_base), formats)


@_fonts
def length_chart(series: Mapping[str, tuple[Sequence[float], Sequence[float], str]], out_base: Path, *,
                 title: str = "", xlabel: str = "reply length (characters)",
                 value_range: tuple[float, float] = (0.0, 100.0), formats: Sequence[str] = FORMATS) -> list[Path]:
    """One scatter per model: reply length against question score, the score axis spanning value_range (bottom,
    top of the scale) with a small margin; series: label -> (lengths, scores, note)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    n = max(1, len(series))
    lo, span = value_range[0], value_range[1] - value_range[0]
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(3.2 * cols, 2.8 * rows + 0.6), dpi=100)
    FigureCanvasAgg(fig)
    for i, (color, (name, (xs, ys, note))) in enumerate(zip(_colors(n), series.items()), 1):
        ax = fig.add_subplot(rows, cols, i)
        ax.scatter(list(xs), list(ys), s=9, color=color, alpha=0.7, linewidths=0)
        ax.set_title(textwrap.fill(f"{name} {note}".strip(), 34), fontsize=8)
        ax.set_ylim(lo - 0.03 * span, lo + 1.03 * span)
        ax.tick_params(labelsize=7)
        ax.spines[["top", "right"]].set_visible(False)
        if (i - 1) % cols == 0:
            ax.set_ylabel("question score", fontsize=8)
        if i > n - cols:
            ax.set_xlabel(xlabel, fontsize=8)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return _save(fig, Path(out_base), formats)
