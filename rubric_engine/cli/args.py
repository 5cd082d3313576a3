"""One argument style and one parser for every `rubric-engine` subcommand: positionals, then key=value.

Why one module: a user who learnt `rubric-engine benchmark=my_bench limit=5` should not meet
`--extends X` in one subcommand and `out=X` in the next. Every subcommand is declared once in COMMANDS
(usage, positionals, keys, examples); `parse` gives `--help` to all of them, rejects unknown keys with a
"did you mean" and never imports Hydra, so it also serves code that runs before Hydra starts.
`as_int` / `as_list` turn option values into numbers and lists with the same one-line errors.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubric_engine.errors import ConfigError
from rubric_engine.models.named import CONFIG_DIRS_ENV, config_dirs  # the user's entry directories

__all__ = ["Command", "Parsed", "HelpRequested", "COMMANDS", "parse", "as_int", "as_bool", "as_list", "did_you_mean",
           "config_dirs", "CONFIG_DIRS_ENV"]

COMMON = {"debug": "true: show the full traceback on errors"}


class HelpRequested(Exception):
    """Raised by `parse` for -h / --help; its message is the help text (print it, exit 0)."""


@dataclass(frozen=True)
class Command:
    """How one subcommand is called: `positionals` are (METAVAR, help); a METAVAR ending in ... repeats."""

    name: str
    summary: str
    positionals: Sequence[tuple[str, str]] = ()
    options: Mapping[str, str] = field(default_factory=dict)
    required_positionals: int = 0
    examples: Sequence[str] = ()
    details_from: str = ""  # "module:NAME" of a longer description kept beside the command's code
    unknown_word: str = "key"  # "unknown <word> 'k'": review, agree, rescore and audit have always said "option"
    missing: str = ""  # the error for a missing required positional (default: "missing METAVAR")

    def details(self) -> str:
        """The command's own long description, without its usage lines (they would repeat ours)."""
        if not self.details_from:
            return ""
        import importlib

        module, name = self.details_from.split(":")
        text = str(getattr(importlib.import_module(module), name))
        return text.split("\n\n", 1)[1].strip() if "\n\n" in text else ""

    def usage(self) -> str:
        pos = " ".join(m if i < self.required_positionals else f"[{m}]" for i, (m, _) in enumerate(self.positionals))
        opts = " ".join(f"[{k}=...]" for k in self.options)
        return " ".join(x for x in (f"rubric-engine {self.name}", pos, opts) if x)

    def help(self) -> str:
        width = max([len(m) for m, _ in self.positionals] + [len(k) + 4 for k in {**self.options, **COMMON}] + [8])
        lines = [f"usage: {self.usage()}", "", self.summary, ""]
        if self.details():
            lines += [self.details(), ""]
        if self.positionals:
            lines += ["arguments:"] + [f"  {m:<{width}}  {h}" for m, h in self.positionals] + [""]
        lines += ["options (key=value):"] + [f"  {k + '=...':<{width}}  {h}" for k, h in {**self.options, **COMMON}.items()]
        if self.examples:
            lines += ["", "examples:"] + [f"  {e}" for e in self.examples]
        return "\n".join(lines)


@dataclass
class Parsed:
    positionals: list[str]
    options: dict[str, str]

    def get(self, key: str, default: str | None = None) -> str | None:
        """The option's value, or `default` when it was not given (or given empty)."""
        value = self.options.get(key)
        return default if value is None or value == "" else value

    @property
    def debug(self) -> bool:
        return self.options.get("debug", "false").lower() in ("true", "1", "yes")


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """' (did you mean X?)' for the closest known word, or ''."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _pattern_key(key: str, known: Mapping[str, str]) -> bool:
    """`family.my-judge` matches a declared `family.NAME` (a key with a user-chosen last part)."""
    return any(k.endswith(".NAME") and key.startswith(k[:-4]) and len(key) > len(k) - 4 for k in known)


def parse(cmd: Command, args: Sequence[str]) -> Parsed:
    """Split args into positionals and key=value options; -h/--help raises HelpRequested.

    The one parser of every subcommand's arguments. An argument is a positional when it has no `=`, when
    its key holds a `/` or starts with `.` (a path), or, for commands taking DIR..., when it names an
    existing path (sweep job directories are named `key=value`). Unknown keys and `--options` are one-line
    ConfigErrors with a "did you mean"; nothing is converted here (see as_int, as_list)."""
    if any(a in ("-h", "--help") for a in args):
        raise HelpRequested(cmd.help())
    known = {**cmd.options, **COMMON}
    repeats = bool(cmd.positionals) and cmd.positionals[-1][0].endswith("...")
    out = Parsed([], {})
    for a in args:
        key, eq, value = a.partition("=")
        if a.startswith("-"):
            bare = key.lstrip("-").replace("-", "_")
            hint = f"; write {bare}=VALUE" if bare in known else ""
            raise ConfigError(f"{cmd.name}: unknown option {a!r}{hint}; usage: {cmd.usage()} (see --help)")
        if eq and key and "/" not in key and not key.startswith(".") and not (repeats and Path(a).exists()):
            if key not in known and not _pattern_key(key, known):
                raise ConfigError(f"{cmd.name}: unknown {cmd.unknown_word} {key!r}{did_you_mean(key, list(known))}; "
                                  f"known keys: {', '.join(known)} (see `rubric-engine {cmd.name} --help`)")
            out.options[key] = value
            continue
        if not cmd.positionals:
            raise ConfigError(f"{cmd.name}: argument {a!r} is not key=value; usage: {cmd.usage()}")
        out.positionals.append(a)
    if len(out.positionals) > len(cmd.positionals) and not repeats:
        extra = out.positionals[len(cmd.positionals)]
        raise ConfigError(f"{cmd.name}: unexpected argument {extra!r}; usage: {cmd.usage()}")
    if len(out.positionals) < cmd.required_positionals:
        missing = cmd.missing or f"missing {cmd.positionals[len(out.positionals)][0]}"
        raise ConfigError(f"{cmd.name}: {missing}; usage: {cmd.usage()}")
    return out


def as_int(value: Any, key: str, command: str, minimum: int = 0) -> int:
    """An option's whole number, at least `minimum`; a one-line ConfigError otherwise."""
    try:
        n = int(str(value))
    except ValueError:
        raise ConfigError(f"{command}: {key}={value!r} is not a whole number") from None
    if n < minimum:
        raise ConfigError(f"{command}: {key} must be at least {minimum}, got {n}")
    return n


def as_bool(value: Any, key: str, command: str) -> bool:
    """An option's true / false; a one-line ConfigError for anything else (never a silent false)."""
    text = str(value).strip().lower()
    if text not in ("true", "false", "1", "0", "yes", "no"):
        raise ConfigError(f"{command}: {key}={value!r} is not valid; use true or false")
    return text in ("true", "1", "yes")


def as_list(value: Any) -> list[str]:
    """`a,b`, `[a,b]` or a list -> ['a', 'b']; '' or None -> []."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    text = str(value).strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return [p.strip().strip("'\"") for p in text.split(",") if p.strip()]


_RUN_DIRS: dict[str, Any] = {"unknown_word": "option", "missing": "no run directory given"}
_BENCH = "a benchmark name on the search path, or a spec directory"
COMMANDS: dict[str, Command] = {
    "validate": Command(
        "validate", "Check a benchmark spec and its data; print the taxonomy and scenario tables with counts.",
        [("BENCHMARK", _BENCH + " (same as benchmark=)")],
        {"benchmark": _BENCH, "benchmark_dirs": "[DIR,...] searched first for specs",
         "data.path": "a local data file instead of the pinned download", "data.cache_dir": "where downloads are kept",
         "trust_code": "true: a spec's module:function scoring formula may be imported (runs its code)"},
        examples=["rubric-engine validate my_bench", "rubric-engine validate benchmark=my_bench data.path=rows.jsonl"]),
    "cache": Command(
        "cache", "Show or empty the durable cache of completed model calls.",
        [("ACTION", "info (default) or clear")], {"cache.dir": "the cache directory (default: $RUBRIC_ENGINE_CACHE "
                                                   "or $XDG_CACHE_HOME/rubric-engine/calls)"},
        examples=["rubric-engine cache info", "rubric-engine cache clear cache.dir=/tmp/calls"]),
    "leaderboard": Command(
        "leaderboard", "Rank stored run directories (or sweep directories holding them) with bootstrap intervals.",
        [("DIR...", "run or sweep directories")],
        {"out": "output directory (default: the one DIR given, or ./leaderboard)",
         "bootstrap.samples": "bootstrap resamples (default 1000)", "bootstrap.seed": "bootstrap seed (default 0)",
         "allow_mixed_specs": "true: rank runs made with different versions of the spec (different spec_hash)",
         "trust_code": "true: a run's module:function scoring formula may be imported to rebuild its intervals",
         "agreement": "an agreement.json (from `agree`) to show in report.html (default: one in out= or a DIR)",
         "style_control": "true: pairwise runs also ranked with reply length and markdown counts held equal",
         "length_control": "true: each run's score also adjusted to a common reply length"},
        required_positionals=1, examples=["rubric-engine leaderboard multirun/my_bench/2026-11-22_10-00-00"]),
    "new": Command(
        "new", "Create a benchmark: from scratch (a generic English spec with 3 sample questions), or with extends= a "
               "variant of another, with copies of its templates to edit.",
        [("NAME", "the new benchmark's name")],
        {"extends": "the parent benchmark of a variant (default: none, a benchmark from scratch)",
         "dir": "where to create it (default: ./benchmarks)",
         "locale": "the benchmark's locale (default: en from scratch, the parent's for a variant)"},
        required_positionals=1, examples=["rubric-engine new my_bench",
                                          "rubric-engine new my_variant extends=my_bench locale=en"]),
    "localize": Command(
        "localize", "Translate and culturally adapt a benchmark's data with a model; writes a review CSV.",
        (), {"source": "the benchmark to translate", "target": "the new benchmark's name",
             "locale": "target locale, e.g. en", "model": "LiteLLM model id of the translator",
             "api_base": "translator server URL", "api_key_env": "env var holding the translator's key",
             "data.path": "local source data file", "data.cache_dir": "where downloads are kept",
             "limit": "first N questions", "ids": "a,b,... selected question ids", "out": "output directory",
             "review": "an edited review CSV to apply", "concurrency": "calls in flight",
             "rpm": "requests-per-minute cap", "timeout": "seconds per call", "cache.dir": "call cache directory",
             "benchmark_dirs": "[DIR,...] searched first for specs"},
        examples=["rubric-engine localize source=my_bench target=my_bench_en locale=en model=openai/gpt-4o"]),
    "review": Command(
        "review export", "Export a blind, stratified review sheet (review.html, review.csv, sheet.json) of judged items "
                  "from run directories, for people to label.",
        [("RUN_DIR...", "run directories (several candidates or judges)")],
        {"n": "items to sample (default 100)", "seed": "sampling seed (default 0)",
         "stratify": "[FIELD,...] item fields to stratify by (default [ability,subset])",
         "unit": "item (default) or reply: sample whole replies", "out": "output directory (default review/)",
         "force": "true: replace a sheet already in out= (its labels are lost)"},
        required_positionals=1, examples=["rubric-engine review export outputs/run1 outputs/run2 n=200 out=sheet"],
        details_from="rubric_engine.validity.review:USAGE", **_RUN_DIRS),
    "draft": Command(
        "draft", "Draft criteria per question with a model (the spec's draft.j2 prompt, or the default) into a "
                 "drafts file for expert review; never into the data.",
        (), {"benchmark": _BENCH, "drafter": "a model entry (mock) or a LiteLLM id", "n": "criteria per question "
             "(default 5)", "out": "the drafts JSONL (default drafts.jsonl; its report beside it)",
             "references": "a JSONL of {id, reference} and/or {id, chosen, rejected} rows shown to the drafter",
             "api_base": "drafter server URL", "api_key_env": "env var holding the drafter's key",
             "data.path": "a local data file", "data.cache_dir": "where downloads are kept", "limit": "first N questions",
             "ids": "a,b,... selected question ids", "concurrency": "calls in flight", "cache.dir": "call cache directory",
             "benchmark_dirs": "[DIR,...] searched first for specs"},
        examples=["rubric-engine draft benchmark=my_bench drafter=mock n=5 out=drafts.jsonl"]),
    "review criteria": Command(
        "review criteria", "Export drafted criteria as one sheet per expert (CSV) and a readable criteria.html.",
        [("DRAFTS", "the drafts file `draft` wrote")],
        {"experts": "a,b,c: one sheet each (default: expert)", "out": "output directory (default criteria_review/)"},
        required_positionals=1, examples=["rubric-engine review criteria drafts.jsonl experts=ana,ben,chen out=sheets"]),
    "review merge": Command(
        "review merge", "Merge experts' criteria sheets by a rule, report their agreement, write kept criteria into "
                        "a new data file.",
        [("SHEET...", "the experts' filled criteria-EXPERT.csv files")],
        {"rule": "majority (more than half keep) or all (every expert keeps)",
         "into": "the new data file (default: DATA.reviewed.jsonl beside the original; never the original)",
         "sheet": "the directory `review criteria` wrote (default: the first SHEET's directory)"},
        required_positionals=1, examples=["rubric-engine review merge sheets/criteria-ana.csv sheets/criteria-ben.csv "
                                          "rule=majority into=data.v2.jsonl"]),
    "agree": Command(
        "agree", "Judge-human and human-human agreement on labelled items; writes agreement.json, .md and .html.",
        [("RUN_DIR...", "run directories whose verdicts were labelled")],
        {"labels": "FILE[,FILE...] labels saved from review.html, the filled review.csv, or JSONL/CSV",
         "out": "output directory (default RUN_DIR/agreement)", "by": "[FIELD,...] extra breakdowns",
         "n_boot": "bootstrap resamples (default 1000)", "seed": "bootstrap seed (default 0)"},
        required_positionals=1, examples=["rubric-engine agree outputs/run1 labels=labels.jsonl"],
        details_from="rubric_engine.validity.agree:USAGE", **_RUN_DIRS),
    "calibrate": Command(
        "calibrate", "The score people would give each run, from its judge's scores and whole replies people labelled "
                     "(PPI++), with a 95% interval beside the judge-only score; judge bias per criterion group. Writes "
                     "calibration.json and calibration.md into each run directory.",
        [("RUN_DIR...", "run or sweep directories whose replies were labelled")],
        {"labels": "FILE[,FILE...] labels of whole replies (review export unit=reply), as for agree",
         "raters": "majority (default: the majority verdict per criterion) or mean (the mean of the raters' scores)",
         "by": "the item field grouping the judge's bias (default ability)",
         "power": "true (default): PPI++ with the power-tuned lambda; false: plain PPI"},
        required_positionals=1, examples=["rubric-engine calibrate outputs/run1 labels=review/review.csv"],
        details_from="rubric_engine.validity.calibrate:USAGE", **_RUN_DIRS),
    "rescore": Command(
        "rescore", "Recompute every score of stored runs from their verdicts (samples.jsonl); no model is called. "
                   "Writes summary.json, samples.jsonl, spec.resolved.json and a complete manifest per run, plus "
                   "compare.md / compare.json: which abilities and ranks move.",
        [("RUN_DIR...", "run or sweep directories")],
        {"scoring.formula": "log_normalised, linear, met_over_positive, a plugin's name or module:function "
                            "(default: the run's own)",
         "failure_rules": "on (default) or off", "out": "output directory (default: RUN_DIR/rescore-<formula>[-norules]/)",
         "aggregation.coverage.k": "a coverage spec's k: a whole number of criteria or a fraction between 0 and 1 "
                                   "(default: the run's own)",
         "trust_code": "true: a module:function scoring formula (the run's or the one given) may be imported"},
        required_positionals=1, examples=["rubric-engine rescore outputs/run1 scoring.formula=linear failure_rules=off"],
        **_RUN_DIRS),
    "audit": Command(
        "audit", "Self-preference audit: for each judge, the share of items the other judges' majority failed that "
                 "it passes, for candidates of its own family vs other families (bootstrap interval over questions), "
                 "and each candidate's rank under each judge alone. Writes audit.json and audit.md.",
        [("RUN_DIR...", "run or sweep directories: every judge grading every candidate's same replies")],
        {"family.NAME": "the family of model NAME when its entry has no family: (e.g. family.my-judge=openai)",
         "n_boot": "bootstrap resamples (default 1000)", "seed": "bootstrap seed (default 0)",
         "out": "output directory (default: the one DIR given, else ./audit)"},
        required_positionals=1, examples=["rubric-engine audit multirun/my_bench/2026-11-22_10-00-00 family.local-qwen=qwen"],
        **_RUN_DIRS),
    "items": Command(
        "items", "Which rubric criteria carry no signal, flip or are disputed, and a proposed hard set, from stored "
                 "runs (no model is called).",
        [("RUN_DIR...", "run or sweep directories of one benchmark (several candidates)")],
        {"labels": "FILE[,FILE...] human labels (as for agree): adds human disagreement per criterion",
         "out": "output directory (default RUN_DIR/items)",
         "hard": "FRACTION: propose a hard set of that share of the questions (writes hard_set.ids)",
         "n_boot": "bootstrap resamples for the alpha intervals (default 1000)", "seed": "bootstrap seed (default 0)"},
        required_positionals=1, examples=["rubric-engine items multirun/my_bench/2026-11-22_10-00-00 hard=0.3"],
        details_from="rubric_engine.validity.itemsdiag:USAGE", **_RUN_DIRS),
    "estimate": Command(
        "estimate", "A full score from a subset of the questions: `fit` item parameters on stored runs of one benchmark "
                    "(writes item_model.json and anchors.ids, the anchor subset as an ids= override), then `score` a run "
                    "that asked only some questions (the estimated full score, its 95% interval, the questions used).",
        [("ACTION", "fit or score"), ("RUN_DIR...", "fit: run or sweep directories (5 runs at least); score: a run, "
                                                   "or the runs of one model's adaptive rounds")],
        {"out": "fit: the item model file (default ./item_model.json); score: the estimate file (default "
                "the last RUN_DIR/estimate.json)",
         "anchors": "fit: anchor questions, a number or a share of the questions (default 0.2)",
         "model": "score: the item model file from `estimate fit`",
         "adaptive": "score: also print the K questions not yet asked that would shrink the estimate's error most "
                     "(the next round's ids=)",
         "seed": "score: the interval's simulation seed (default 0)"},
        required_positionals=2,
        examples=["rubric-engine estimate fit multirun/my_bench/2026-11-22_10-00-00 anchors=0.2 out=bank/item_model.json",
                  "rubric-engine estimate score outputs/my_bench/2026-11-28_10-00-00_ab12cd model=bank/item_model.json"],
        unknown_word="option", missing="needs an ACTION (fit or score) and run directories"),
    "robustness": Command(
        "robustness", "Re-judge a seeded sample of a finished run with the criteria in another order (check=order: hit "
                      "rate by shown position, flip rate) or one criterion per call (check=granularity: agreement and "
                      "kappa with the run's verdicts) or every criterion reworded by a model (check=paraphrase: flip rate); the run's "
                      "judge, every call cached. Writes "
                      "RUN_DIR/robustness/<check>.json and .md.",
        [("RUN_DIR", "one complete run directory graded by one judge")],
        {"check": "order, granularity or paraphrase",
         "paraphraser": "paraphrase: the model entry (conf/judge/ or conf/candidate/) or LiteLLM id that rewords the "
                        "criteria (default: the run's judge)",
         "n": "replies to re-judge (default 50)", "seed": "sampling and permutation seed (default 0)",
         "dry_run": "true: count the calls (and how many are cached), call nothing",
         "n_boot": "bootstrap resamples for the intervals (default 1000)",
         "out": "output directory (default RUN_DIR/robustness)"},
        required_positionals=1, examples=["rubric-engine robustness outputs/run1 check=order n=50"],
        details_from="rubric_engine.validity.robustness:USAGE", **_RUN_DIRS),
    "data": Command(
        "data", "Download a benchmark's pinned data into the data cache (checked against its sha256) and print "
                "the path.", [("ACTION", "fetch (default) or path (print where it is, download nothing)")],
        {"benchmark": _BENCH, "benchmark_dirs": "[DIR,...] searched first for specs",
         "data.cache_dir": "where downloads are kept (default: $XDG_CACHE_HOME/rubric-engine/data)"},
        examples=["rubric-engine data fetch benchmark=my_bench"]),
    "serve-reward": Command(
        "serve-reward", "Serve a benchmark's rubric score as an OpenRLHF-compatible remote reward (POST /get_reward) "
                        "until Ctrl-C or SIGTERM.",
        (), {"benchmark": "the benchmark", "judge": "the judge entry (default: the spec's)",
             "port": "port (default 5000; 0: any free port, printed)",
             "host": "address (default 127.0.0.1; another needs token_env=)",
             "token_env": "an environment variable holding a token every request must send (Authorization: Bearer)",
             "max_body_mb": "the largest request body in MiB (default 32; 413 beyond)",
             "max_requests": "requests read or judged at once (default 4; 503 with Retry-After beyond)",
             "read_timeout": "seconds a connection may stay silent while sending its request (default 60)",
             "id_column": "what the requests' labels are (default: the spec's id field)",
             "failure_score": "the float a failed judgment is sent as, flagged judge_failed=1 (default 0.0)",
             "shadow": "a second judge entry for a share of rollouts", "shadow_fraction": "that share (0..1)",
             "counts_path": "a JSON Lines file with one line of counts per batch",
             "pool": "N: each batch judged by N Ray actors (concurrency= is per actor; needs the ray extra)",
             "ray": "the Ray cluster of the pool: local (default), auto, HOST:PORT or ray://HOST:10001",
             "KEY": "any run key: judge.api_base=, data.path=, concurrency=, rpm=, cache.enabled=, ..."},
        examples=["rubric-engine serve-reward benchmark=my_bench judge=gpt-4.1 port=5000 concurrency=64"]),
    "view": Command(
        "view", "Write one offline HTML index of every run and sweep under the directories (state, benchmark, models, "
                "overall with its interval, date, wall time, cost, report links; pick runs to compare), and open it "
                "or serve it on 127.0.0.1.",
        [("DIR...", "directories holding runs or sweeps (default: outputs/ and multirun/)")],
        {"out": "the index file (default ./runs.html)", "open": "false: do not open a browser (it opens only at "
         "a terminal)", "serve": "true: serve the index and the runs' reports on 127.0.0.1 until Ctrl-C instead",
         "port": "serve=true: the port (default 8000; 0: any free port, printed)"},
        examples=["rubric-engine view", "rubric-engine view multirun/my_bench serve=true port=8080"],
        unknown_word="option"),
    "show": Command(
        "show", "Print one question's whole story from a run directory: its record, then every call it made "
                "(the rendered messages, the raw reply, parse errors and re-asks, retries, tokens, cost, latency, "
                "cache hits).",
        [("RUN_DIR", "a run directory"), ("QUESTION", "the question's id (as in samples.jsonl)")], {},
        required_positionals=2,
        examples=["rubric-engine show outputs/my_bench/2026-11-25_10-00-00_ab12cd q017",
                  "rubric-engine show outputs/my_bench/2026-11-25_10-00-00_ab12cd q017 > q017.txt"],
        unknown_word="option", missing="needs RUN_DIR and QUESTION (a question id)"),
    "prompts": Command(
        "prompts", "Render one question's candidate and judge prompts (one per criterion where the judge takes one "
                   "at a time) from the spec and data, calling no model; the candidate's reply is a marked "
                   "placeholder.",
        [("BENCHMARK", _BENCH + " (same as benchmark=)")],
        {"question": "the question's id in the data", "benchmark": _BENCH,
         "benchmark_dirs": "[DIR,...] searched first for specs",
         "data.path": "a local data file instead of the pinned download", "data.cache_dir": "where downloads are kept",
         "trust_code": "true: a spec's module:function scoring formula may be imported (runs its code)"},
        examples=["rubric-engine prompts my_bench question=q3",
                  "rubric-engine prompts benchmark=my_bench data.path=rows.jsonl question=q3"]),
    "import": Command(
        "import", "Write a spec directory from an OpenAI eval (its JSON and data JSONL) or a promptfoo config; what "
                  "has no counterpart is listed (UNMAPPED.md), an unknown grader, assertion or field stops it.",
        [("KIND", "openai-evals or promptfoo"), ("FILE", "the eval's JSON, or promptfooconfig.yaml")],
        {"data": "openai-evals: the data JSONL (one item a line, {\"item\": {...}} or the item itself)",
         "out": "the new spec directory (default: ./NAME, named after the source); never overwritten",
         "prompt": "openai-evals: the candidate's prompt, a template over item.* (default: {{ item.input }})",
         "trust_code": "openai-evals: true: keep python graders (their code runs in runs made with trust_code=true)"},
        required_positionals=2, missing="needs KIND (openai-evals or promptfoo) and FILE",
        examples=["rubric-engine import openai-evals my_eval.json data=items.jsonl out=my_eval",
                  "rubric-engine import promptfoo promptfooconfig.yaml out=my_suite"]),
    "lint": Command(
        "lint", "Check a benchmark's criteria from their text alone, calling no model: compound, vague, not observable, "
                "duplicate and near-duplicate criteria, weights outside lint.yaml's range, groups not in the "
                "taxonomy. One line per finding; exit 1 when there is any.",
        [("BENCHMARK", _BENCH + " (same as benchmark=)")],
        {"benchmark": _BENCH, "benchmark_dirs": "[DIR,...] searched first for specs",
         "data.path": "a local data file instead of the spec's", "out": "also write the findings to this file"},
        examples=["rubric-engine lint my_bench", "rubric-engine lint benchmark=path/to/my_bench out=lint.txt"]),
    "diff": Command(
        "diff", "List the criteria added, removed, reworded, re-weighted and regrouped between two versions of a "
                "spec (each changelog checked: a skipped version is refused); with runs= of the old version, each "
                "model's score under the new criteria from the stored verdicts, no model called. Exit 1 when "
                "anything changed.",
        [("OLD_SPEC", "the old version's spec directory or name"), ("NEW_SPEC", "the new version's")],
        {"runs": "[DIR,...] runs of the old version to rescore", "benchmark_dirs": "[DIR,...] searched first for specs",
         "out": "also write the listing to this file"},
        required_positionals=2, missing="needs OLD_SPEC and NEW_SPEC",
        examples=["rubric-engine diff my_bench_v1 my_bench", "rubric-engine diff old/ new/ runs=[outputs/run1,outputs/run2]"]),
    "pilot": Command(
        "pilot", "The pilot gate: discriminating and saturated shares of the criteria and the proposed hard set "
                 "(the `items` statistics) against declared thresholds; exit 0 pass, 1 fail (no model is called).",
        [("RUN_DIR...", "run or sweep directories of one benchmark (a few candidates)")],
        {"min_discriminating": "FRACTION of judged criteria that must carry signal (default: the spec's "
                               "release.pilot, else 0.5)",
         "max_saturated": "FRACTION of judged criteria that may be saturated (default: the spec's, else 0.2)",
         "hard": "FRACTION of the questions proposed as the hard set (default: the spec's, else 0.3)",
         "min_hard": "FRACTION of the hard set's target that must be found (default: the spec's, else 1.0)",
         "out": "output directory (default RUN_DIR/pilot)"},
        required_positionals=1, examples=["rubric-engine pilot multirun/my_bench/2026-11-22_10-00-00 min_discriminating=0.6"],
        details_from="rubric_engine.validity.pilot:USAGE", **_RUN_DIRS),
    "release": Command(
        "release", "The release gate: without labels= the human blind test sheet (whole replies, stratified by "
                   "candidate and subset) from the pilot runs; with labels= judge-human agreement against the "
                   "spec's release.agreement, a pass writing SPEC_DIR/RELEASE-VERSION.md; exit 0 pass, 1 below.",
        (), {"benchmark": _BENCH, "runs": "DIR[,DIR...] the pilot runs (of the spec's current version)",
             "labels": "FILE[,FILE...] the filled-in release sheet: check instead of export",
             "sheet": "the release sheet's directory (default SPEC_DIR/release/VERSION)",
             "n": "replies to sample into the sheet (default 60)", "seed": "sampling seed (default 0)",
             "benchmark_dirs": "[DIR,...] searched first for specs"},
        examples=["rubric-engine release benchmark=my_bench runs=multirun/my_bench/2026-11-22_10-00-00",
                  "rubric-engine release benchmark=my_bench runs=multirun/my_bench/2026-11-22_10-00-00 labels=labels.jsonl"],
        details_from="rubric_engine.validity.release:USAGE", unknown_word="option"),
    "filter": Command(
        "filter", "The consistency filter: keep a criterion only if the judge, applying it, separates each question's "
                  "strong and weak replies (a pairs file); writes the filtered data beside, never over a file.",
        (), {"benchmark": _BENCH, "pairs": "FILE JSONL, one pair a line: the question id, strong (or chosen), weak "
             "(or rejected)", "judge": "ENTRY the judge (a conf/judge entry or a LiteLLM id)",
             "by": "criterion (default) or question: filter each criterion, or a question's whole rubric",
             "out": "the filtered data file (default SPEC_DIR/<data>.filtered.jsonl); never overwritten",
             "data.path": "a local data file instead of the spec's", "benchmark_dirs": "[DIR,...] searched first for specs"},
        examples=["rubric-engine filter benchmark=my_bench pairs=pairs.jsonl judge=gpt-4o-mini"],
        details_from="rubric_engine.validity.consistency:USAGE", unknown_word="option"),
}
