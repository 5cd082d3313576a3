"""The output side of a leaderboard: console tables, leaderboard.json/.csv/.md, charts and report.html,
and `leaderboard_command` (collect, rank, write, print) that the CLI and the end of a sweep call.

Why apart from results/leaderboard.py: ranking computes; this module only presents a built Leaderboard, so a new
output format never touches the statistics. It imports results/leaderboard.py, never the other way round.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from rubric_engine.errors import ConfigError
from rubric_engine.report.controls import control_tables
from rubric_engine.results import intervals as nested_runs
from rubric_engine.report.judges_view import judge_tables
from rubric_engine.report.scales import leaderboard_scale_tables, score_range
from rubric_engine.results.judges import judge_order
from rubric_engine.results.leaderboard import Leaderboard, Row, build_leaderboard, fmt, length_notes
from rubric_engine.scoring.aggregate import ability_ids
from rubric_engine.store.layout import write_json, write_text
from rubric_engine.store.runs import collect_runs, failed_jobs, incomplete_runs
from rubric_engine.text.csvcells import csv_cell

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["fmt", "write_leaderboard", "print_leaderboard", "leaderboard_command", "length_notes"]


def _subsets(lb: Leaderboard) -> list[str]:
    if not lb.taxonomy.has_subsets:
        return []
    extra = [s for r in lb.rows for s in r.subsets if s not in lb.taxonomy.subsets]
    return list(dict.fromkeys([*lb.taxonomy.subsets, *extra]))


def _tables(lb: Leaderboard, compact: bool = False) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) for Markdown and the console: three narrow tables rather than one that is
    unreadable in 80 columns; compact (console) drops the judge column when all runs share a judge. Several
    judges: one ranking per judge, a Judge column in every other table, and the judges side by side."""
    t, subs = lb.taxonomy, _subsets(lb)
    judges = judge_order([r.judge for r in lb.rows])
    several = len(judges) > 1
    show_judge = not compact and not several
    head = ["#", "Model", *(["Judge"] if show_judge else []), "Overall", f"{100 * (1 - lb.alpha):.0f}% CI",
            "Scored", "Errors judge/cand." if compact else "Errors: judge / candidate"]

    def ranking(rows: Sequence[Row]) -> list[list[str]]:
        return [[str(r.rank), r.name or r.label, *([r.judge] if show_judge else []), fmt(r.overall),
                 f"[{fmt(r.ci_lo)}, {fmt(r.ci_hi)}]",
                 f"{r.counts['scored']}/{r.counts['questions']}" + (" *" if r.not_like_for_like else ""),
                 f"{r.counts['judge_errors']}/{r.counts['candidate_errors']}"
                 + (" (c=0)" if r.candidate_errors == "zero" else "")] for r in rows]

    def who(r: Row) -> list[str]:  # the row's name, and its judge when there are several
        return [r.name or r.label, r.judge] if several else [r.label]

    model = ["Model", "Judge"] if several else ["Model"]
    title = f"{lb.benchmark} {lb.benchmark_version}"
    dims = [[*who(r), *[fmt(r.dimensions.get(d)) for d in t.dimensions]] for r in lb.rows]
    cat = t.has_rules
    subsets = [[*who(r), *[fmt(r.subsets.get(x)) for x in subs], *([fmt(r.decay_pct, 1)] if t.decay and subs else []),
                *([str(r.counts["catastrophic"])] if cat else []), r.cost_text()] for r in lb.rows]
    from rubric_engine.report.html_views import breakdown_title  # the spec's own name for its subsets table

    last_title = ", ".join([*([breakdown_title(lb, "subset", "Subsets")] if subs else []),
                            *(["catastrophic failures"] if cat else []), "cost"])
    if several:  # one ranking per judge: a candidate is ranked against the others under the same judge only
        out = [(f"{title}, judge {j}", head, ranking([r for r in lb.rows if r.judge == j])) for j in judges]
        out += judge_tables(lb)
    else:
        judge = "" if show_judge or not judges else f" (judge: {judges[0]})"
        out = [(title + judge, head, ranking(lb.rows))]
    if t.dimensions:
        out.append(("Dimensions", [*model, *[t.label(d) for d in t.dimensions]], dims))
    for bid, btitle, groups in _tag_breakdowns(lb):
        out.append((btitle, [*model, *groups], [[*who(r), *[fmt(r.breakdowns.get(bid, {}).get(g)) for g in groups]]
                                                for r in lb.rows]))
    if lb.bradley_terry is not None:  # pairwise runs against one baseline (results/bradley_terry.py)
        bt = lb.bradley_terry
        out.append((f"Bradley-Terry ({bt['baseline']} = {bt['anchor']:g})", ["Model", "Rating",
                    f"{100 * (1 - lb.alpha):.0f}% CI"], [[x["label"] + (" (baseline)" if x["baseline"] else ""),
                    fmt(x["rating"], 1), f"[{fmt(x['lo'], 1)}, {fmt(x['hi'], 1)}]"] for x in bt["ratings"]]))
    out += control_tables(lb)  # style_control / length_control: the adjusted numbers beside the raw ones
    out += leaderboard_scale_tables(lb.rows)  # scores on a scale: turns and groups with intervals
    if t.rules and any(r.vetoes for r in lb.rows):  # each failure rule (veto group): the questions it zeroed
        out.append(("Vetoed questions by failure rule", [*model, *(f"vetoed: {label}" for _, label in t.rules)],
                    [[*who(r), *(str(r.vetoes.get(rid, 0)) for rid, _ in t.rules)] for r in lb.rows]))
    out.append((last_title[0].upper() + last_title[1:], [*model, *[t.subset_labels.get(x, x) for x in subs],
                *(["Decay %"] if t.decay and subs else []), *(["Catastr."] if cat else []), "Cost $"], subsets))
    return out


def _tag_breakdowns(lb: Leaderboard) -> list[tuple[str, str, list[str]]]:
    """(id, title, groups) of the spec's tag breakdowns (taxonomy, subset and scenario tables exist already)."""
    out = []
    for bid, title, by in lb.taxonomy.breakdowns:
        if by in ("item_tag", "example_tag"):
            groups = list(dict.fromkeys(g for r in lb.rows for g in r.breakdowns.get(bid, {})))
            out.append((bid, title, groups))
    return out


def _notes(lb: Leaderboard) -> list[str]:
    """The notes under the tables (intervals, decay, paired differences, length); the warnings come after them
    in leaderboard.md (`_warnings`) and go to stderr on the console."""
    t = lb.taxonomy
    rows = {r.label: r for r in lb.rows}
    several = len({r.judge for r in lb.rows}) > 1

    def pair(p: Any) -> str:  # under several judges: "judge J: a - b", each pair being under one judge
        a, b = rows.get(p.a), rows.get(p.b)
        if several and a is not None and b is not None:
            return f"judge {a.judge}: {a.name} - {b.name}"
        return f"{p.a} - {p.b}"

    out = [f"Intervals: percentile bootstrap, questions resampled with replacement ({lb.n_boot} resamples, "
           f"seed {lb.seed}); paired differences use the same draws for both models."]
    out += [n for n in [nested_runs.note([r.run for r in lb.rows])] if n]
    if t.decay:
        out.append(f"Decay % = ({t.decay[0]} - {t.decay[1]}) / {t.decay[2]} x 100 (base: {t.decay[2]}).")
    out += [f"{pair(p)}: {fmt(p.diff)} [{fmt(p.lo)}, {fmt(p.hi)}] "
            f"({'differs' if p.excludes_zero else 'not distinguishable'}, {p.questions} questions"
            f"{_noise_note(p)})" for p in lb.pairs if not p.error]  # failed pairs are among the warnings
    return out + length_notes(lb)


def _warnings(lb: Leaderboard) -> list[str]:
    return [f"warning: {w}" for w in lb.warnings]


def _noise_note(p: Any) -> str:
    """', within judge noise (SD x)' when the gap is smaller than the judges' own noise (stats/noise.py)."""
    if p.noise is None:
        return ""
    band = f"judge-only interval [{fmt(p.noise_lo)}, {fmt(p.noise_hi)}], " if getattr(p, "noise_lo", None) is not None else ""
    return f", {'within judge noise' if p.within_noise else 'larger than judge noise'} ({band}noise SD {fmt(p.noise)})"


def _markdown(lb: Leaderboard) -> str:
    def cell(x: str) -> str:
        return x.replace("|", "\\|").replace("\n", " ")

    lines = [f"# {lb.benchmark} {lb.benchmark_version} leaderboard"]
    for title, head, rows in _tables(lb):
        lines += ["", f"## {title}", "", "| " + " | ".join(map(cell, head)) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join([*lines, "", *(f"- {cell(n)}" for n in [*_notes(lb), *_warnings(lb)])]) + "\n"


def _csv_record(lb: Leaderboard, r: Row) -> dict[str, Any]:
    """Prefixed column names (dim., ability., subset.) so ids can never collide."""
    t = lb.taxonomy
    return {"rank": r.rank, "label": r.label, "candidate": r.candidate, "candidate_model": r.candidate_model,
            "judge": r.judge, "judge_model": r.judge_model, "overall": r.overall, "ci_lo": r.ci_lo, "ci_hi": r.ci_hi,
            **{f"dim.{d}": r.dimensions.get(d) for d in t.dimensions},
            **{f"ability.{a}": r.abilities.get(a) for a in ability_ids(t.dimensions)},
            **{f"subset.{x}": r.subsets.get(x) for x in _subsets(lb)},
            **{f"{bid}.{g}": r.breakdowns.get(bid, {}).get(g) for bid, _, groups in _tag_breakdowns(lb) for g in groups},
            "decay_pct": r.decay_pct, "decay_base": r.decay_base, **r.counts,
            **{f"cost_{k}": v for k, v in r.cost.items()},
            **{f"tokens_{k}_{part}": n for k, t in r.tokens.items() for part, n in t.items()},
            "stage": r.stage, "run_dir": r.run_dir,
            **_bt_columns(lb, r),
            "gap_to_next": next(("within judge noise" if p.within_noise else "" for p in lb.pairs if p.a == r.label), "")}


def _bt_columns(lb: Leaderboard, r: Row) -> dict[str, Any]:
    """bt_rating, bt_lo, bt_hi for a pairwise sweep's rows ({} otherwise: other CSVs keep their columns)."""
    if lb.bradley_terry is None:
        return {}
    x = next((x for x in lb.bradley_terry["ratings"] if x["label"] == r.label and not x["baseline"]), {})
    return {"bt_rating": x.get("rating"), "bt_lo": x.get("lo"), "bt_hi": x.get("hi")}


def _radar(lb: Leaderboard) -> tuple[str, list[str], dict[str, list[float | None]]] | None:
    """(title, axes, values per model) of the first breakdown with >= 3 groups: the abilities if the spec
    has a taxonomy with 3 or more, else a tag breakdown; None when no breakdown has 3 groups."""
    t, abilities = lb.taxonomy, ability_ids(lb.taxonomy.dimensions)
    if len(abilities) >= 3:
        from rubric_engine.report.html_views import breakdown_title  # the spec's label for its abilities

        return (breakdown_title(lb, "ability", "abilities"), [t.label(a) for a in abilities],
                {r.label: [r.abilities.get(a) for a in abilities] for r in lb.rows})
    for bid, title, groups in _tag_breakdowns(lb):
        if len(groups) >= 3:
            return title, groups, {r.label: [r.breakdowns.get(bid, {}).get(g) for g in groups] for r in lb.rows}
    return None


def write_leaderboard(lb: Leaderboard, out_dir: Path, agreement: Path | None = None,
                      chart_formats: tuple[str, ...] = ("png", "svg")) -> dict[str, Path]:
    """leaderboard.json/.csv/.md, the charts (in `chart_formats`, PNG and SVG by default) and report.html
    (embedding the charts in the first of those formats) in out_dir; agreement: an agreement.json for the
    report (default: one already in out_dir)."""
    from rubric_engine.report import charts, html_views
    from rubric_engine.report import html_page as html_report

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"json": out / "leaderboard.json", "csv": out / "leaderboard.csv", "md": out / "leaderboard.md"}
    write_json(files["json"], lb.to_dict())  # every output written atomically: a full disk leaves the old file
    records = [_csv_record(lb, r) for r in lb.rows]
    buf = io.StringIO()
    # the union of the rows' columns: runs of one sweep may differ in their roles (a baseline called or read)
    writer = csv.DictWriter(buf, fieldnames=list(dict.fromkeys(k for rec in records for k in rec)))
    writer.writeheader()
    writer.writerows({k: ("" if v is None else csv_cell(v)) for k, v in rec.items()} for rec in records)
    write_text(files["csv"], buf.getvalue())
    write_text(files["md"], _markdown(lb))
    t, subs = lb.taxonomy, _subsets(lb)
    base = f" (decay base: {t.subset_labels.get(t.decay[2], t.decay[2])})" if t.decay else ""
    images: dict[str, Path] = {}
    shown = chart_formats[0] if chart_formats else "png"  # the page embeds the first format asked
    ci = html_views.subset_intervals(lb) if subs else {}
    radar, scale = _radar(lb), score_range(lb.rows, t.scale)  # the charts' score axes span the runs' own range
    if radar is not None:  # a radar only for a breakdown with 3 or more groups
        name, axes, values = radar
        charts.radar_chart(axes, values, out / "radar", title=f"{lb.benchmark}: {name}", value_range=scale.bounds,
                           formats=chart_formats or (shown,))
        images[f"{name} (radar)"] = out / f"radar.{shown}"
    if subs:  # the subset / decay chart only when the spec declares subsets
        charts.subsets_chart([t.subset_labels.get(x, x) for x in subs], {r.label: [r.subsets.get(x) for x in subs]
                             for r in lb.rows}, out / "subsets",
                             title=f"{lb.benchmark}: {html_views.breakdown_title(lb, 'subset', 'subsets')}{base}",
                             notes={r.label: f"decay {fmt(r.decay_pct, 1)}%" for r in lb.rows if r.decay_pct is not None},
                             intervals={r.label: [ci.get(r.label, {}).get(x) for x in subs] for r in lb.rows},
                             formats=chart_formats or (shown,))
        images[html_views.breakdown_title(lb, "subset", "Subsets")] = out / f"subsets.{shown}"
    if any(r.run is not None for r in lb.rows):
        labels = [r.label for r in lb.rows]
        charts.length_chart({(r.label if labels.count(r.label) == 1 else f"{r.label} ({r.judge})"): _length_points(r, t.scale)
                             for r in lb.rows if r.run is not None},
                            out / "length", title=f"{lb.benchmark}: reply length vs question score",
                            value_range=scale.bounds,
                            formats=chart_formats or (shown,))
        images["Reply length vs question score (one point per question; Spearman rho in the title)"] = \
            out / f"length.{shown}"
    for name in ("radar", "subsets", "length"):
        for ext in chart_formats or (shown,):
            if (out / f"{name}.{ext}").is_file():
                files[f"{name}_{ext}"] = out / f"{name}.{ext}"
    agreement = agreement or html_views.find_agreement([out])
    from rubric_engine.report.items_view import find_items

    files["html"] = html_report.write_html(lb, out / "report.html", images=images, subset_ci=ci, agreement=agreement,
                                           items=find_items([out]))
    return files


def _length_points(r: Row, scale: float) -> tuple[list[float], list[float], str]:
    """(characters, question score on the spec's scale, rho note) for one row's scored questions."""
    pts = [(float(chars), score * scale) for chars, score in (r.run.lengths if r.run else [])]
    rho = (((r.run.summary.get("length") or {}).get("overall") or {}).get("chars")) if r.run else None
    note = f"(rho {rho['rho']:+.2f})" if rho else ""
    return [x for x, _ in pts], [y for _, y in pts], note


def print_leaderboard(lb: Leaderboard, console: "Console | None" = None, errors: "Console | None" = None) -> None:
    """The tables and the paired differences of adjacent ranks on `console` (stdout: results), the warnings on
    `errors` (stderr, as every warning of the command line: `> result.txt` keeps only the results)."""
    from rich import box
    from rich.table import Table

    from rubric_engine.text.terminal import SafeConsole, shown

    console = console or SafeConsole()
    for title, head, rows in _tables(lb, compact=True):
        table = Table(title=shown(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        for i, h in enumerate(head):
            text = h in ("Model", "Judge", "Judge A", "Judge B")  # names fold onto two lines rather than vanish
            table.add_column(h, justify="left" if text else "right", no_wrap=not text, overflow="fold",
                             min_width=min(12, max(len(r[i]) for r in rows)) if text else None)
        for row in rows:
            table.add_row(*(shown(cell) for cell in row))
        console.print(table)
    for note in _notes(lb):
        console.print(note, highlight=False, markup=False)
    errors = errors or SafeConsole(stderr=True)
    for warning in _warnings(lb):
        errors.print(warning, style="yellow", highlight=False, markup=False, soft_wrap=True)


def leaderboard_command(dirs: Sequence[Path], out_dir: Path | None = None, *, n_boot: int = 1000, seed: int = 0,
                        console: Console | None = None, errors: Console | None = None, allow_mixed_specs: bool = False,
                        agreement: Path | None = None, trust_code: bool = False, style_control: bool = False,
                        length_control: bool = False) -> tuple[Leaderboard, dict[str, Path]]:
    """CLI and end-of-sweep entry: collect, rank, write, print (results on `console`, stdout; warnings on `errors`,
    stderr). Default out_dir: the one dir given (where the end-of-sweep callback writes too), else ./leaderboard for
    several dirs."""
    from rubric_engine.text.terminal import SafeConsole

    dirs = [Path(d) for d in dirs]
    skipped: list[str] = []  # a damaged run directory costs the leaderboard that run, named in one line
    lb = build_leaderboard(collect_runs(dirs, allow_mixed_specs, trust_code, skipped), n_boot=n_boot, seed=seed,
                           style_control=style_control, length_control=length_control)
    lb.warnings[:0] = failed_jobs(dirs) + incomplete_runs(dirs) + skipped
    target = Path(out_dir) if out_dir is not None else (dirs[0] if len(dirs) == 1 else Path("leaderboard"))
    from rubric_engine.report.html_views import find_agreement

    if agreement is not None and not Path(agreement).is_file():
        raise ConfigError(f"leaderboard: agreement={agreement}: no such file; pass the agreement.json written by "
                          "`rubric-engine agree`")
    files = write_leaderboard(lb, target, agreement=agreement or find_agreement([target, *dirs]))
    console = console or SafeConsole()
    print_leaderboard(lb, console, errors)
    console.print(f"leaderboard written to {target} (report: {files['html']})", highlight=False, markup=False)
    return lb, files
