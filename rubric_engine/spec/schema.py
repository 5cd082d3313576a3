"""Benchmark specs: the pydantic models of `benchmark.yaml`.

Why pydantic with extra="forbid" plus our own pass over PyYAML nodes: a typo in a spec must fail loudly with
the file, the line, the key path and the fix, instead of being ignored or surfacing as a wrong number later.
Reading the files (YAML with line numbers, `extends`, the search path) lives in spec/files.py, loading and the
cross-field checks in spec/load.py and spec/checks.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from rubric_engine.errors import ConfigError, SpecError
from rubric_engine.scoring.question import DEFAULT_SCALE, Aggregation
from rubric_engine.spec.aggregation import AggregationSpec, FailureRule, drop_aggregation_defaults
from rubric_engine.spec.facts import JUDGELESS_KINDS
from rubric_engine.spec.anchors import Anchors, check_anchored
from rubric_engine.spec.ratings import Rating
from rubric_engine.spec.userstate import UserState
from rubric_engine.spec.checked import MultipleChoice, SpecCheck, drop_checked_defaults
from rubric_engine.spec.limits import MAX_TURNS
from rubric_engine.spec.files import Key, _get, _lookup, _split_key, benchmark_search_path, shipped_data_dir
from rubric_engine.spec.gates import ReleaseGate, drop_release_defaults
from rubric_engine.spec.scales import drop_score_defaults, score_defaults

__all__ = [
    "Ability", "Dimension", "Taxonomy", "FailureRule", "DataFields", "DataSpec", "Scoring", "AggregationSpec",
    "Candidate", "Conversation", "Simulator", "VerdictFields", "Breakdown", "References", "ModelRef", "Judge",
    "AnswerFile", "BaselineAnswers", "Baseline", "Decay", "Report", "BenchmarkSpec", "MAX_TEMPLATE_BYTES",
    "MultipleChoice", "SpecCheck"]

_TEMPLATE_FIELDS = ("candidate.template", "candidate.system", "judge.template", "judge.system",
                    "conversation.simulator.system", "conversation.simulator.template")
MAX_TEMPLATE_BYTES = 256 * 1024  # spec templates come from strangers: a prompt template is a few KB
Labels = dict[str, str]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Ability(_Model):
    id: str
    labels: Labels
    data_labels: list[str] = Field(min_length=1)


class Dimension(_Model):
    id: str
    labels: Labels
    abilities: list[Ability] = Field(min_length=1)


class Taxonomy(_Model):
    dimensions: list[Dimension] = Field(min_length=1)


class DataFields(_Model):
    """Data column names: the engine never hard-codes a benchmark's names."""
    id: str = "id"
    dialogue: str = "dialogue"
    rubric: str = "rubric"
    subset: str | None = None
    scenario: str | None = None
    secondary_scenario: str | None = None
    turn_role: str = "role"
    turn_content: str = "content"
    item_label: str | None = "label"  # null: items carry no label (no taxonomy, no failure rule)
    item_weight: str = "weight"
    item_text: str = "text"
    item_tags: str | None = None  # a list of strings per rubric item (e.g. "axis:accuracy")
    example_tags: str | None = None  # a list of strings per row (e.g. "theme:...")
    reference: str | None = None  # a reference answer shown to the judge as `reference` (a list: one per turn)
    turns: str | None = None  # conversation.mode scripted: a list of user messages per row
    item_check: str | None = None  # an item's deterministic check (scoring/checks.py): decided by the engine
    choices: str | None = None  # multiple choice: the row's options (a list of strings, lettered A, B, ...)
    answer: str | None = None  # multiple choice: the correct option (a letter, or a 0-based index)


class References(_Model):
    """A second data file of reference answers keyed by question id (e.g. a strong model's answers, shown to
    the judge of some categories): `answer` is a dotted path to a string or a list of per-turn strings."""
    url: str | None = None
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    path: str | None = None
    id: str = "id"
    answer: str = "reference"


class Sample(_Model):
    """A try-out's data (run/tryout.py): `path` in the data's format, `baseline_answers` as `baseline.answers=`."""
    path: str
    baseline_answers: str | None = None


class DataSpec(_Model):
    url: str | None = None
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    path: str | None = None
    format: Literal["jsonl", "json", "csv"] = "jsonl"
    fields: DataFields = DataFields()
    roles: dict[str, Literal["system", "user", "assistant", "other"]] = Field(min_length=1)  # label -> chat role
    subsets: list[str] = []
    references: References | None = None  # per-turn reference answers from a second file (dataset/references.py)
    sample: Sample | None = None  # what a try-out reads instead of the download (run/tryout.py)
    expand: Literal["assistant_turns"] | None = None  # a question per assistant turn (dataset/expand.py)


class Scoring(_Model):
    formula: str = "log_normalised"  # a built-in name, an entry point of rubric_engine.formulas, or module:function
    params: dict[str, Any] = {}
    scale: float = Field(default=DEFAULT_SCALE, gt=0, allow_inf_nan=False)  # NaN/inf would poison every score


class Candidate(_Model):
    mode: Literal["single_message", "chat_turns"] = "single_message"
    template: str | None = None
    system: str | None = None


class ModelRef(_Model):
    """A model as a spec declares it (mirrors models.ModelSpec; an API key is never stored)."""
    name: str
    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    params: dict[str, Any] = {}
    timeout: float | None = Field(default=None, gt=0)  # seconds per request; None: the run's default (120)
    family: str | None = None  # maker / lineage, for `rubric-engine audit`
    revision: str | None = None  # names what is served behind `model`; part of the cache key


class Simulator(_Model):
    """The user simulator of `conversation.mode: simulated`: its model (or `user=` on the command line), its
    persona / instructions (`system`, filled from the data row) and an optional opening message (`template`)."""
    model: ModelRef | None = None
    system: str | None = None
    template: str | None = None


class Conversation(_Model):
    """How the candidate is talked to (run/dialogue.py): one reply (single), the data's user turns in order
    (scripted), or a simulated user (simulated) for up to `max_turns` turns, ended early by `stop`."""
    mode: Literal["single", "scripted", "simulated"] = "single"
    simulator: Simulator | None = None
    max_turns: int = Field(default=6, ge=1, le=MAX_TURNS)  # spec/limits.py: the bound scripted rows are held to
    stop: str = Field(default="<END>", min_length=1)
    first: Literal["user", "candidate"] = "user"


class VerdictFields(_Model):
    """The verdict JSON the judge must return: a list of items (all criteria in one call) or one object
    (one criterion per call), with these field names. `granularity` sits here, not beside judge.template,
    because it decides the shape: all_criteria <-> list, per_criterion <-> object."""
    granularity: Literal["all_criteria", "per_criterion"] = "all_criteria"
    shape: Literal["list", "object"] = "list"
    list_key: str = "criteria"  # list shape: {"<list_key>": [{<id>, <reasoning>, <met>}, ...]}
    id: str = "id"
    reasoning: str = "reasoning"
    met: str = "met"
    probability: str | None = None  # a field where the judge says how sure it is (0-1); judge/adaptive.py reads it
    # kind score (spec/scales.py, judge/scores.py): one number in [min, max] per judged reply, read from the
    # JSON field `field` or, for judges without structured output, from group 1 of `pattern`;
    # kind pairwise (judge/pairwise.py): the judge compares the reply with the baseline's and writes a label
    kind: Literal["criteria", "score", "pairwise", "anchored"] = "criteria"  # anchored: against anchors: (spec/anchors.py)
    min: float | None = Field(default=None, allow_inf_nan=False)
    max: float | None = Field(default=None, allow_inf_nan=False)
    field: str = "score"
    labels: list[str] = Field(default=["A>>B", "A>B", "A=B", "B>A", "B>>A"], min_length=1)
    strong_weight: float = Field(default=3, ge=1, le=1000, allow_inf_nan=False)  # a strong label counts this often
    swap: bool = True  # judge both orders (baseline first, then candidate first)
    # regex(es) tried in order, the first that matches decides; group 1 is the number (score) / the label
    # (pairwise); None: the default
    pattern: str | list[str] | None = None
    # probability, where the server returns log-probabilities (judge/probability.py): a score verdict scores the
    # expected value over the score tokens, a criteria verdict counts P(met) of each item's points (its expected
    # points; docs/methodology.md); criteria verdicts store P(met) beside each verdict either way
    use: Literal["verdict", "probability"] = "verdict"

    @model_validator(mode="after")
    def _probability_scores_a_number(self) -> "VerdictFields":
        if self.use == "probability" and self.kind not in ("score", "criteria"):
            raise ValueError(f"use: probability applies to a score verdict (its expected value) or a criteria verdict "
                             f"(expected points), not kind: {self.kind}; remove use: probability")
        return self


class Judge(_Model):
    model: ModelRef
    system: str | None = None
    template: str
    verdict: VerdictFields = VerdictFields()
    max_reasks: int = Field(default=2, ge=0)
    repeats: int | Literal["auto"] = Field(default=1)  # gradings of every reply (judge/panels.py), auto: judge/adaptive.py
    tie: Literal["not_met", "met"] = "not_met"  # an even split of repeats or jurors counts as this
    scope: Literal["conversation", "each_turn", "last_turn", "turn"] = "conversation"  # what one judgment grades
    turn: int | None = Field(default=None, ge=1)  # scope `turn`: the candidate turn graded (1-based; spec/scales.py)


class AnswerFile(_Model):
    """One file of baseline answers: downloaded pinned like data (url + sha256) or a local path."""
    url: str | None = None
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    path: str | None = None
    model: str | None = None  # who wrote these answers (shown in the summary)


class BaselineAnswers(_Model):
    """Baseline answers from files: one file, or one per data group (`by`: the question's subset or scenario).
    A row's answer is the field `response`: a string, or a list of chat messages whose last `answer_role`
    message is the answer (`message_role` names its role field, `message_content` the dotted path of its text,
    e.g. `content.answer`)."""
    by: Literal["subset", "scenario"] | None = None
    id: str = "id"
    response: str = "response"
    message_role: str = "role"
    message_content: str = "content"
    answer_role: str = "assistant"
    files: dict[str, AnswerFile] = Field(min_length=1)


class Baseline(_Model):
    """What the candidate is compared with under judge.verdict.kind: pairwise: a model, or answers files."""
    model: ModelRef | None = None
    answers: BaselineAnswers | None = None


class Decay(_Model):
    from_: str = Field(alias="from")
    to: str
    base: str


class Breakdown(_Model):
    """One score table: which groups (taxonomy level, data field or tag prefix) it is computed over."""
    id: str
    by: Literal["ability", "dimension", "subset", "scenario", "item_tag", "example_tag"]
    prefix: str = ""  # item_tag / example_tag: only tags starting with this (e.g. "axis:")
    labels: Labels = {}  # the table's title per locale
    groups: dict[str, Labels] = {}  # display labels per group


class Report(_Model):
    subsets: dict[str, Labels] = {}
    decay: Decay | None = None
    scenarios: dict[str, Labels] = {}
    breakdowns: list[Breakdown] = []


class BenchmarkSpec(_Model):
    """A resolved benchmark spec (after `extends`); helpers answer the questions other modules ask."""
    name: str
    version: str = "1"
    locale: str = "en"
    description: str = ""
    citation: str | None = None
    extends: str | None = None
    data: DataSpec
    taxonomy: Taxonomy | None = None
    failure_rules: list[FailureRule] = []
    scoring: Scoring = Scoring()
    aggregation: AggregationSpec = AggregationSpec()
    candidate: Candidate = Candidate()
    conversation: Conversation = Conversation()
    judge: Judge | None = None  # None: allowed only when every item is checked by the engine (spec/checks.py)
    baseline: Baseline | None = None  # judge.verdict.kind: pairwise only
    anchors: Anchors | None = None  # judge.verdict.kind: anchored only
    rating: Rating | None = None  # ratings against a reference, decided by the engine: no judge (spec/ratings.py)
    user_state: UserState | None = None  # a simulated user's hidden state scores the session (spec/userstate.py)
    report: Report = Report()
    multiple_choice: MultipleChoice = MultipleChoice()
    checks: list[SpecCheck] = []
    release: ReleaseGate = ReleaseGate()  # the build gates' thresholds (spec/gates.py)
    _dir: Path = PrivateAttr(default=Path("."))
    _files: list[Path] = PrivateAttr(default_factory=list)
    _origins: dict[Key, tuple[Path, int]] = PrivateAttr(default_factory=dict)
    _formula: Any = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _score_defaults(self) -> "BenchmarkSpec":
        score_defaults(self)  # a score verdict's own defaults (scale 1, mean over questions) where not declared
        check_anchored(self)  # anchors: and judge.verdict.kind: anchored go together (spec/anchors.py)
        return self

    @field_validator("version", mode="before")
    @classmethod
    def _version_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v

    @property
    def dir(self) -> Path:
        """Directory of the benchmark asked for (the last file of the extends chain)."""
        return self._dir

    @property
    def files(self) -> list[Path]:
        """The chain of spec files, base first."""
        return list(self._files)

    def _dims(self) -> list[Dimension]:
        return self.taxonomy.dimensions if self.taxonomy else []

    def ability_ids(self) -> list[str]:
        return [a.id for d in self._dims() for a in d.abilities]

    def dimensions_map(self) -> dict[str, list[str]]:
        return {d.id: [a.id for a in d.abilities] for d in self._dims()}

    def ability_dimension(self) -> dict[str, str]:
        return {a.id: d.id for d in self._dims() for a in d.abilities}

    def label_to_ability(self) -> dict[str, str]:
        return {lab: a.id for d in self._dims() for a in d.abilities for lab in a.data_labels}

    def aggregation_rule(self) -> Aggregation:
        """The scoring core's Aggregation for this spec."""
        sc = self.aggregation
        cov = sc.coverage
        return Aggregation(question=sc.question, overall=sc.overall, clip=sc.clip,
                           no_positive_points=sc.no_positive_points, coverage_k=cov.k if cov else None,
                           coverage_tag=cov.tag if cov else None)

    def formula(self) -> Any:
        """The scoring formula as a callable fn(raw, lo, hi, params) (resolved when the spec was checked)."""
        return self._formula or self.scoring.formula

    def declared_breakdowns(self) -> list[tuple[str, str, str]]:
        """(id, kind, prefix) of every report.breakdowns entry, for aggregate.breakdowns."""
        return [(b.id, b.by, b.prefix) for b in self.report.breakdowns]

    def label_to_rule(self) -> dict[str, str]:
        return {lab: r.id for r in self.failure_rules for lab in r.data_labels}

    def label(self, labels: Mapping[str, str] | Any, locale: str | None = None) -> str:
        """Display label in `locale` (default: the spec's), else en, else the first one."""
        labels = getattr(labels, "labels", labels) or {}
        for loc in (locale or self.locale, "en"):
            if labels.get(loc):
                return str(labels[loc])
        return str(next((v for v in labels.values() if v), ""))  # the first non-empty one

    def origin(self, key: str | Key) -> tuple[Path, int] | None:
        """(file, line) that declared a key path such as 'judge.template' (None if defaulted)."""
        return _lookup(self._origins, _split_key(key) if isinstance(key, str) else key)

    def template_path(self, relpath_or_field: str) -> Path:
        """A template's path from a field name ('judge.template') or the relative path a field holds,
        resolved against the directory of the file that declared that field."""
        field = relpath_or_field if relpath_or_field in _TEMPLATE_FIELDS else next(
            (f for f in _TEMPLATE_FIELDS if _get(self, _split_key(f)) == relpath_or_field), None)
        rel = _get(self, _split_key(field)) if field else relpath_or_field
        if not rel:
            raise SpecError(str(self._files[-1]), str(field), "no template set", fix=f"set {field} to a file")
        o = self.origin(field) if field else None
        path = (o[0].parent if o else self._dir) / str(rel)
        self._confine(path, field or relpath_or_field, str(rel), o)
        return path

    def read_template(self, relpath_or_field: str) -> str:
        path = self.template_path(relpath_or_field)
        try:
            if path.stat().st_size > MAX_TEMPLATE_BYTES:
                raise SpecError(str(path), relpath_or_field, f"template is {path.stat().st_size} bytes "
                                f"(limit {MAX_TEMPLATE_BYTES})", fix="a prompt template is a few KB; check the file")
            return path.read_text(encoding="utf-8-sig")
        except OSError as exc:
            raise SpecError(str(path), relpath_or_field, f"cannot read template: {exc.strerror or exc}",
                            fix="check the template path in the spec") from exc

    def data_path(self) -> Path | None:
        """data.path resolved against the directory of the file that declared it."""
        if not self.data.path:
            return None
        p, o = Path(self.data.path).expanduser(), self.origin("data.path")
        path = p if p.is_absolute() else (o[0].parent if o else self._dir) / p
        self._confine(path, "data.path", self.data.path, o, shipped_data=True)
        return path

    def _confine(self, path: Path, key: str, value: str, origin: tuple[Path, int] | None,
                 shipped_data: bool = False) -> None:
        """A file a spec names must lie, symlinks resolved, inside a directory of its extends chain (data
        also in the package's own data directory, or in the data/ folder beside a benchmarks folder of the
        search path that holds the spec): a stranger's spec must not read ~/.aws/credentials into a prompt
        that goes to its own endpoint. A user's `data.path=` on the command line is not checked."""
        roots = [f.parent.resolve() for f in self._files] or [self._dir.resolve()]
        if shipped_data:  # the package's data/, and the data/ beside a benchmarks folder on the search path
            library = set(benchmark_search_path())  # (a checkout's benchmarks/ + data/, laid out as installed)
            roots += [shipped_data_dir(), *(r.parent.parent / "data" for r in roots if r.parent in library)]
        if not any(path.resolve().is_relative_to(root) for root in roots):
            where = f"{origin[0]}:{origin[1]}" if origin else str(self._files[-1] if self._files else self._dir)
            home = (origin[0].parent if origin else self._dir).resolve()
            raise SpecError(where, key, "the path leads outside the spec's directory (symlinks count where they "
                            "point)", value=value, fix=f"keep the file inside {home}"
                            + (", or pass data.path=FILE on the command line" if shipped_data else ""))

    def declared_file(self, key: str, value: str) -> Path:
        """A data file another key than data.path names (baseline.answers.files.<g>.path), resolved against
        the file that declared it and confined as data.path is."""
        p, o = Path(value).expanduser(), self.origin(key)
        path = p if p.is_absolute() else (o[0].parent if o else self._dir) / p
        self._confine(path, key, value, o, shipped_data=True)
        return path

    def resolved(self) -> dict[str, Any]:
        """JSON-ready dump of the merged spec plus its files (for spec.resolved.json)."""
        dump = self.model_dump(mode="json", by_alias=True)
        drop_aggregation_defaults(dump)  # the dump (and the spec hash) of specs written before those keys, unchanged
        _drop_pairwise_defaults(dump)  # before the score keys: it recognises a criteria spec by its kind
        if dump["conversation"] == Conversation().model_dump(mode="json"):  # likewise a single-reply spec
            del dump["conversation"]
        # the try-out sample changes no score (a run records the file it read as data_path): never in the hash
        del dump["data"]["sample"]
        if dump["data"]["fields"]["turns"] is None:
            del dump["data"]["fields"]["turns"]
        drop_score_defaults(dump)  # likewise for the keys of scores on a scale
        drop_checked_defaults(dump)
        drop_release_defaults(dump)
        for kind in [k for k in JUDGELESS_KINDS if dump.get(k) is None]:  # absent: out of the dump and the hash
            dump.pop(kind, None)
        return {**dump, "_files": [str(f) for f in self._files]}

    def with_candidate_errors(self, policy: str | None) -> "BenchmarkSpec":
        """This spec under the command line's `candidate_errors=` (None: as declared)."""
        if policy is None:
            return self
        if policy not in ("exclude", "zero"):
            raise ConfigError(f"candidate_errors={policy} is not valid; use exclude or zero")
        return self.model_copy(update={"aggregation": self.aggregation.model_copy(update={"candidate_errors": policy})})


def _drop_pairwise_defaults(dump: dict[str, Any]) -> None:
    """The pairwise keys are left out of a criteria spec's dump: its spec hash stays what it was before they existed."""
    verdict = (dump["judge"] or {}).get("verdict") or {}  # no judge: every item is checked by the engine
    if verdict.get("kind") == "criteria":
        for key in ("kind", "labels", "strong_weight", "swap", "pattern"):
            verdict.pop(key, None)
    for key in ("baseline", "anchors"):
        if dump.get(key) is None:
            dump.pop(key, None)
