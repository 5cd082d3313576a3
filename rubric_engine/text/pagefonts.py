"""The font list of every HTML page a person reads (report.html, runs.html, review.html, the criteria page).

Why one list, with the embedded CJK face first: each page embeds a subset of Noto Sans CJK for the Chinese it
holds (report/fonts.py), declared with a `unicode-range` of exactly those characters. A face listed after the
system fonts is reached only by fallback, and Chromium shapes a text whose fallback face is still loading in
a system font and may keep it once the face has loaded: boxes on a machine without CJK fonts (seen under load
for the first Chinese text visible at load, ~15% of page loads). Listed first, the face is the text's own font:
its characters wait for it (invisible for the moment it takes to load) and are drawn in it, and every other
character, outside its range, goes straight to the system fonts after it. Without an embedded face (a page with
no CJK text, or no font package) the first name matches nothing and is skipped.
"""

from __future__ import annotations

__all__ = ["EMBED_FAMILY", "PAGE_FONTS", "MONO_FONTS"]

EMBED_FAMILY = "rubric-engine CJK"  # the page's own name for the embedded subset: never a system font
_CJK_SYSTEM = '"Noto Sans CJK SC","Source Han Sans SC","PingFang SC","Hiragino Sans GB","Microsoft YaHei"'
PAGE_FONTS = (f'"{EMBED_FAMILY}",system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,{_CJK_SYSTEM},'
              '"Noto Sans",sans-serif')
MONO_FONTS = f'"{EMBED_FAMILY}",ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace'
