"""`rubric-engine filter`, `pilot` and `release`: the gates a benchmark passes on its way to a release.

Why apart from cli/mains.py: the three share a purpose (keep what separates replies, check a pilot, check the
judge against people before a release) and their option parsing; the work is in validity/pilot.py and
validity/release.py (and validity/consistency.py), this module only reads the options and prints.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rubric_engine.cli.args import COMMANDS, Parsed, as_int, as_list, parse
from rubric_engine.errors import ConfigError
from rubric_engine.spec.files import benchmark_search_path
from rubric_engine.text.terminal import shown

__all__ = ["gate_main", "as_fraction"]


def as_fraction(value: object, key: str, command: str) -> float:
    """A number in [0, 1] from an option, or a one-line error naming the key."""
    try:
        x = float(str(value))
    except ValueError:
        x = -1.0
    if not 0 <= x <= 1:
        raise ConfigError(f"{command}: {key}={value} is not a fraction; use a number from 0 to 1, e.g. {key}=0.75")
    return x


def _pilot(argv: Sequence[str]) -> int:
    from rubric_engine.spec.gates import PilotGate
    from rubric_engine.validity.pilot import declared, pilot_command

    parsed = parse(COMMANDS["pilot"], argv)
    dirs, opts = [Path(d).expanduser() for d in parsed.positionals], parsed.options
    t = declared(dirs, {k: as_fraction(opts[k], k, "pilot") for k in PilotGate.model_fields if k in opts})
    out = Path(str(opts["out"])).expanduser() if opts.get("out") else dirs[0] / "pilot"
    gate = pilot_command(dirs, out, t)
    for w in gate["warnings"]:
        print(f"warning: {shown(w, markup=False)}", file=sys.stderr)
    for c in gate["checks"]:
        value = "n/a" if c["value"] is None else f"{100 * c['value']:.1f}%"
        print(f"{'pass' if c['passed'] else 'FAIL'}: {c['check']} {value} (must be {c['rule']} "
              f"{100 * c['threshold']:.1f}%)")
    print(f"proposed hard set: {len(gate['hard_set'])} questions -> {out / 'hard_set.ids'}")
    print(f"pilot gate {'passed' if gate['passed'] else 'failed'}; wrote {out / 'pilot.json'}, pilot.md and the items "
          "report (items.md: the criteria to review first)")
    return 0 if gate["passed"] else 1


def _spec(parsed: Parsed, command: str) -> Any:
    """The benchmark= spec (a BenchmarkSpec)."""
    from rubric_engine.spec.load import load_spec

    if not parsed.get("benchmark"):
        raise ConfigError(f"{command}: no benchmark given; add benchmark=NAME or benchmark=DIR (the spec to release)")
    dirs = as_list(parsed.get("benchmark_dirs"))
    spec = load_spec(str(parsed.get("benchmark")), [*dirs, *benchmark_search_path()] if dirs else None)
    return spec


def _release(argv: Sequence[str]) -> int:
    from rubric_engine.validity.release import release_check, release_sheet, sheet_dir

    parsed = parse(COMMANDS["release"], argv)
    spec = _spec(parsed, "release")
    spec_dir, name, version, threshold = spec.dir, spec.name, str(spec.version), spec.release.agreement
    runs = [Path(d).expanduser() for d in as_list(parsed.get("runs"))]
    if not runs:
        raise ConfigError("release: no runs given; add runs=DIR[,DIR...] (the pilot runs of this version)")
    sheet = Path(str(parsed.get("sheet"))).expanduser() if parsed.get("sheet") else sheet_dir(spec_dir, version)
    labels = [Path(f).expanduser() for f in as_list(parsed.get("labels"))]
    if not labels:
        meta = release_sheet(spec_dir, name, version, runs, sheet, n=as_int(parsed.get("n", "60"), "n", "release", 1),
                             seed=as_int(parsed.get("seed", "0"), "seed", "release"))
        print(f"release sheet {meta['sheet_id']} for version {version}: {meta['replies']} replies, {meta['n']} items "
              f"-> {sheet / 'review.html'}, {sheet / 'review.csv'}; have people label it blind, then pass labels=FILE")
        return 0
    out = release_check(spec_dir, name, version, runs, labels, sheet, threshold)
    for w in out["warnings"]:
        print(f"warning: {shown(w, markup=False)}", file=sys.stderr)
    for j, v in out["judges"].items():
        agreement = "n/a" if v["agreement"] is None else f"{100 * v['agreement']:.1f}%"
        print(f"{'pass' if v['agreement'] is not None and v['agreement'] >= threshold else 'FAIL'}: {j} agrees with "
              f"the human majority on {agreement} of {v['items']} items (must be >= {100 * threshold:.1f}%)")
    print(f"release gate passed; wrote {out['note']}" if out["passed"] else
          f"release gate failed for version {version}; no release note written")
    return 0 if out["passed"] else 1


def _filter(argv: Sequence[str]) -> int:
    from rubric_engine.cli.runjudge import model_entry
    from rubric_engine.dataset.load import load_dataset
    from rubric_engine.models.cache import ResultCache, default_cache_dir
    from rubric_engine.models.entries import check_keys
    from rubric_engine.spec.load import load_spec
    from rubric_engine.validity.consistency import check_filterable, filter_command

    parsed = parse(COMMANDS["filter"], argv)
    for key, what in (("benchmark", "benchmark=NAME|DIR"), ("pairs", "pairs=FILE (JSONL: id, strong, weak)"),
                      ("judge", "judge=ENTRY (a conf/judge entry or a LiteLLM id)")):
        if not parsed.get(key):
            raise ConfigError(f"filter: no {key} given; add {what}")
    dirs = as_list(parsed.get("benchmark_dirs"))
    spec = load_spec(str(parsed.get("benchmark")), [*dirs, *benchmark_search_path()] if dirs else None)
    check_filterable(spec, str(parsed.get("by") or "criterion"))  # before the data is read
    data_path = parsed.get("data.path")
    questions = {q.id: q for q in load_dataset(spec, data_path).questions}
    source = Path(str(data_path)) if data_path else spec.data_path()
    default = spec.dir / f"{source.stem if source else spec.name}.filtered.jsonl"
    out = Path(str(parsed.get("out"))).expanduser() if parsed.get("out") else default
    judge = model_entry(str(parsed.get("judge")), "judge", None)
    check_keys(judge)
    try:
        report = filter_command(spec, questions, Path(str(parsed.get("pairs"))).expanduser(), judge,
                                ResultCache(default_cache_dir()), out, by=str(parsed.get("by") or "criterion"))
    except KeyboardInterrupt as exc:  # Ctrl-C / SIGTERM: one line, 130 / 143; the same command resumes
        from rubric_engine.models.interrupt import exit_code

        print("rubric-engine: filter interrupted; completed calls are cached: run the same command to resume "
              "(nothing was written)", file=sys.stderr)
        return exit_code(exc)
    unmeasured = [r for r in report["criteria"] if not r["pairs"] and not r["failed"]]
    for r in report["criteria"]:
        if r["pairs"] or r["failed"]:
            print(f"{'kept' if r['kept'] else 'dropped'} {r['qid']}#{r['index']}: {r['why']}")
    if unmeasured:
        print(f"dropped {len(unmeasured)} criteria of {len({r['qid'] for r in unmeasured})} question(s) with no pair "
              f"(not measured; listed in {out.name}.filter.json)")
    wrote = f"{out} ({report['rows']} rows) and " if report["rows"] else ""
    print(f"kept {report['kept']}, dropped {report['dropped']} of {report['kept'] + report['dropped']} criteria from "
          f"{report['pairs']} pair(s); {report['calls']} judge call(s), {report['cache_hits']} cached, "
          f"{report['failed_replies']} repl(y/ies) not judged; wrote {wrote}{out.name}.filter.json")
    if report["failed_replies"]:
        print(f"warning: the judge failed on {report['failed_replies']} repl(y/ies) (counted, never a pass): "
              f"{shown('; '.join(report['errors'])[:300], markup=False)}", file=sys.stderr)
    if not report["kept"]:
        print("warning: no criterion separates the pairs, so no filtered data was written; check the pairs (is the "
              "strong reply really better?) and the criteria", file=sys.stderr)
    return 1 if report["failed_replies"] or not report["kept"] else 0


def gate_main(name: str, argv: Sequence[str]) -> int:
    return {"filter": _filter, "pilot": _pilot, "release": _release}[name](argv)
