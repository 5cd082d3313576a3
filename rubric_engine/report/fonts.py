"""A CJK font for report.html and the charts, so Chinese never renders as boxes on a machine without one.

Why: most servers and CI machines have no CJK font, and a page or PNG made there (or opened on one) shows
"tofu" boxes for every Chinese character. The engine depends on a registry package that ships Noto Sans CJK
under the SIL Open Font License (`noto-cjk-sans-otc`); the page embeds a subset of its Simplified Chinese face
holding only the CJK characters the page uses (fontTools, already a matplotlib dependency; WOFF2 when the
`brotli` module is importable, else plain OpenType), as a base64 @font-face, so the page stays one offline
file (report.html, the raters' review.html and `view`'s runs.html alike: font_face_head); the charts register the face with matplotlib's font manager and list it after DejaVu Sans, so matplotlib
falls back to it glyph by glyph. Without the package (a stripped install) the page keeps the system font list
and says so in a note; charts draw as before.

fontTools logs every subsetting step at INFO (some lines list thousands of glyph ids) on the `fontTools` logger,
which propagates to the root logger by default. Whatever logging configuration is active when a page is built
(at the end of a sweep it is Hydra's, whose root handler writes to stdout) must not receive them: `_subset` cuts
that logger off from the root each time (`_quiet_fonttools`), so the subsetting never logs to the user's terminal.
"""

from __future__ import annotations

import base64
import functools
import io
import logging
from pathlib import Path
from typing import Any

from rubric_engine.text.pagefonts import EMBED_FAMILY, MONO_FONTS

__all__ = ["CJK_FAMILY", "EMBED_FAMILY", "cjk_font", "cjk_chars", "font_face_css", "font_face_head", "chart_fonts",
           "unicode_range"]

CJK_FAMILY = "Noto Sans CJK SC"  # the face taken from the collection (Simplified Chinese glyph forms)
_FIRST_CJK = 0x2E80  # CJK radicals onwards: CJK punctuation, kana, ideographs, Hangul, full-width forms


@functools.lru_cache(maxsize=1)
def cjk_font() -> tuple[Path, int] | None:
    """(font collection file, index of the Simplified Chinese face), or None when the package is missing."""
    try:
        import noto_cjk_sans_otc  # the OFL font package (pyproject: why it is a dependency)
        from fontTools.ttLib import TTCollection
    except ImportError:
        return None
    path = Path(str(noto_cjk_sans_otc.FONT_PATH))
    if not path.is_file():
        return None
    with TTCollection(str(path), lazy=True) as fonts:
        for i, font in enumerate(fonts.fonts):
            if font["name"].getDebugName(1) == CJK_FAMILY:
                return path, i
    return None


def cjk_chars(text: str) -> list[int]:
    """The distinct code points of `text` from the CJK blocks up, sorted."""
    return sorted(c for c in map(ord, set(text)) if c >= _FIRST_CJK)  # set() first: ~0.05 s per MB of page


def font_face_css(text: str) -> tuple[str, str]:
    """(@font-face rule, note) for a page whose text is `text`: the rule embeds the subset of the CJK face
    covering the page's CJK characters ('' when it has none); the note is '' unless the page has CJK text the
    engine cannot embed (font package missing)."""
    css, note, _first = _face(text)
    return css, note


def _face(text: str) -> tuple[str, str, int]:
    """font_face_css's (rule, note) and the page's first CJK code point (0 when it has none)."""
    wanted = cjk_chars(text)
    if not wanted:
        return "", "", 0
    found = cjk_font()
    if found is None:
        return "", ("This page has Chinese, Japanese or Korean text but the font package noto-cjk-sans-otc is not "
                    "installed, so it relies on the fonts of the machine that opens it (boxes where there are none); "
                    "pip install noto-cjk-sans-otc and rebuild the page to embed one."), wanted[0]
    data, kind = _subset(found, tuple(wanted))
    b64 = base64.b64encode(data).decode("ascii")
    return (f'@font-face{{font-family:"{EMBED_FAMILY}";font-style:normal;font-weight:400;'
            f'unicode-range:{unicode_range(wanted)};'
            f'src:url(data:font/{kind};base64,{b64}) format("{"woff2" if kind == "woff2" else "opentype"}")}}'
            + _LOAD_NOW.format(family=EMBED_FAMILY, char=f"\\{wanted[0]:x}", mono=MONO_FONTS), "", wanted[0])


def unicode_range(codepoints: list[int]) -> str:
    """A CSS unicode-range of exactly these sorted code points, consecutive ones as one span: 'U+4E00-4E02,U+6C34'."""
    spans: list[list[int]] = []
    for c in codepoints:
        if spans and c == spans[-1][1] + 1:
            spans[-1][1] = c
        else:
            spans.append([c, c])
    return ",".join(f"U+{a:X}" if a == b else f"U+{a:X}-{b:X}" for a, b in spans)


def font_face_head(text: str) -> tuple[str, str]:
    """(what a page's <head> holds for its CJK text: font_face_css's rule in a <style> and the re-layout
    script below, or ''; the note of font_face_css). Every page a person reads uses this one."""
    css, note, first = _face(text)
    script = _RELAYOUT.format(family=EMBED_FAMILY, char=f"\\u{{{first:x}}}")
    return (f"<style>{css}</style><script>{script}</script>" if css else ""), note


# The face leads every page's font list and covers exactly the page's CJK characters (text/pagefonts.py says why
# it must lead). Two more remedies for a face that arrives late, from when it was listed after the system fonts:
# - A browser loads a web font only when a laid-out text needs it; a page whose Chinese all sits in closed
#   <details> (report.html's drill-down) would load the face only when one is opened. An invisible character in
#   the face, laid out with the page, loads it at once, so an opened question never waits for it.
# - Once the face has loaded the body is laid out afresh (a script), which shapes every text again.
_LOAD_NOW = ('body::before{{content:"{char}";font-family:"{family}";position:absolute;visibility:hidden;'
             'width:0;height:0;overflow:hidden;pointer-events:none}}'
             'code,kbd,samp{{font-family:{mono}}}')
# (FontFaceSet.load's text names a character of the face's unicode-range: without one it asks for a space, which
# matches no face of the range.)
_RELAYOUT = ('(function(){{var f=document.fonts;if(!f||!f.load)return;f.load(\'1em "{family}"\',\'{char}\')'
             '.then(function(l){{'
             'var b=document.body;if(!l.length||!b)return;b.style.display="none";void b.offsetHeight;'
             'b.style.display="";}});}})();')


# Kept: the glyph outlines, their hints (dropping them means interpreting every charstring: 3 s more for 3,000
# characters) and the names (the OFL's copyright and licence travel with the glyphs). Dropped: layout and
# vertical-metrics tables, which horizontal Chinese text in a browser does not use (measured with
# bench/bench_report_font.py: about 1 ms per character, half of it gone with the layout tables).
_DROPPED = ["GSUB", "GPOS", "GDEF", "BASE", "VORG", "vhea", "vmtx"]


class _Silent(logging.NullHandler):
    """The handler that marks the `fontTools` logger as ours (so it is added once, whoever configured logging)."""


def _quiet_fonttools() -> None:
    """fontTools' records stop at its own logger: no propagation to the root's handlers (a logging config's
    console handler among them), only warnings and worse are even formatted, and a handler of its own keeps
    Python's last-resort stderr handler from printing those. Re-applied before each subset, since a logging
    config loaded after the last one (Hydra configures logging per sweep job) may have reset the logger."""
    logger = logging.getLogger("fontTools")
    logger.propagate = False
    logger.setLevel(logging.WARNING)
    if not any(isinstance(h, _Silent) for h in logger.handlers):
        logger.addHandler(_Silent())


@functools.lru_cache(maxsize=4)
def _subset(found: tuple[Path, int], codepoints: tuple[int, ...]) -> tuple[bytes, str]:
    """The face cut down to `codepoints`, as (bytes, 'woff2' | 'otf')."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    _quiet_fonttools()
    opts = subset.Options()
    opts.layout_features = []
    opts.drop_tables += _DROPPED
    opts.hinting = True
    opts.desubroutinize = True
    opts.name_IDs = ["*"]
    opts.name_languages = ["*"]
    opts.notdef_outline = True
    try:
        import brotli  # noqa: F401 - only to learn whether WOFF2 can be written
        opts.flavor, kind = "woff2", "woff2"
    except ImportError:
        kind = "otf"
    font = TTFont(str(found[0]), fontNumber=found[1], lazy=True, recalcBBoxes=False)
    try:
        sub = subset.Subsetter(opts)
        sub.populate(unicodes=codepoints)
        sub.subset(font)
        buf = io.BytesIO()
        font.flavor = opts.flavor
        font.save(buf)
    finally:
        font.close()
    return buf.getvalue(), kind


@functools.lru_cache(maxsize=1)
def chart_fonts() -> dict[str, Any]:
    """matplotlib rc settings that draw Latin text in DejaVu Sans and fall back to the CJK face per glyph
    ({} without the font package: matplotlib's defaults). Registers the face once per process."""
    found = cjk_font()
    if found is None:
        return {}
    from matplotlib import font_manager

    if not any(f.name == CJK_FAMILY for f in font_manager.fontManager.ttflist):
        font_manager.fontManager.addfont(str(found[0]))  # every face of the collection; we name one below
    return {"font.family": ["DejaVu Sans", CJK_FAMILY]}
