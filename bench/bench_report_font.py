"""How long report.html's embedded CJK font takes to cut, and how large it is, by number of distinct characters.

Why: every Chinese run's report embeds a subset of Noto Sans CJK (report/fonts.py), cut at the end of the run
while the run waits for its report. The characters are taken in order from the real HeartBench data when it is
beside the checkout (its questions use about 2,000 distinct characters), else from the CJK block. Prints, per
size, the engine's settings beside fontTools' defaults (layout tables kept, hints dropped) with their ratio.

    python bench/bench_report_font.py [--sizes 100,400,2000] [--repeat 1]
"""

from __future__ import annotations

import io
import time

from _common import SHARED_DATA, options

from rubric_engine.report import fonts


def _chars(n: int) -> list[int]:
    seen: dict[int, None] = {}
    if SHARED_DATA.is_file():
        for c in SHARED_DATA.read_text(encoding="utf-8"):
            if ord(c) >= 0x2E80:
                seen.setdefault(ord(c))
    pool = [c for c in seen if c >= 0x4E00] + [c for c in range(0x4E00, 0xA000) if c not in seen]
    return sorted(pool[:n])


def _fonttools_defaults(found: tuple, codepoints: list[int]) -> int:
    from fontTools import subset
    from fontTools.ttLib import TTFont

    font = TTFont(str(found[0]), fontNumber=found[1], lazy=True)
    sub = subset.Subsetter(subset.Options())
    sub.populate(unicodes=codepoints)
    sub.subset(font)
    buf = io.BytesIO()
    font.save(buf)
    return len(buf.getvalue())


def main() -> None:
    args = options(__doc__, sizes="100,400,2000", repeat=1)
    found = fonts.cjk_font()
    if found is None:
        raise SystemExit("the font package noto-cjk-sans-otc is not installed")
    print(f"{'chars':>6} {'engine s':>9} {'engine KB':>10} {'defaults s':>11} {'defaults KB':>12} {'ratio':>6}")
    for n in map(int, str(args.sizes).split(",")):
        cps = _chars(n)
        best = best_d = float("inf")
        for _ in range(int(args.repeat)):
            fonts._subset.cache_clear()  # noqa: SLF001 - measure the cut, not the cache
            t = time.perf_counter()
            data, _kind = fonts._subset(found, tuple(cps))  # noqa: SLF001
            best = min(best, time.perf_counter() - t)
            t = time.perf_counter()
            size_d = _fonttools_defaults(found, cps)
            best_d = min(best_d, time.perf_counter() - t)
        print(f"{len(cps):>6} {best:>9.2f} {len(data) / 1024:>10.0f} {best_d:>11.2f} {size_d / 1024:>12.0f} "
              f"{best_d / best:>6.1f}")


if __name__ == "__main__":
    main()
