"""Each subcommand's command-line side: parse its `positional key=value` arguments (cli/args.py), call the
plain function that does the work, print what it did.

Why here: the functions that do the work (leaderboards, rescoring, review sheets, agreement, the audit, a new
variant) are called from Python too and know nothing of argument strings; the command line is the top layer.
Each function imports its worker when called, so `rubric-engine --help` pays for none of them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from rubric_engine.cli.args import COMMANDS, HelpRequested, as_bool, as_int, as_list, parse
from rubric_engine.errors import ConfigError

__all__ = ["draft_main", "criteria_review_main", "leaderboard_main", "new_main", "import_main", "review_main",
           "agree_main", "calibrate_main", "rescore_main", "audit_main", "items_main", "robustness_main", "estimate_main"]


def leaderboard_main(argv: Sequence[str]) -> int:
    """`rubric-engine leaderboard DIR [DIR...] [out=DIR] [bootstrap.samples=N] [bootstrap.seed=N] [agreement=FILE]
    [style_control=true] [length_control=true]`."""
    from rubric_engine.report.leaderboard import leaderboard_command

    parsed = parse(COMMANDS["leaderboard"], argv)
    agreement = parsed.get("agreement")
    leaderboard_command([Path(d) for d in parsed.positionals], Path(parsed.options["out"]).expanduser()
                        if parsed.get("out") else None,
                        n_boot=as_int(parsed.get("bootstrap.samples", "1000"), "bootstrap.samples", "leaderboard", 1),
                        seed=as_int(parsed.get("bootstrap.seed", "0"), "bootstrap.seed", "leaderboard", 0),
                        allow_mixed_specs=_flag(parsed.get("allow_mixed_specs")),
                        agreement=Path(agreement).expanduser() if agreement else None,
                        trust_code=_flag(parsed.get("trust_code")), style_control=_flag(parsed.get("style_control")),
                        length_control=_flag(parsed.get("length_control")))
    return 0


def new_main(argv: Sequence[str]) -> int:
    """`rubric-engine new NAME [extends=BENCHMARK] [dir=DIR] [locale=LL]`: create, validate, print next steps.
    Without extends= the benchmark starts from scratch (authoring/blank.py), never as a silent variant."""
    from rubric_engine.authoring.scaffold import check_name, create_blank, create_variant

    parsed = parse(COMMANDS["new"], argv)
    name, opts = parsed.positionals[0], parsed.options
    check_name(name)
    parent = opts.get("extends") or None
    if parent and Path(parent).name == name:
        raise ConfigError(f"new: {name!r} cannot extend itself; choose a new name (e.g. {name}_en)")
    directory, locale = Path(opts.get("dir") or "benchmarks").expanduser(), opts.get("locale") or None
    target = create_variant(name, parent, directory, locale) if parent else create_blank(name, directory, locale)
    files = sorted(p.name for p in target.iterdir())
    on_path = directory.resolve() == (Path.cwd() / "benchmarks").resolve()
    dirs = "" if on_path else f" benchmark_dirs=[{directory}]"
    how = f"extending {parent}" if parent else "from scratch, with 3 sample questions"
    print(f"created {target}/ ({', '.join(files)}), {how}; it loads and validates")
    print("next:")
    if parent:
        print(f"  1. edit {target / 'benchmark.yaml'}: description, locale, and a data: block for your own data")
        print(f"  2. rewrite the copied templates ({', '.join(f for f in files if f.endswith('.j2'))}) for your audience")
    else:
        print(f"  1. put your questions in {target / 'data.jsonl'} (the samples show the row format) and edit "
              f"{target / 'benchmark.yaml'}: description, topics")
        print(f"  2. rewrite the judge prompt ({', '.join(f for f in files if f.endswith('.j2'))}) for your criteria")
    print(f"  3. check it: rubric-engine validate benchmark={name}{dirs}")
    print(f"  4. try it without a key: rubric-engine benchmark={name}{dirs} candidate=mock judge=mock; then with a "
          f"model: candidate=<model> limit=5")
    print("  see docs/authoring.md for every key, the template variables and judge-agreement checks")
    return 0


def review_main(args: Sequence[str]) -> int:
    """`rubric-engine review export RUN_DIR ... key=value ...`."""
    from rubric_engine.report.fonts import font_face_head
    from rubric_engine.validity.review import USAGE, export_review

    if args and args[0] in ("criteria", "merge"):  # the expert review of drafted criteria: its own --help too
        return criteria_review_main(args[0], args[1:])
    if any(a in ("-h", "--help") for a in args):
        raise HelpRequested(COMMANDS["review"].help())  # one help style for every subcommand (cli/args.py)
    if not args or args[0] == "help":
        print(USAGE)
        return 0
    if args[0] != "export":
        raise ConfigError(f"review: unknown action {args[0]!r}; use `rubric-engine review export RUN_DIR ...` (or "
                          "review criteria DRAFTS / review merge SHEET...)")
    parsed = parse(COMMANDS["review"], args[1:])
    out = Path(parsed.get("out", "review"))  # type: ignore[arg-type]
    sheet = export_review([Path(d) for d in parsed.positionals], out, n=as_int(parsed.get("n", "100"), "n", "review export", 1),
                          seed=as_int(parsed.get("seed", "0"), "seed", "review export"),
                          stratify=as_list(parsed.get("stratify", "[ability,subset]")), unit=str(parsed.get("unit", "item")),
                          force=as_bool(parsed.get("force", "false"), "force", "review export"),
                          font_face=font_face_head)  # the CJK glyphs the sheet uses, as report.html embeds them
    print(f"review sheet {sheet['sheet_id']}: {sheet['n']} items from {sheet['replies']} replies "
          f"({len(sheet['runs'])} run(s)) -> {out / 'review.html'}, {out / 'review.csv'}", file=sys.stdout)
    return 0


def agree_main(args: Sequence[str]) -> int:
    """`rubric-engine agree RUN_DIR ... labels=FILE,FILE ... [out=DIR]`."""
    from rubric_engine.validity.agree import USAGE, agree_command

    if not args:  # --help: cli/args.parse prints the same help as every subcommand's
        print(USAGE)
        return 0
    parsed = parse(COMMANDS["agree"], args)
    dirs, opts = parsed.positionals, parsed.options
    files = [Path(f) for f in as_list(opts.get("labels"))]
    if not files:
        raise ConfigError("agree: no labels file given; add labels=FILE[,FILE...] (saved from review.html, or a CSV)")
    out = Path(opts["out"]) if opts.get("out") else Path(dirs[0]) / "agreement"
    result = agree_command([Path(d) for d in dirs], files, out, n_boot=as_int(parsed.get("n_boot", "1000"), "n_boot", "agree"),
                           seed=as_int(parsed.get("seed", "0"), "seed", "agree"), by=as_list(opts.get("by")))
    from rubric_engine.text.terminal import shown

    for w in result["warnings"]:
        print(f"warning: {shown(w, markup=False)}", file=sys.stderr)
    for text in result["headline"].values():
        print(shown(text, markup=False, newlines=True))
    print(f"wrote {out / 'agreement.json'}, {out / 'agreement.md'} and {out / 'agreement.html'}")
    return 0


def calibrate_main(args: Sequence[str]) -> int:
    """`rubric-engine calibrate RUN_DIR ... labels=FILE,FILE ... [raters=majority|mean] [by=FIELD] [power=true]`."""
    from rubric_engine.text.terminal import shown
    from rubric_engine.validity.calibrate import CALIBRATION_FILE, calibrate_command

    parsed = parse(COMMANDS["calibrate"], args)
    files = [Path(f) for f in as_list(parsed.get("labels"))]
    if not files:
        raise ConfigError("calibrate: no labels file given; add labels=FILE[,FILE...] (review export unit=reply, filled)")
    results = calibrate_command([Path(d) for d in parsed.positionals], files, raters=str(parsed.get("raters", "majority")),
                                by=str(parsed.get("by", "ability")),
                                power=as_bool(parsed.get("power", "true"), "power", "calibrate"))
    for r in results:
        for w in r["warnings"]:
            print(f"warning: {shown(w, markup=False)}", file=sys.stderr)
        sc = r["score"]
        lo, hi = sc["interval"]
        print(shown(f"{r['candidate']} (judge {r['judge']}): human-corrected {sc['estimate']:.1f} [{lo:.1f}, {hi:.1f}], "
                    f"judge-only {sc['judge_only']:.1f}, human-only {sc['human_only']['estimate']:.1f} "
                    f"({sc['labelled']} labelled of {sc['labelled'] + sc['unlabelled']} replies)", markup=False))
        print(f"wrote {Path(r['run']) / CALIBRATION_FILE} and {Path(r['run']) / 'calibration.md'}")
    _rebuild_reports([Path(r["run"]) for r in results])
    return 0


def _rebuild_reports(run_dirs: Sequence[Path]) -> None:
    """Each run's report.html again, so it shows what was just added beside its summary (a failure: one warning)."""
    from rich.console import Console

    from rubric_engine.report.run_page import write_run_report

    errors = Console(stderr=True, soft_wrap=True)
    for d in run_dirs:
        if write_run_report(d, errors) is not None:
            print(f"updated {d / 'report.html'}")


def rescore_main(argv: Sequence[str]) -> int:
    """`rubric-engine rescore RUN_DIR ... [scoring.formula=NAME] [failure_rules=on|off] [out=DIR]`."""
    from rubric_engine.results.rescore import rescore_command

    parsed = parse(COMMANDS["rescore"], argv)  # run dirs may be sweep job dirs named key=value
    dirs, opts = [Path(a) for a in parsed.positionals], parsed.options
    rules = str(parsed.get("failure_rules", "on")).lower()
    if rules not in ("on", "off", "true", "false"):
        raise ConfigError(f"rescore: failure_rules must be on or off, got {opts['failure_rules']!r}")
    rescore_command(dirs, Path(opts["out"]) if opts.get("out") else None, opts.get("scoring.formula") or None,
                    rules in ("on", "true"), trust_code=_flag(parsed.get("trust_code")),
                    coverage_k=opts.get("aggregation.coverage.k") or None)
    return 0


def audit_main(argv: Sequence[str]) -> int:
    """`rubric-engine audit RUN_DIR ... [family.NAME=FAMILY ...] [n_boot=N] [seed=S] [out=DIR]`."""
    from rubric_engine.validity.audit import USAGE, audit_command

    parsed = parse(COMMANDS["audit"], argv)  # run dirs may be sweep job dirs named key=value
    dirs, opts = [Path(a) for a in parsed.positionals], parsed.options
    families = {k[len("family."):]: v.strip().lower() for k, v in opts.items() if k.startswith("family.")}
    if any(not v for v in families.values()):
        raise ConfigError(f"audit: family.NAME= needs a family, e.g. family.my-judge=openai; usage: {USAGE}")
    n_boot, seed = as_int(parsed.get("n_boot", "1000"), "n_boot", "audit", 1), as_int(parsed.get("seed", "0"), "seed", "audit")
    audit_command(dirs, families=families, n_boot=n_boot, seed=seed, out=Path(opts["out"]) if opts.get("out") else None)
    return 0


def items_main(argv: Sequence[str]) -> int:
    """`rubric-engine items RUN_DIR ... [labels=FILE,...] [out=DIR] [hard=FRACTION]`."""
    from rubric_engine.text.terminal import shown
    from rubric_engine.validity.items_report import items_command, summary_paragraph

    parsed = parse(COMMANDS["items"], argv)
    dirs, opts = [Path(d) for d in parsed.positionals], parsed.options
    hard = None
    if parsed.get("hard"):
        try:
            hard = float(str(opts["hard"]))
        except ValueError:
            hard = -1.0
        if not 0 < hard <= 1:
            raise ConfigError(f"items: hard={opts['hard']} is not a fraction of the questions; use a number above 0 "
                              "and at most 1, e.g. hard=0.3")
    out = Path(opts["out"]).expanduser() if opts.get("out") else dirs[0] / "items"
    result = items_command(dirs, out, [Path(f) for f in as_list(opts.get("labels"))], hard,
                           n_boot=as_int(parsed.get("n_boot", "1000"), "n_boot", "items", 0),
                           seed=as_int(parsed.get("seed", "0"), "seed", "items"))
    for w in result.warnings:
        print(f"warning: {shown(w, markup=False)}", file=sys.stderr)
    print(shown(summary_paragraph(result), markup=False))
    if result.hard is not None:
        print(f"proposed hard set: {len(result.hard.ids)} questions -> {out / 'hard_set.ids'}")
    print(f"wrote {out / 'items.md'}, items.csv, items.html and items.json")
    return 0


def robustness_main(argv: Sequence[str]) -> int:
    """`rubric-engine robustness RUN_DIR check=order|granularity|paraphrase [n=N] [seed=S] [dry_run=true] [n_boot=N]
    [paraphraser=ENTRY] [out=DIR]`:
    the run's own judge entry and call settings (its .hydra/config.yaml), keys checked before any call."""
    from rubric_engine.cli.runjudge import model_entry, run_judge, run_spec
    from rubric_engine.models.entries import check_keys
    from rubric_engine.validity.robustness import robustness_command

    parsed = parse(COMMANDS["robustness"], argv)
    run_dir, opts = Path(parsed.positionals[0]).expanduser(), parsed.options
    check = str(opts.get("check") or "")
    if not check:
        raise ConfigError("robustness: which check? add check=order, check=granularity or check=paraphrase")
    dry = as_bool(parsed.get("dry_run", "false"), "dry_run", "robustness")
    n, seed = as_int(parsed.get("n", "50"), "n", "robustness", 1), as_int(parsed.get("seed", "0"), "seed", "robustness")
    n_boot = as_int(parsed.get("n_boot", "1000"), "n_boot", "robustness", 0)
    judge, cache, limits = run_judge(run_dir)
    paraphraser = model_entry(str(opts["paraphraser"]), "paraphraser", judge.timeout) if opts.get("paraphraser") else None
    if not dry:  # a dry run calls nothing, so it needs no key
        check_keys(judge, paraphraser if check == "paraphrase" else None)
    try:
        report = robustness_command(run_dir, check, judge, run_spec, n=n, seed=seed, dry_run=dry, n_boot=n_boot,
                                    out=Path(opts["out"]).expanduser() if opts.get("out") else None, cache=cache,
                                    limits=limits, paraphraser=paraphraser)
    except KeyboardInterrupt as exc:  # Ctrl-C / SIGTERM: one line, 130 / 143; the same command resumes
        from rubric_engine.models.interrupt import exit_code

        print("rubric-engine: robustness interrupted; completed calls are cached: run the same command to resume",
              file=sys.stderr)
        return exit_code(exc)
    if dry:
        print(f"robustness check={check}: {report['replies']} replies, {report['calls']} "
              f"{'paraphraser and judge' if check == 'paraphrase' else 'judge'} calls "
              f"({report['cached']} cached); dry run, nothing called")
        return 0
    print(report["paragraph"])
    if report["errors"]:
        print(f"{len(report['errors'])} re-judgment(s) failed (counted, not compared); see {check}.json",
              file=sys.stderr)
    print(f"wrote {Path(report['out']) / (check + '.md')} and {check}.json")
    return 0 if report["comparison"]["n"] else 1

def estimate_main(argv: Sequence[str]) -> int:
    """`rubric-engine estimate fit RUN_DIR... [anchors=N|SHARE] [out=FILE]` and
    `rubric-engine estimate score RUN_DIR... model=FILE [adaptive=K] [out=FILE] [seed=S]` (several runs: the rounds
    of an adaptive test of one model): every check made before anything is written (validity/estimate.py)."""
    from rubric_engine.store.layout import write_json
    from rubric_engine.validity.estimate import fit_command, score_command

    parsed = parse(COMMANDS["estimate"], argv)
    action, dirs, opts = parsed.positionals[0], [Path(d).expanduser() for d in parsed.positionals[1:]], parsed.options
    if action == "fit":
        try:
            share = float(str(opts.get("anchors", "0.2")))
        except ValueError:
            share = 0.0
        if not share > 0:
            raise ConfigError(f"estimate: anchors={opts.get('anchors')} is neither a number of questions nor a share; "
                              "use e.g. anchors=60 or anchors=0.2")
        out = Path(str(opts.get("out") or "item_model.json")).expanduser()
        model, anchors = fit_command(dirs, out, share)
        if not model["converged"]:  # written all the same: the parameters are the optimiser's last, and said so
            print(f"warning: the item fit stopped before converging (scipy L-BFGS-B); its estimates may be off: "
                  f"fit again with more runs, or check {out}'s items for extreme a or b", file=sys.stderr)
        print(f"fitted {len(model['items'])} items of {len(model['question_weights'])} questions on "
              f"{len(model['training'])} runs of {model['benchmark']} {model['spec_version']}; {len(anchors)} anchor "
              f"questions -> {out.parent / 'anchors.ids'}")
        print(f"wrote {out}")
        return 0
    if action != "score":
        raise ConfigError(f"estimate: unknown action {action!r}; use `estimate fit RUN_DIR...` or "
                          "`estimate score RUN_DIR model=FILE`")
    if not opts.get("model"):
        raise ConfigError("estimate score: give model=FILE (from `estimate fit`) after the run directory")
    result, record = score_command(dirs, Path(str(opts["model"])).expanduser(),
                                   adaptive=as_int(parsed.get("adaptive", "0"), "adaptive", "estimate", 0),
                                   seed=as_int(parsed.get("seed", "0"), "seed", "estimate"))
    out = Path(str(opts.get("out"))).expanduser() if opts.get("out") else dirs[-1] / "estimate.json"
    write_json(out, record)
    print(f"estimated full score {record['estimate']:.1f} (95% interval {record['interval'][0]:.1f} to "
          f"{record['interval'][1]:.1f}) from {len(result.estimate.asked)} of {result.total} questions: "
          f"{', '.join(result.estimate.asked)}")
    if result.next_ids:
        from rubric_engine.validity.items_report import ids_override

        print(f"next to ask: {ids_override(result.next_ids)}")
    print(f"wrote {out}")
    return 0


def _flag(value: object) -> bool:
    """A true/false option (`allow_mixed_specs=true`, `trust_code=true`); absent is false."""
    return str(value if value is not None else "false").lower() in ("true", "1", "yes")



def import_main(argv: Sequence[str]) -> int:
    """`rubric-engine import openai-evals FILE data=JSONL [out=DIR] [prompt=TEMPLATE]` or
    `rubric-engine import promptfoo FILE [out=DIR]`: write a spec directory, list what was not mapped."""
    from rubric_engine.authoring.imported import write_spec
    from rubric_engine.authoring.openai_evals import import_openai_eval
    from rubric_engine.authoring.promptfoo import import_promptfoo

    parsed = parse(COMMANDS["import"], argv)
    kind, file = parsed.positionals[0], Path(parsed.positionals[1]).expanduser()
    if kind == "openai-evals":
        if not parsed.get("data"):
            raise ConfigError("import openai-evals: the eval's items are needed; pass data=FILE.jsonl (nothing was written)")
        imported = import_openai_eval(file, Path(parsed.options["data"]).expanduser(),
                                      parsed.get("prompt") or "{{ item.input }}", _flag(parsed.get("trust_code")))
    elif kind == "promptfoo":
        for key in ("data", "prompt", "trust_code"):
            if parsed.get(key):
                raise ConfigError(f"import promptfoo: {key}= is for openai-evals; a promptfoo config holds its own "
                                  "prompts and tests (nothing was written)")
        imported = import_promptfoo(file)
    else:
        raise ConfigError(f"import: unknown kind {kind!r}; use openai-evals or promptfoo")
    imported.unmapped = list(dict.fromkeys(imported.unmapped))
    out = Path(parsed.get("out") or imported.name).expanduser()
    target = write_spec(imported, out)
    judged = sum(i.check is None for r in imported.rows for i in r.items)
    items = sum(len(r.items) for r in imported.rows)
    n = len(imported.rows)
    print(f"wrote {target}/: {n} question{'s' * (n != 1)}, {items} items ({items - judged} checked by the engine, "
          f"{judged} judged); it loads and validates")
    for name in imported.candidates:
        print(f"  candidate entry conf/candidate/{name}.yaml ({imported.candidates[name]['model']})")
    print(f"not mapped ({len(imported.unmapped)}, also in {target / 'UNMAPPED.md'}):" if imported.unmapped
          else "not mapped: nothing")
    for line in imported.unmapped:
        print(f"  - {line}")
    trust = " trust_code=true" if ":" in imported.formula else ""
    print(f"try it without a key: rubric-engine benchmark={target} candidate=mock judge=mock{trust}")
    return 0


def draft_main(args: Sequence[str]) -> int:
    """`rubric-engine draft benchmark=NAME|DIR drafter=ENTRY ...`: 0 = every question drafted; 2 = a reply was not in
    the declared format after its re-asks (bad input, as the issue counts it; the other drafts are written); 1 = a
    call failed for good."""
    from rubric_engine.authoring.draft import DraftOptions, draft

    p = parse(COMMANDS["draft"], args)
    missing = [k + "=" for k in ("benchmark", "drafter") if not p.get(k)]
    if missing:
        raise ConfigError(f"draft: missing {', '.join(missing)}; usage: {COMMANDS['draft'].usage()}")
    opts = DraftOptions(
        benchmark=str(p.get("benchmark")), drafter=str(p.get("drafter")), n=as_int(p.get("n", "5"), "n", "draft", 1),
        out=Path(str(p.get("out", "drafts.jsonl"))).expanduser(),
        references=Path(str(p.get("references"))).expanduser() if p.get("references") else None,
        api_base=p.get("api_base"), api_key_env=p.get("api_key_env"), data_path=p.get("data.path"),
        data_cache_dir=p.get("data.cache_dir"),
        limit=as_int(p.get("limit"), "limit", "draft", 1) if p.get("limit") else None,
        ids=as_list(p.get("ids")) or None, concurrency=as_int(p.get("concurrency", "8"), "concurrency", "draft", 1),
        cache_dir=p.get("cache.dir"), benchmark_dirs=as_list(p.get("benchmark_dirs")))
    rep = draft(opts)
    print(f"drafted {rep['criteria']} criteria for {rep['drafted']}/{rep['questions']} question(s) -> {rep['drafts']} "
          "(a review file: nothing enters the data before `rubric-engine review criteria` and `review merge`)")
    for f in rep["failures"]:
        print(f"FAILED {f['id']}: {f['error']}")
    unusable = [f["id"] for f in rep["failures"] if f["kind"] == "format"]
    if unusable:
        ids = ",".join(unusable)
        raise ConfigError(f"draft: {len(unusable)} question(s) got no reply in the declared format ({ids}); the other "
                          f"drafts are in {rep['drafts']}; adjust draft.j2 or choose another drafter=, then draft them "
                          f"again with ids=[{ids}] and another out= (answered calls come from the cache)")
    return 1 if rep["failed"] else 0


def criteria_review_main(action: str, args: Sequence[str]) -> int:
    """`review criteria DRAFTS [experts=a,b] [out=DIR]` and `review merge SHEET... rule=majority|all [into=FILE]`."""
    from rubric_engine.authoring.criteria_review import export_criteria_sheets, merge_sheets

    p = parse(COMMANDS[f"review {action}"], args)
    if action == "criteria":
        from rubric_engine.report.fonts import font_face_head

        out = Path(str(p.get("out", "criteria_review"))).expanduser()
        sheet = export_criteria_sheets(Path(p.positionals[0]).expanduser(), as_list(p.get("experts", "expert")), out,
                                       font_face=font_face_head)
        print(f"criteria sheet {sheet['sheet_id']}: {sheet['criteria']} drafted criteria, {len(sheet['experts'])} "
              f"expert sheet(s) -> {', '.join(sheet['sheets'])}, {out / 'criteria.html'}")
        return 0
    if not p.get("rule"):
        raise ConfigError("review merge: missing rule=; use rule=majority or rule=all")
    rep = merge_sheets([Path(x).expanduser() for x in p.positionals], str(p.get("rule")),
                       Path(str(p.get("into"))).expanduser() if p.get("into") else None,
                       Path(str(p.get("sheet"))).expanduser() if p.get("sheet") else None)
    a = rep["agreement"]
    pct = "n/a" if a["percent_agreement"] is None else f"{a['percent_agreement']:.1%}"
    alpha = "n/a" if a["krippendorff_alpha"] is None else f"{a['krippendorff_alpha']:.3f}"
    print(f"merged {len(rep['experts'])} expert sheet(s), rule={rep['rule']}: kept {rep['kept']}/{rep['drafted']} "
          f"drafted criteria -> {rep['into']}")
    print(f"agreement between experts (keep/reject): {pct} of expert pairs agree, Krippendorff's alpha {alpha}")
    return 0
