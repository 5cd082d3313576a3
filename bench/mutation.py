"""Mutation testing of the core modules with mutmut 3, printing the killed share per module.

Why a wrapper: mutmut 3 copies the source tree into `mutants/` and imports the package from there, but
this checkout maps conf/, benchmarks/ and data/ into the package only at install time (pyproject
package-dir). So each module gets a scratch directory (.mutation/<module>/, git-ignored) holding the
package with those three folded in, the tests, a `shared` link to the HeartBench data and a pyproject
whose [tool.mutmut] section mutates that one module and runs that module's fast in-process tests.
Tests that start the console script run the installed (unmutated) package and are left out: they could
not kill a mutant. Needs `pip install -e ".[dev]"` in a venv of its own (mutmut needs coverage>=7.3,
which the `test` extra's irrCAC forbids); the default test sets import nothing from `test` beyond pytest
and hypothesis.

    python bench/mutation.py scoring.question      # one module (dotted path in the package), its default tests
    python bench/mutation.py stats.bootstrap --max-children 2
    python bench/mutation.py --all                 # every core module (slow: run it outside CI)
    python bench/mutation.py judge.grading --tests tests/judge/test_judge.py tests/scoring/test_properties.py
    python bench/mutation.py scoring.question --show-survivors   # print each surviving mutant's diff

Output: one line per module, e.g. `scoring.question  killed 180/200 = 90.0%  (survived 18, timeout 0, no tests 2)`.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRATCH = ROOT / ".mutation"
PACKAGE = "rubric_engine"
FOLDED = ("conf", "benchmarks", "data")  # package-dir mappings from pyproject.toml

# module -> the in-process tests that exercise it (console-script tests cannot see mutants)
CORE: dict[str, list[str]] = {
    "scoring.question": ["test_scoring.py", "test_properties.py", "test_rules_pinned.py", "test_spec_language.py",
                "test_aggregate.py", "test_aggregate_rules.py", "test_healthbench.py", "test_scoring_rules.py"],
    "scoring.aggregate": ["test_aggregate.py", "test_aggregate_rules.py", "test_rules_pinned.py"],
    "stats.bootstrap": ["test_bootstrap.py", "test_bootstrap_level.py", "test_properties.py", "test_bootstrap_rules.py"],
    "judge.grading": ["test_judge.py", "test_judge_per_criterion.py", "test_judge_rules.py"],
    "models.client": ["test_models.py", "test_models_faults.py", "test_models_rules.py", "test_structured_rules.py"],
    "models.litellm_runtime": ["test_litellm_runtime_rules.py", "test_models.py", "test_models_faults.py"],
    "judge.structured": ["test_structured_rules.py", "test_judge.py", "test_judge_rules.py", "test_judge_per_criterion.py"],
    "judge.verdicts": ["test_verdicts_rules.py", "test_judge.py", "test_judge_rules.py", "test_properties.py"],
    "models.failures": ["test_callfailures_rules.py", "test_models_faults.py"],
    "models.entries": ["test_modelspec_rules.py", "test_models.py"],
    "models.cache": ["test_cache.py", "test_cache_rules.py"],
    "dataset.load": ["test_data.py", "test_data_faults.py", "test_data_tofu.py", "test_data_lazy.py",
                "test_dataset_rules.py", "test_dataquirks_rules.py"],
    "dataset.quirks": ["test_data.py", "test_data_faults.py", "test_dataset_rules.py", "test_dataquirks_rules.py"],
    "dataset.fetch": ["test_data.py", "test_data_faults.py", "test_data_tofu.py", "test_dataset_rules.py",
                  "test_datafetch_rules.py"],
    "spec.schema": ["test_spec.py", "test_spec_rules.py", "test_rules_pinned.py"],
    "spec.load": ["test_spec.py", "test_spec_rules.py", "test_rules_pinned.py"],
    "spec.files": ["test_spec.py", "test_specfile_rules.py"],
    # round two (issue 42): redaction, baseline answers, concurrency, batches, dialogues, item diagnostics,
    # robustness, rewards
    "models.redact": ["test_redact_bite.py", "test_models_rules.py"],
    "dataset.baseline": ["test_baseline_bite.py"],
    "dataset.references": ["test_references_bite.py"],
    "validity.itemsdiag": ["test_itemsdiag_bite.py"],
    "validity.robustness": ["test_robustness_command_bite.py"],
    "models.concurrency": ["test_concurrency_bite.py"],  # test_concurrency.py's settling test is timing-bound
    "models.batchjournal": ["test_batchjournal_bite.py", "test_batch_journal.py"],
    "models.batchapi": ["test_batchapi_bite.py"],  # tests/models/test_batch.py's console-script runs cannot see mutants
    "models.batches": ["test_batches_bite.py"],
    "run.dialogue": ["test_dialogue_bite.py"],
    "judge.dialogue": ["test_dialogue_bite.py", "test_judge_dialogue_bite.py"],
    "shapes.scripted": ["test_dialogue_bite.py", "test_judge_dialogue_bite.py"],
    "shapes.simulated": ["test_dialogue_bite.py", "test_judge_dialogue_bite.py"],
    "stats.robustness": ["test_robustness_bite.py"],
    "judge.adaptive": ["test_adaptive_bite.py"],  # judge.repeats=auto's rule (issue 38)
    "stats.adaptive": ["test_adaptive_noise.py"],
    "stats.itemstats": ["test_itemstats_bite.py"],
    "stats.rubricitems": ["test_itemstats_bite.py"],
    "reward.inputs": ["test_reward_inputs_bite.py"],
    "reward.loop": ["test_reward_loop_bite.py"],
    "reward.frameworks": ["test_reward_frameworks_bite.py"],
    "reward.scorer": ["test_reward_scorer_bite.py"],
    "reward.server": ["test_reward_server_bite.py"],
    # round two (issue 42): pairwise, scale scores, Bradley-Terry, checks, multiple choice
    "scoring.pairwise": ["test_pairwise_bite.py", "test_pairwise.py"],
    "stats.pairwise": ["test_pairwise_bite.py"],
    "judge.pairwise": ["test_pairwise_bite.py"],
    "run.pairwise": ["test_pairwise_bite.py"],
    "stats.bradley_terry": ["test_bradley_terry_bite.py"],
    "results.bradley_terry": ["test_bradley_terry_bite.py"],
    "scoring.scalar": ["test_scores_bite.py"],
    "stats.turns": ["test_scores_bite.py"],
    "judge.scores": ["test_scores_bite.py", "test_scores.py"],
    "scoring.checks": ["test_checks_bite.py"],
    "spec.checked": ["test_checks_bite.py"],
    "dataset.checked": ["test_checks_bite.py"],
    # round two (issue 42): mixed checked and judged items, the spec's cross-field rules, stored verdicts to scores
    "judge.checked": ["test_checked_grading_bite.py"],
    "spec.checks": ["test_spec_checks_bite.py"],
    "stats.scores": ["test_stats_scores_bite.py"],
    # issue 38: human-corrected scores (PPI)
    "stats.ppi": ["test_ppi.py"],
    "validity.calibrate": ["test_calibrate_bite.py"],
    "validity.replyscore": ["test_calibrate_bite.py"],
}
KILLED = {"killed", "timeout", "caught by type check"}  # mutmut's statuses that mean "a test noticed"
GOAL = 90.0  # percent of non-equivalent mutants killed, per module (issue 16); the exit code is 1 below it

# Surviving mutants that cannot change behaviour: module -> (function, text in a mutated line, why); a text
# starting with ^ must start the (stripped) line.
# Matched against each survivor's diff (`mutmut show`), not by number, so editing a function does not
# shift the list; a listed mutant that a test does kill is simply counted as killed.
_FIELDS_UNREAD = "the statistic reads only abilities and score of a group view"
EQUIVALENT: dict[str, list[tuple[str, str, str]]] = {
    "scoring.aggregate": [
        *[("_item_view", text, _FIELDS_UNREAD) for text in (
            "ScoredQuestion(None, q.subset", "ScoredQuestion(q.id, None, q.scenario", "q.subset, None, {name",
            "value, None, q.tags, {})", "q.catastrophic, None, {})", "q.tags, None)", "value, q.tags, {})",
            "value, q.catastrophic, {})", "q.catastrophic, q.tags, )")],
        *[("_views", text, _FIELDS_UNREAD) for text in (
            "ScoredQuestion(None, q.subset", "ScoredQuestion(q.id, None, q.scenario", "q.subset, None, part",
            "score, None, q.tags, {})", "q.catastrophic, None, {})", "q.tags, None)", "score, q.tags, {})",
            "score, q.catastrophic, {})", "q.catastrophic, q.tags, )")],
        ("breakdown", "if (views) or True else None", "the statistic of no views is None already"),
    ],
    # (the judge's entries for uses_json_schema and _complete moved with those functions to judge/structured.py)
    "judge.structured": [
        *[("ask_structured", t, "the loop runs at least once (max_reasks >= 0: the spec's ge=0, localize's 1) and "
           "ends without a value only after a refused reply set the problem") for t in ('problem = None',
                                                                                         'problem = "XXXX"')],
    ],
    "models.litellm_runtime": [
        ("LiteLLMRuntime.__init__", "self._announced = None", "read only as a truth value: None and False are both false"),
        ("_close_clients", "if (litellm is not None) or True else None",
         "getattr(None, name, None) is None, what the else branch gives"),
    ],
    "models.client": [
        ("ModelClient.complete", "if (self.cache is not None) or True else None", "without a cache the key is "
         "computed and never read (every later use is guarded by the cache)"),
        *[("ModelClient.complete", t, "key is None exactly when self.cache is None") for t in (
            "if key is not None or self.cache is not None:",)],
        *[("ModelClient.__init__", t, "_semaphore() builds a new one whenever _sem is None or bound to another loop: "
           "'' is neither the running loop nor a semaphore it reuses") for t in (
            'self._sem: asyncio.Semaphore | None = ""', 'self._sem_loop: asyncio.AbstractEventLoop | None = ""')],
        ("ModelClient.__init__", "self.json_schema_refused = None", "read only as `not client.json_schema_refused`: "
         "None is as falsy as False"),
        ("ModelClient.__init__", "self._answered = None", "None is as falsy as False"),
        ("ModelClient.__init__", 'self._key: str | None = ""', "_base_request() sets it before the first request, "
         "the only place it is read after"),
        *[("ModelClient._call", t, "the outer guard fires only when a provider path ignores timeout=; LiteLLM's "
           "OpenAI path honours it (a hang ends at the spec's timeout, test_models.py), so reaching the guard "
           "means waiting 30 s in a test") for t in ("self.spec.timeout + 31.0)", "acompletion(**kwargs), None)")],
        ("ModelClient._call", "reply_cost(None, response)", "LiteLLM's acompletion always puts response_cost in "
         "_hidden_params (None when unpriced), so reply_cost never reaches litellm.completion_cost on this path"),
        ("ModelClient._base_request", '"num_retries": 0, "max_retries": 1}', "with num_retries=0 this LiteLLM "
         "sends one request whatever max_retries says (measured against the fake server's 500); max_retries=0 is "
         "sent for versions and providers that hand it to the SDK"),
        *[("ModelClient._mock", t, "mock_tokens is 1 for any text of up to 4 characters, as for '' (a message "
           "without content)") for t in ('m.get("content", None)', 'm.get("content", )', 'm.get("content", "XXXX")')],
        *[("ModelClient._call", t, "FatalModelError derives stops_run from the status when not told (401/403/404 "
           "or none stop the run), which agrees with STOPS_RUN_KINDS for every fatal failure: LiteLLM's error "
           "classes all carry their HTTP status, and the statusless ones (missing key) are auth") for t in (
            "attempts=attempts, stops_run=None)", "^attempts=attempts, )")],
        ("ModelClient._call", "failure.detail[:81]", "the width of a progress line; the failures without a status "
         "(malformed replies) have details shorter than 80 characters"),
    ],
    "judge.verdicts": [
        *[(fn, t, "the caller words the problem itself (_item: '\"met\" must be true or false', parse: 'has no "
           "integer \"id\"'); this text is never shown") for fn, ts in (
            ("_as_int", ('ValueError(None)', '"XXnot an integerXX"', '"NOT AN INTEGER"')),
            ("_as_bool", ('ValueError(None)', '"XXnot a booleanXX"', '"NOT A BOOLEAN"')),
            ("_as_str", ('ValueError(None)', '"XXnot a stringXX"', '"NOT A STRING"'))) for t in ts],
        *[("_inline_refs", t, "a $ref is '#/$defs/<Name>': its last part is the same for any split, and the "
           "definitions pydantic writes for these shapes hold no further $ref") for t in (
            ']], None)', 'rsplit("/", )', 'rsplit("/", 2)', '1)[+1]', '_inline_refs(v, None)')],
        *[("VerdictShape.__init__", t, "a model's class name appears only in $defs/$ref, which _inline_refs "
           "removes; the titles come from ConfigDict") for t in (
            '"XXCriterionVerdictXX"', '"criterionverdict"', '"CRITERIONVERDICT"', '"XXVerdictReplyXX"',
            '"verdictreply"', '"VERDICTREPLY"')],
        *[("VerdictShape.schema", t, "only the list shape has $defs, and without any $ref the definitions are "
           "never read") for t in ('schema.get("$defs", None)', 'schema.get("$defs", )')],
        *[("VerdictShape._item", t, "every error of a dict validated field by field names its field (loc is "
           "never empty)") for t in ('if (e["loc"]) or True else', 'else "XX?XX"')],
        *[("VerdictShape._item", t, "parse checks the id before the item model, so the model reports only "
           "reasoning or met") for t in ('if (name == self.reasoning) or True else', '"XXan integerXX"',
                                          '"AN INTEGER"')],
        ("VerdictShape.parse", "VerdictError(None)", "extract_json returns only objects decoded from a '{' (a dict "
         "or an error), so the object shape's non-dict check never fires"),
    ],
    "models.entries": [
        *[("provider_key_env", t, "only the part before the first '/' is read") for t in (
            'model.split("/", )[0]', 'model.split("/", 2)[0]')],
        *[("provider_key_env", t, "the provider is upper-cased into the variable name and neither has an "
           "exception entry") for t in ('"deepseek") if model.startswith(p)), "OPENAI")', '{"claude": "ANTHROPIC"}')],
        ("__post_init__", "self.timeout < 0:", "a timeout of 0 is already refused by `not self.timeout`"),
        ("cache_key", "ensure_ascii=None", "None is as falsy as False"),
        ("cache_key", 'text.encode("UTF-8")', "codec names are case-insensitive"),
    ],
    "dataset.load": [
        ("_Row.err", 'fix: str = "XXXX"', "every caller passes fix="),
        *[("index_rows", t, "the first JSONL row (offset 0) is also held in memory, but row() and load() test "
           "ref.offset < 0 themselves and still read it from the file: only one question's memory changes")
          for t in ("where.offset <= 0", "where.offset < 1")],
        *[(fn, t, "empty_ok=None is as falsy as False in both of text()'s tests") for fn, t in (
            ("_turns", '"turn_content", where, None)))'), ("_criteria", '"item_text", where, None), ability'))],
        ("_decode", 'raw.decode("UTF-8")', "codec names are case-insensitive"),
        ("_meta", "r.text(raw, name, None) if", "`name in raw` was just checked, so get() never raises and the "
         "spec key is read only by its missing-field error"),
        ("_csv_cell", 'v[:1] in "XX[{XX"', "a cell starting with X is tried as JSON, fails, and stays text"),
        ("_number", '"XX.eEXX"', "text with an X is no number either way and stays text"),
    ],
    "stats.bootstrap": [
        ("_vectors", "for q in scored], 2", "under a mean over questions only index 0 is ever filled, and _macro "
         "averages only the indices that have counts"),
        ("_macro", "clip: bool = True", "bootstrap_stats and paired_difference always pass clip"),
        ("paired_difference", "assert point_a is not None or point_b is not None", "_vectors already refused a "
         "question without abilities, so neither point is None (the assert only narrows the type)"),
    ],
    "scoring.question": [
        ("_rules_by_id", "known: {'XX, XX'.join(EFFECTS)}", "EFFECTS holds one name, so the separator never shows"),
        ("_clipped", "clipped.__doc__ = None", "a docstring; no code reads it"),
        *[("_add", t, "a zero weight adds 0.0 to either sum") for t in ("if w <= 0:", "elif w >= 0:")],
        *[("score_question", t, "only whether n_scored is zero is read, and it is never zero after an item")
          for t in ("n_scored = 1", "n_scored -= 1", "n_scored += 2")],
    ],
    "dataset.quirks": [
        *[("DataQuirks.note", t, "the default is only ever the left side of `or`: None or x is x, as False or x is")
          for t in ("signs.get(c.ability, None)", "signs.get(c.ability, )")],
    ],
    "dataset.fetch": [
        *[("sha256_file", t, "the digest does not depend on the read size") for t in (
            "fh.read(None)", "fh.read(2 << 20)", "fh.read(1 << 21)")],
        *[("fetch", t, "the digest does not depend on the read size") for t in (
            "resp.read(None)", "resp.read(2 << 20)", "resp.read(1 << 21)")],
        ("fetch", "timeout: float = 61.0)", "the default download timeout is a tuning constant"),
        *[("fetch", t, "header names are case-insensitive (email.message.Message.get)") for t in (
            'headers.get("content-length")', 'headers.get("CONTENT-LENGTH")')],
    ],
    "spec.files": [
        *[("packaged_dir", t, "the fallback for a package without importlib resources finds the same spec files "
           "(a checkout's benchmarks/); unreachable when the package is installed") for t in (
            "Path(None)", "os.fspath(None)", 'files("XXrubric_engine', 'files("RUBRIC_ENGINE', "p = None",
            'parents[2] * "benchmarks"', "parents[3]", '"XXbenchmarksXX"', '"BENCHMARKS"', "(p.is_dir()) or True")],
        ("_find", "get_close_matches(name, list(known), )", "only the first close match is used"),
        ("_find", "get_close_matches(name, list(known), n=2)", "only the first close match is used"),
        ("_lookup", "range(len(key), -2, -1)", "key[:-1] was already looked up"),
        *[("_NoAliasLoader.compose_node", t, "_parse re-raises this error with its own text; only the line is kept")
          for t in ('line + 1}", None, "YAML', 'line + 1}", "", None, fix=', 'line + 1}", "XXXX", "YAML',
                    '"XXYAML aliases', '"yaml aliases (*name)', '"YAML ALIASES', '"in spec files", fix=None)',
                    '"in spec files", )', '"XXin spec filesXX"', '"IN SPEC FILES"', 'fix="XXwrite the value',
                    'fix="WRITE THE VALUE')],
        ("_NoAliasLoader.compose_node", "compose_node(None, index)", "parent/index feed PyYAML's path resolvers, "
         "which a SafeLoader does not use"),
        ("_NoAliasLoader.compose_node", "compose_node(parent, None)", "parent/index feed PyYAML's path resolvers, "
         "which a SafeLoader does not use"),
        ("_parse", "SpecError(str(path), None,", "SpecError shows an empty key path as <root> either way"),
        ("_parse", "read_text(encoding=None)", "the locale's encoding is UTF-8 here and PyYAML drops a leading BOM"),
        ("_parse", 'encoding="UTF-8-SIG"', "the same codec"),
        ("_merge_origins", "len(k) >= len(r) for r in replaced", "the replaced key's own origin is set again from "
         "the overriding file"),
        ("_load_chain", '"/" in parent and os.sep in parent', "os.sep is / on POSIX"),
        ("_load_chain", '"XX/XX" in parent or os.sep in parent', "os.sep is / on POSIX"),
    ],
    "models.redact": [
        *[("_env_secrets", t, "every name ending in _API_KEY, and RUBRIC_ENGINE_KEY itself, also ends in _KEY, which "
           "the same test accepts") for t in ('"XX_API_KEYXX"', '"_api_key"', '"XXRUBRIC_ENGINE_KEYXX"',
                                               '"rubric_engine_key"')],
        ("redact", "(lower if (folded) or True else text)", "looking for the sk- needle in the lower-cased text only "
         "lets the case-sensitive pattern run on text it cannot match (SK-...): the result is the same"),
    ],
    "dataset.baseline": [
        ("load_baseline_answers", 'group = "XXXX" if declared.by is None', "without `by` every question reads the one "
         "file, and the group is named only in the error for a group without a file, which needs `by`"),
    ],
    "models.concurrency": [
        *[(fn, t, "the epoch and the fill count are only compared for equality with (or order against) the value a "
           "slot copied when it was taken: their start and their step do not matter") for fn, t in (
            ("AdaptiveGate.__init__", "self._epoch = 1"), ("AdaptiveGate.__init__", "self._fills = 1"),
            ("AdaptiveGate.acquire", "self._fills += 2"), ("AdaptiveGate._decrease", "self._epoch -= 1"),
            ("AdaptiveGate._decrease", "self._epoch += 2"))],
        ("AdaptiveGate._decrease", "self.slow_start = None", "read only as a truth value: None is as false as False"),
        ("AdaptiveGate.acquire", "elif waiter not in self._waiters:", "a cancelled waiter left in the queue is done, "
         "and _wake drops done waiters before it gives any place (the only way in_flight falls below the limit)"),
    ],
    "models.batchjournal": [
        ("BatchJournal._read", 'if (event == "submit") or True else []', "ids are read only from submit lines, and the "
         "engine writes them only there: a later step's ids field would be parsed and never used"),
        ("BatchJournal._read", "if keep <= len(data):", "truncating a whole file to its own length changes nothing"),
        *[("BatchJournal.append", t, "whether the new file's directory entry is fsync'd too: durability after a power "
           "loss, not reproducible in a test") for t in ("fresh = None", "fresh = self.path.exists()")],
        ("BatchJournal.append", '.encode("UTF-8")', "codec names are case-insensitive"),
        ("BatchJournal.save_lines", 'with_suffix(".PART")', "the temporary file's name; it is renamed over the target"),
    ],
    "stats.robustness": [
        *[("compare_verdicts", t, "parameter defaults the only caller (validity/robustness.py) always overrides "
           "with the run's bootstrap settings") for t in ("n_boot: int = 1001", "seed: int = 1)")],
        ("position_rates", '"ci": list(ci) if (ci) or True else None', "every position group holds at least one row, "
         "so its Wilson interval is never None"),
    ],
    "stats.itemstats": [
        *[(fn, t, "numpy promotes the ints and bools these functions are given to float in every operation they "
           "use (means, variances, sums of products)") for fn in ("pearson", "corrected_item_total", "cronbach_alpha",
                                                                  "is_binary", "kr20", "alpha_interval")
          for t in ("asarray(x, dtype=None)", "asarray(x, )", "asarray(y, dtype=None)", "asarray(y, )",
                    "asarray(matrix, dtype=None)", "asarray(matrix, )")],
        *[(fn, t, "a tolerance's own boundary: a variance exactly 1e-12 does not arise") for fn, t in (
            ("pearson", "if den < 1e-12:"), ("cronbach_alpha", "if total_var < 1e-12:"),
            ("kr20", "if total_var < 1e-12:"))],
        ("kr20", "m.shape[1] < 2 or m.shape[1] < 2:", "one row's totals have no variance, so KR-20 is None either way"),
        *[("alpha_interval", t, "parameter defaults the only caller (stats/rubricitems.py group_table) always "
           "overrides") for t in ("n_boot: int = 1001", "seed: int = 1,")],
        ("alpha_interval", "n_boot >= 0:", "with no resample drawn the loop runs zero times"),
    ],
    "stats.rubricitems": [
        *[("_juror_split", t, "the rule and tie word equal combine()'s defaults, and combine() reads any other rule as "
           "majority and any other tie word as not met") for t in (
            '], None, "not_met")', '"majority", None)', '], "not_met")', '"majority", )', '"XXmajorityXX"',
            '"MAJORITY"', '"XXnot_metXX"', '"NOT_MET"')],
        *[(fn, t, "numpy promotes the bools and ints to float in every operation on the matrix") for fn, t in (
            ("criterion_table", "for r in full], dtype=None)"), ("criterion_table", "for r in full], )"),
            ("group_table", "np.array(cols, dtype=None)"), ("group_table", "np.array(cols, ).T"))],
        ("criterion_table", "r_it <= FLAT_R", "an item-total r of exactly 0.1 does not arise from 0/1 data of a few replies"),
        ("criterion_table", "(human or {}).get((qid, c.index), (1, 0))", "without a human unit the rate is None "
         "whatever the count of disagreements"),
        ("question_table", "if (pairs) or True else None", "pearson of no pairs is None already"),
        *[("group_table", t, "parameter defaults the only caller (validity/itemsdiag.py) always overrides") for t in (
            "n_boot: int = 1001", "seed: int = 1)")],
    ],
    "run.dialogue": [
        *[("_accept_user", t, "EmptyUserReply prints its own fixed text, and the user's error is built from that text "
           "alone (the role and attempts given here are read nowhere on that path)") for t in (
            'EmptyUserReply(None, "the', 'EmptyUserReply("user", None,', "empty reply\", attempts=None)",
            "empty reply\", )", '"XXuserXX"', '"USER"', '"XXthe simulated user returned an empty replyXX"',
            '"THE SIMULATED USER RETURNED AN EMPTY REPLY"', "attempts=2)")],
        *[("_add", t, "converse sets user_tokens to (0, 0) before the first user call, so the default after `or` is "
           "never used") for t in ("o.user_tokens or (1, 0)", "o.user_tokens or (0, 1)")],
        *[("_candidate_turn", t, "_add reads the role only as `role == \"user\"`: any other word is the candidate's")
          for t in ('_add(o, got, None)', '_add(o, got, "XXcandidateXX")', '_add(o, got, "CANDIDATE")',
                    '_add(o, res, None)', '_add(o, res, "XXcandidateXX")', '_add(o, res, "CANDIDATE")')],
        *[("_user_turn", t, "only the part before the first stop signal is read, whatever the number of splits")
          for t in ("split(conv.stop, )[0]", "split(conv.stop, 2)[0]")],
    ],
    "dataset.references": [
        ("_file", "path = p if (p.is_absolute()) and False else", "a directory joined with an absolute path is that "
         "absolute path (pathlib), so the relative branch gives the same file"),
    ],
    "validity.itemsdiag": [
        *[("_compare", t, "stats/hardset.decay divides by the hard set's mean only for base \"hard\": any other word "
           "is the rest's, as \"rest\" is") for t in ('else "XXrestXX"', 'else "REST"')],
    ],
    "shapes.simulated": [
        *[("Simulated.first_request", t, "the role is read only as `role == \"user\"`: any other default word is "
           "the candidate's") for t in ('role: str = "XXcandidateXX"', 'role: str = "CANDIDATE"')],
    ],
    "models.cache": [
        ("ResultCache.__init__", "size_limit=_SIZE_LIMIT, )", "diskcache's own default timeout is also 60 s"),
        ("ResultCache.get", "self._cache.get(key, retry=True)", "diskcache's own default is default=None"),
        *[(f"ResultCache.{fn}", text, "retry= only matters when SQLite's lock wait (60 s) runs out under "
           "contention; not reproducible in a unit test") for fn, text in (
            ("get", "default=None, retry=None)"), ("get", "default=None, )"), ("get", "default=None, retry=False)"),
            ("set", "text, retry=None)"), ("set", "text, )"), ("set", "text, retry=False)"),
            ("clear", "clear(retry=None)"), ("clear", "clear(retry=False)"))],
        ("ResultCache.set", "ensure_ascii=None,", "json.dumps treats None like False"),
        ("ResultCache.set", "allow_nan=None)", "json.dumps treats None like False"),
    ],
    "stats.pairwise": [
        ("pairwise_summary", 'g["order"], None).score)', "outcome() reads only the game's score; strong_weight "
         "sets its weight, which the counts never read"),
    ],
    "results.bradley_terry": [
        ("bradley_terry_section", "if (games) or True else {}", "with no game there is no player, and "
         "bootstrap_ratings of no questions returns {} too"),
        ("bradley_terry_section", '-(x["rating"] or 1.0)', "the default is read only for a rating of None (sorted "
         "last by the first key, whatever the second) or exactly 0.0, which needs win odds of exactly 10^-2.5"),
    ],
    "stats.bradley_terry": [
        ("fit_ratings", "iterations: int = 101", "Newton's method stops on a step below 1e-12 within a few steps"),
        ("fit_ratings", "x[r, col[g.a]] = 1.0", "a row starts at 0 and a game's two players differ, so = and += agree"),
        ("fit_ratings", "hess - 1e-12", "the ridge only keeps solve() defined; every free player won and lost, so "
         "the Hessian is positive definite and a 1e-12 shift either way moves no rating beyond rounding"),
        ("fit_ratings", "<= 1e-12:", "one more Newton step after a step of exactly 1e-12 changes nothing"),
    ],
    "judge.pairwise": [
        ("pair_fields", 'redact(g.error) if (g.error) or True else None', "redact() returns a falsy text as it is: "
         "None stays None"),
    ],
    "scoring.checks": [
        ("run_check", '"as wrong", )', "None is CheckResult.choice's default"),
    ],
    "dataset.checked": [
        *[(fn, t, "a Protocol's method stub: its defaults are never used (dataset/load.py's row reader is called)")
          for fn, t in (("_Row.err", 'fix: str = "XXXX"'), ("_Row.get", 'where: str = "XXXX"'),
                        ("_Row.text", 'where: str = "XXXX"'), ("_Row.text", "empty_ok: bool = False"))],
        ("choice_items", "assert f.choices or f.answer", "an assertion: the caller maps both fields (a spec with one of "
         "them alone is refused when it loads)"),
    ],
    "spec.checked": [
        *[("drop_checked_defaults", t, "the defaults are a str and None, the same in every dump mode") for t in (
            'model_dump(mode=None)', 'model_dump(mode="XXjsonXX")', 'model_dump(mode="JSON")')],
    ],
    "run.pairwise": [
        ("plan_baseline", "model_dump(exclude_none=False)", "ModelSpec.from_config reads every key with get(): a key "
         "set to None and a key left out are the same"),
        ("baseline_answers", "assert spec.baseline is not None or spec.baseline.answers", "an assertion: a spec "
         "baseline without answers declares a model, and then baseline_answers returned before it"),
    ],
    "validity.robustness": [
        *[("plan_units", t, "order and granularity need a run that judged all criteria in one list verdict: the "
           "prompt numbers the shown criteria 1..n itself (judge/prompts.criteria_vars), the verdict ids are those "
           "positions, and _rejudge maps each verdict back through `shown`, never through a criterion's index")
          for t in ("replace(crit[p - 1], index=None)", "replace(crit[p - 1], )", "enumerate(perm, )",
                    "enumerate(perm, 2)", "replace(c, index=None)", "replace(c, )", "replace(c, index=2)")],
        *[(fn, t, "kappa is a finite number or None (printed as a dash or 'undefined'); 'F' and 'f' differ only for "
           "nan and inf") for fn, t in (("_markdown", "'.3F'"), ("_paragraph", "'.2F'"))],
        ("robustness_command", 'if (check == "paraphrase") or True else []', "`texts` is read only on the "
         "paraphrase paths (its dry run and its run)"),
        ("_refuse", 'why = ""', "`why` is read only as a truth value: '' and None are both false"),
        ("_paraphrased", "len(crit) + 2)", "a paraphrased unit's `shown` is read at the k verdicts the judge returned "
         "(never past the criteria) and its length only by position_rates, which runs for check=order alone"),
        ("robustness_command", "tally.get(t, [1, 0])[1]", "`flips` reads index 1 of the default, 0 either way"),
        ("robustness_command", "para: dict[str, tuple[str | None, str | None]] = None", "`para` is read only by "
         "the paraphrase check, whose run assigns it first"),
        *[("_cached_paraphrases", t, "a cache entry is written by ModelClient.complete with its text always present, "
           "so the default is never read") for t in ('hit.get("text", None)', 'hit.get("text", )',
                                                       'hit.get("text", "XXXX")')],
    ],
    "spec.checks": [
        *[("check_formula", t, "only the closest match (close[0]) is named, whatever the number asked for")
          for t in ("known_names(), )", "known_names(), n=2)")],
        ("_check_breakdowns", "'XXaeiouXX'", "a breakdown's `by` is a Literal and none starts with X: the article is "
         "the same"),
        *[("check_breakdowns_against_tags", t, "spec.origin falls back to the longest declared prefix of a key "
           "(spec/files._lookup), so the prefix's lookup already returns the breakdown's line (or None, as this "
           "one would)") for t in ('("XXreportXX", "breakdowns", i)', '("REPORT", "breakdowns", i)',
                                   '("report", "XXbreakdownsXX", i)', '("report", "BREAKDOWNS", i)')],
        *[("check_breakdowns_against_tags", t, "only the part before the first colon is read ([0])")
          for t in ('t.split(":", )[0]', 't.split(":", 2)[0]')],
        ("check_model", "get_close_matches(rest, names, )", "difflib's default n is 3"),
    ],
    "stats.scores": [
        ("_interval", "INTERVAL_SAMPLES, scale=spec.scoring.scale", "bootstrap_stats' default seed is 0, INTERVAL_SEED"),
        ("score_summary", "INTERVAL_SAMPLES, )", "score_sections' default seed is 0, INTERVAL_SEED"),
    ],
    "reward.frameworks": [
        ("rollout_logs", "ensure_ascii=None)", "json.dumps treats None like False"),
        *[("Reward._record", t, "json.dumps writes ASCII (ensure_ascii): every encoding writes the same bytes")
          for t in ('open("a", encoding=None)', 'open("a", )', 'encoding="UTF-8")')],
        ("Reward.compute_score", "compute_score_batch(None, [solution_str]", "compute_score_batch never reads "
         "data_sources: a rubric reward scores every data source alike"),
    ],
    "reward.scorer": [
        ("shadow_picked", "if fraction < 0:", "a fraction of 0 picks nothing either way: no crc32 is below 0"),
        ("shadow_picked", 'encode("UTF-8", ', "codec names are case-blind"),
        ("RewardScorer.__init__", "if (shadow is not None) or True else 0.0", "without a shadow the fraction is 0 "
         "already: a fraction above 0 without one is refused just before"),
        ("RewardScorer.__init__", "plan.tie) if (self.clients) or True else None)", "a spec without a judge holds only "
         "checked items, and the Grader never calls its panel then"),
        *[("RewardScorer.__init__", t, "the shadow panel is one judge asked once: its verdict is returned as it is "
           "(Panel.plain), so its names, rule and tie are never read") for t in (
            "Panel([client], None, self.spec", "self.spec, 1, None, plan.tie))", "self.spec, 1, plan.rule, None))",
            "self.spec, 1, plan.tie))", "self.spec, 1, plan.rule, ))")],
        *[("RewardScorer.__init__", t, "preload_litellm only starts LiteLLM's import early, on a thread of its own: "
           "no reward, count or error depends on it") for t in (
            "if all(is_mock(j.model)", "([shadow] if (self.shadow) and False else", "([shadow] if (self.shadow) or True else")],
        ("RewardScorer._judge_one", "problem = None", "with the graders a reward builds, a judge prompt past its limit "
         "is that question's own error (judge/prompts.unrenderable): no DataError leaves grader.judge"),
        *[("RewardScorer._outcome", t, "a JudgeResult's verdicts are None exactly when its error is set "
           "(judge/grading.py), so the fallback text is never used") for t in (
            "if jr.error and jr.verdicts is None:", '"XXthe judge gave no verdictsXX"', '"THE JUDGE GAVE NO VERDICTS"')],
    ],
    "reward.server": [
        ("_parse", 'decode("UTF-8")', "codec names are case-blind"),
        *[(fn, t, "a finished connection left in the set of those being read is only cut at the stop, where the "
           "shutdown of a closed socket is ignored (OSError): memory alone differs") for fn in (
            "_Handler.finish", "_Handler.do_GET", "_Handler.do_POST") for t in (
            "reading(None, False)", "reading(self.connection, None)", "reading(self.connection, True)")],
        ("_Server.reading", "self._reading.discard(None)", "a finished connection left in the set of those being "
         "read is only cut at the stop, where the shutdown of a closed socket is ignored (OSError)"),
        ("_Server.reading", "_cut(None)", "reached only by a connection whose handler starts after the stop began: one "
         "accepted in the instant before serve_forever ends, not reproducible in a test"),
        *[(fn, t, "read only as a truth value: None is as falsy as False") for fn, t in (
            ("_Handler.do_POST", "taken = None"), ("_Handler.do_POST", "acquire(blocking=None)"),
            ("_Server.__init__", "self._stopping = None"))],
        *[(fn, t, "header names are case-blind (HTTP; http.client and email.message)") for fn, t in (
            ("_Handler.do_POST", '{"retry-after": '), ("_Handler.do_POST", '{"RETRY-AFTER": '),
            ("_Handler._check_caller", '{"www-authenticate": "Bearer"}'),
            ("_Handler._check_caller", '{"WWW-AUTHENTICATE": "Bearer"}'),
            ("_Handler._check_caller", 'get("origin")'), ("_Handler._check_caller", 'get("ORIGIN")'),
            ("_Handler._answer", 'send_header("content-type", '), ("_Handler._answer", 'send_header("CONTENT-TYPE", '))],
        ("_Handler._answer", 'encode("UTF-8")', "codec names are case-blind"),
        *[("_Handler._check_caller", t, "header names are case-blind (email.message), and a default other than a "
           "valid name or token is refused the same way") for t in (
            'get("host", "")', 'get("HOST", "")', 'get("Host", "XXXX")', 'get("authorization", "")',
            'get("AUTHORIZATION", "")', 'get("Authorization", "XXXX")')],
        ("_Handler._discard", "recv(1 << 17)", "the size of each read of the dropped body"),
        ("_Handler._discard", "seconds: float = 3.0", "the bound of the drain: a client that has sent its body "
         "within 2 s (any test's, on 127.0.0.1) is drained the same"),
        *[("_Handler._check_caller", t, "the errors handler of an encoding that cannot fail: a header is decoded as "
           "ISO-8859-1, which holds no lone surrogate, and the codec's name is case-blind") for t in (
            'given.encode("utf-8", )', 'given.encode("UTF-8", "replace")', 'given.encode("utf-8", "REPLACE")')],
        *[("_Handler._length", t, "header names are case-blind, and every value int() refuses or below 0 is the same "
           "411") for t in ('get("content-length")', 'get("CONTENT-LENGTH")', 'or "XX-1XX")', "length = -2")],
        *[("_Server.cut_readers", t, "read only by a connection whose handler starts after the stop began: one "
           "accepted in the instant before serve_forever ends, not reproducible in a test") for t in (
            "self._stopping = None", "self._stopping = False")],
    ],
    "reward.loop": [
        ("LoopThread.__init__", "self._closed = None", "read only as a truth value: None and False are both false"),
        *[("LoopThread.close", t, "the loop thread ends within milliseconds of its stop; the bound matters only for a "
           "loop blocked by a callback for 10 s, which would make a test wait that long") for t in (
            "join(timeout=None)", "join(timeout=11)")],
    ],
    "models.batchapi": [
        *[("batch_cost", t, "LiteLLM's batch_cost_calculator prices the prompt and completion tokens (and their cache "
           "details); it never reads total_tokens") for t in ("total_tokens=None)", "total_tokens=prompt_tokens - "
                                                              "completion_tokens)", "^)")],
        ("BatchAPI.create", "tried = None", "read only as a truth value: None and False are both false"),
        ("BatchAPI.find", 'after: str | None = ""', "read only as a truth value: '' and None are both false"),
        ("BatchAPI.content", 'encode("UTF-8")', "codec names are case-insensitive"),
    ],
    "models.batches": [
        *[("_line_of", t, "the error line a batch left without an answer is read only by _error, which reads its "
           "error's code and message, never its custom_id; and it retries only the codes it lists, which "
           "'batch_cancelled' (or any other spelling of it) is not") for t in (
            '"XXbatch_cancelledXX" if', '"BATCH_CANCELLED" if', '{"XXcustom_idXX": cid', '{"CUSTOM_ID": cid')],
        ("Batcher._quiet", "seen = -2", "any start below 0 differs from the arrival count (at least 1 once the "
         "timer runs), as -1 does"),
        ("_error", 'if (response) or True else None', "response is a dict there: an empty one's get() is None too"),
        ("_error", 'if (error) or True else ""', "_get() of None, or of an empty error, is None: the code is '' "
         "either way"),
    ],
    "stats.turns": [
        *[("_turn_table", text, "a turn's table resamples only the scores (the mean over questions, no "
           "groups, no rules): the id, groups and flags of its ScoredQuestion are never read") for text in (
            "ScoredQuestion(None, ", 'str(rec.get("id", "")), None, ', '"", None, {}, float', '"", "", None, float',
            "float(score), None)", "float(score), True)", "ScoredQuestion(str(None)", 'rec.get(None, "")',
            'rec.get("id", None)', 'rec.get(""))', 'rec.get("id", ))', 'rec.get("XXidXX", "")', 'rec.get("ID", "")',
            'rec.get("id", "XXXX")', '"")), "XXXX", "", {}', '"", "XXXX", {}')],
        ("score_sections", '[("scenarios", "scenario", "XXXX")]', "the prefix filters tag breakdowns only; a "
         "scenario group is the question's scenario whatever the prefix"),
    ],
}


def source(module: str) -> str:
    """'scoring.question' -> 'scoring/question.py': a module named by its dotted path inside the package."""
    return module.replace(".", "/") + ".py"


def test_path(name: str) -> str:
    """'test_judge.py' -> 'tests/judge/test_judge.py': a test module named by its file name, found in the
    concept directory that holds it (test module names are unique across tests/)."""
    found = sorted((ROOT / "tests").glob(f"*/{name}")) or sorted((ROOT / "tests").glob(name))
    if not found:
        raise SystemExit(f"error: no test module {name} under tests/")
    return found[0].relative_to(ROOT).as_posix()


def prepare(module: str, tests: list[str]) -> Path:
    """A fresh scratch project for one module; returns its directory."""
    work = SCRATCH / module
    shutil.rmtree(work, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    shutil.copytree(ROOT / PACKAGE, work / PACKAGE, ignore=ignore)
    for name in FOLDED:  # as installed: rubric_engine.conf, rubric_engine.benchmarks, rubric_engine.data
        shutil.copytree(ROOT / name, work / PACKAGE / name, ignore=ignore)
        shutil.copytree(ROOT / name, work / name, ignore=ignore)  # tests read them from the root (also_copy)
    shutil.copytree(ROOT / "tests", work / "tests", ignore=ignore)
    shared = (ROOT.parent / "shared").resolve()
    if shared.exists():
        # tests find the data at <checkout>/../shared; mutmut runs them from <work>/mutants/tests
        (work / "shared").symlink_to(shared, target_is_directory=True)
    selection = ", ".join(f'"{test_path(t)}"' for t in tests)
    (work / "pyproject.toml").write_text(
        "[tool.mutmut]\n"
        f'source_paths = ["{PACKAGE}"]\n'
        f'only_mutate = ["{PACKAGE}/{source(module)}"]\n'
        f"also_copy = [{', '.join(repr(n).replace(chr(39), chr(34)) for n in FOLDED)}]\n"
        f"pytest_add_cli_args_test_selection = [{selection}]\n"
        'pytest_add_cli_args = ["-q", "-p", "no:cacheprovider", "-m", "not slow"]\n'
        "\n[tool.pytest.ini_options]\n"
        'markers = ["slow: tests that start a process (conftest marks them: tests/slowmarks.py)"]\n',
        encoding="utf-8")
    return work


def function_of(mutant: str) -> str:
    """'rubric_engine.models.cache.xǁResultCacheǁget__mutmut_3' -> 'ResultCache.get'; 'x__mean__mutmut_1' -> '_mean'."""
    mangled = mutant.rsplit(".", 1)[-1].rsplit("__mutmut_", 1)[0]
    if mangled.startswith("x\u01c1"):
        return mangled[2:].replace("\u01c1", ".")
    return mangled[2:] if mangled.startswith("x_") else mangled


def equivalent_reason(module: str, mutant: str, diff: str) -> str | None:
    """Why a surviving mutant is listed as equivalent in EQUIVALENT, or None."""
    added = [line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    for function, text, why in EQUIVALENT.get(module, []):
        hit = (lambda line: line.startswith(text[1:])) if text.startswith("^") else (lambda line: text in line)
        if function_of(mutant) == function and any(hit(line) for line in added):
            return why
    return None


def run(module: str, tests: list[str], max_children: int | None, show: bool,
        resume: bool = False, summary: bool = False) -> tuple[Counter[str], int]:
    work = SCRATCH / module
    if not ((resume or summary) and (work / "mutants").is_dir()):
        work = prepare(module, tests)
        summary = False
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    cmd = [sys.executable, "-m", "mutmut", "run"]
    if max_children:
        cmd += ["--max-children", str(max_children)]
    code = 0
    if not summary:
        with (work / "mutmut.log").open("w", encoding="utf-8") as fh:
            code = subprocess.run(cmd, cwd=work, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    listing = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=work, env=env,
                             capture_output=True, text=True).stdout
    statuses: Counter[str] = Counter()
    for name, status in re.findall(r"^\s*(\S+):\s*(.+?)\s*$", listing, re.MULTILINE):
        if status == "survived" and EQUIVALENT.get(module) or (status == "survived" and show):
            diff = subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=work, env=env,
                                  capture_output=True, text=True).stdout
            why = equivalent_reason(module, name, diff)
            if why:
                status = "equivalent"
                if show:
                    print(f"# {name}: equivalent ({why})")
            elif show:
                print(diff)
        statuses[status] += 1
    return statuses, code


def main() -> int:
    parser = argparse.ArgumentParser(description="mutation testing of the core modules (mutmut 3)")
    parser.add_argument("modules", nargs="*", help=f"modules of {PACKAGE}/ ({', '.join(CORE)})")
    parser.add_argument("--all", action="store_true", help="every core module")
    parser.add_argument("--tests", nargs="+", help="test files instead of the module's default set")
    parser.add_argument("--max-children", type=int, default=None, help="parallel mutant runs (default: CPUs)")
    parser.add_argument("--resume", action="store_true",
                        help="continue an interrupted run in its scratch copy (mutmut skips mutants it has checked)")
    parser.add_argument("--summary", action="store_true",
                        help="only re-read the results of the last run (e.g. after listing more equivalent mutants)")
    parser.add_argument("--show-survivors", action="store_true",
                        help="print the diff of every survivor (equivalent ones as one line with the reason)")
    args = parser.parse_args()
    modules = list(CORE) if args.all else args.modules
    if not modules:
        parser.error("name at least one module, or --all")
    unknown = [m for m in modules if not (ROOT / PACKAGE / source(m)).is_file()]
    if unknown:
        parser.error(f"no module {', '.join(unknown)} in {PACKAGE}/")
    worst = 0
    for module in modules:
        tests = [Path(t).name for t in args.tests] if args.tests else CORE.get(module) or []
        if not tests:
            parser.error(f"no default tests for {module}: pass --tests")
        statuses, code = run(module, tests, args.max_children, args.show_survivors, args.resume, args.summary)
        total = sum(statuses.values())
        equivalent = statuses.get("equivalent", 0)
        killed = sum(n for s, n in statuses.items() if s in KILLED)
        share = 100.0 * killed / (total - equivalent) if total > equivalent else 0.0
        others = ", ".join(f"{s} {n}" for s, n in sorted(statuses.items())
                           if s not in KILLED and s != "equivalent") or "none"
        print(f"{module:<24} killed {killed}/{total - equivalent} non-equivalent = {share:.1f}%  "
              f"({total} mutants, {equivalent} equivalent; not killed: {others})"
              + ("" if code == 0 else f"  [mutmut exit {code}; see {SCRATCH.name}/{module}/mutmut.log]"),
              flush=True)
        worst = max(worst, 0 if total and code == 0 and share >= GOAL else 1)
    return worst


if __name__ == "__main__":
    sys.exit(main())
