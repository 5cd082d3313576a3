"""`rubric-engine import promptfoo promptfooconfig.yaml`: a promptfoo test suite as a spec directory.

Why these mappings (docs/imports.md has the table): promptfoo scores a test as the weighted mean of its
assertions' scores, which for pass/fail assertions is what the engine's `met_over_positive` over items of the
same weights gives. So each question is one (prompt, test) pair, its prompt rendered with the test's vars
(promptfoo's Nunjucks `{{ var }}` is jinja2 syntax; it renders in the sandbox), and each assertion one item:
`equals`, `contains` / `icontains` (and their `not-` forms), `starts-with`, `regex` and `is-json` become checks
the engine decides; `llm-rubric` and `g-eval` judged items whose criterion is the assertion's value (with
its `threshold` stated). `defaultTest` is merged as promptfoo merges it (its vars under the test's, its
assertions first). Providers become candidate entries (conf/candidate/NAME.yaml) for the LiteLLM ids they
map to. Whatever has no counterpart (javascript and python assertions, which run code; a test's threshold;
other assertion types; provider settings) is printed and listed in UNMAPPED.md, never dropped silently; a
field or assertion type promptfoo itself does not have is one line, exit 2.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rubric_engine.authoring.imported import Imported, Item, Row, known_keys, refuse, render
from rubric_engine.scoring.checks import compile_re2

__all__ = ["import_promptfoo", "MAPPED", "PROMPTFOO_TYPES"]

SOURCE = "promptfoo"
_TOP = ("description", "prompts", "providers", "tests", "defaultTest", "scenarios", "evaluateOptions", "outputPath",
        "sharing", "env", "nunjucksFilters", "derivedMetrics", "extensions", "tags", "redteam", "writeLatestResults",
        "commandLineOptions", "metadata", "targets")
_TEST = ("description", "vars", "assert", "options", "threshold", "metadata", "provider", "providerOutput", "metric")
_ASSERT = ("type", "value", "weight", "threshold", "metric", "provider", "rubricPrompt", "transform", "config")
MAPPED = ("equals", "not-equals", "contains", "not-contains", "icontains", "not-icontains", "starts-with", "regex",
          "is-json", "llm-rubric", "g-eval")
PROMPTFOO_TYPES = MAPPED + (  # the other types promptfoo documents (each also as `not-TYPE`): listed when met
    "contains-all", "contains-any", "icontains-all", "icontains-any", "contains-json", "is-html", "contains-html",
    "is-sql", "contains-sql", "is-xml", "contains-xml", "is-refusal", "javascript", "python", "webhook", "rouge-n",
    "bleu", "gleu", "meteor", "levenshtein", "latency", "perplexity", "perplexity-score", "cost", "similar",
    "is-valid-function-call", "is-valid-openai-function-call", "is-valid-openai-tools-call", "tool-call-f1",
    "factuality", "model-graded-closedqa", "model-graded-factuality", "answer-relevance", "context-faithfulness",
    "context-recall", "context-relevance", "conversation-relevance", "select-best", "max-score", "human",
    "moderation", "classifier", "pi", "finish-reason", "assert-set", "search-rubric", "word-count", "guardrails",
    "trace-span-count", "trace-span-duration", "trace-error-spans", "f-score")
_PROVIDERS = {"openai": ("openai", "OPENAI_API_KEY"), "anthropic": ("anthropic", "ANTHROPIC_API_KEY"),
              "ollama": ("ollama", None), "mistral": ("mistral", "MISTRAL_API_KEY"), "groq": ("groq", "GROQ_API_KEY")}
_KINDS = ("chat", "messages", "completion")
_PARAMS = ("temperature", "max_tokens", "top_p", "seed")


def _litellm_id(provider: str) -> tuple[str, str | None] | None:
    """promptfoo's `openai:chat:gpt-4o-mini` as LiteLLM's `openai/gpt-4o-mini` and its key variable."""
    parts = provider.split(":")
    if len(parts) >= 2 and parts[0] in _PROVIDERS:
        model = ":".join(parts[2:] if parts[1] in _KINDS and len(parts) > 2 else parts[1:])
        prefix, key = _PROVIDERS[parts[0]]
        return (f"{prefix}/{model}", key) if model else None
    return None


def _providers(raw: Any, unmapped: list[str]) -> dict[str, dict[str, Any]]:
    entries: dict[str, dict[str, Any]] = {}
    for i, p in enumerate(raw if isinstance(raw, list) else [raw] if raw else []):
        pid, label, config = (p, None, {}) if isinstance(p, str) else (p.get("id"), p.get("label"), p.get("config") or {}) \
            if isinstance(p, Mapping) else (None, None, {})
        mapped = _litellm_id(pid) if isinstance(pid, str) else None
        if mapped is None:
            unmapped.append(f"providers[{i}] ({pid!r}): no LiteLLM id known for it; pass candidate=PROVIDER/MODEL")
            continue
        name = re.sub(r"[^A-Za-z0-9_.-]", "-", str(label or mapped[0].split("/", 1)[1]))[:60]
        params = {k: v for k, v in dict(config).items() if k in _PARAMS}
        unmapped += [f"providers[{i}].config.{k}: not carried over" for k in config if k not in _PARAMS]
        entries[name] = {"name": name, "model": mapped[0], "api_base": "http://localhost:11434" if mapped[0].startswith(
            "ollama/") else None, "api_key_env": mapped[1], "params": params}
    return entries


def _prompts(raw: Any, unmapped: list[str]) -> list[str]:
    prompts = []
    for i, p in enumerate(raw if isinstance(raw, list) else [raw] if raw else []):
        text = p.get("raw") if isinstance(p, Mapping) else p
        if not isinstance(text, str) or text.startswith("file://"):
            unmapped.append(f"prompts[{i}]: a prompt read from a file or written as code is not imported; paste its "
                            "text into the config")
            continue
        prompts.append(text)
    return prompts


def _threshold(a: Mapping[str, Any], default: float | None) -> str:
    t = a.get("threshold", default)
    return f" (met when a score from 0 to 1 would be at least {float(t):g})" if t is not None else ""


def _item(where: str, a: Mapping[str, Any], variables: Mapping[str, Any], unmapped: list[str]) -> Item | None:
    kind, weight = a["type"], float(a.get("weight", 1))
    value = a.get("value")
    if kind not in MAPPED:
        why = "runs code, which an import never runs" if kind in ("javascript", "python", "webhook") else \
            "has no counterpart in the engine"
        unmapped.append(f"{where} ({kind}): {why}; the question is scored without it")
        return None
    for key in ("transform", "rubricPrompt", "provider", "config", "metric"):
        if key in a:
            unmapped.append(f"{where} ({kind}).{key}: not carried over")
    if isinstance(value, str) and value.startswith(("file://", "python:", "javascript:")):
        unmapped.append(f"{where} ({kind}): a value read from a file or computed by code is not imported")
        return None
    if kind in ("llm-rubric", "g-eval"):
        criteria = value if isinstance(value, str) else "; ".join(map(str, value or []))
        text = render(SOURCE, f"{where}.value", criteria, variables)
        return Item(text=f"{text}{_threshold(a, 0.7 if kind == 'g-eval' else None)}", weight=weight)
    if kind == "is-json":
        if value is not None:
            unmapped.append(f"{where} (is-json).value: the JSON schema is not checked, only that the reply is JSON")
        return Item(text="the reply is valid JSON", weight=weight, check={"type": "json"})
    if not isinstance(value, str) or not value:
        unmapped.append(f"{where} ({kind}): a value that is not a non-empty text is not imported")
        return None
    text = render(SOURCE, f"{where}.value", value, variables)
    if kind == "regex":
        try:
            compile_re2(text)
        except ValueError as exc:
            unmapped.append(f"{where} (regex): {exc}")
            return None
        return Item(text=f"matches /{text}/", weight=weight, check={"type": "regex", "pattern": text})
    if kind == "starts-with":
        return Item(text=f"starts with {text!r}", weight=weight,
                    check={"type": "regex", "pattern": r"^\Q" + text.replace(r"\E", r"\E\\E\Q") + r"\E"})
    base = kind.removeprefix("not-")
    check = {"type": ("not_" if kind.startswith("not-") else "") + ("equals" if base == "equals" else "contains"),
             "value": text, "ignore_case": base == "icontains"}
    return Item(text=f"{kind} {text!r}", weight=weight, check=check)


def _assertions(where: str, raw: Any) -> list[dict[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise refuse(SOURCE, f"{where}: expected a list of assertions", "see docs/imports.md")
    out = []
    for i, a in enumerate(raw):
        a = known_keys(SOURCE, f"{where}[{i}]", a, _ASSERT, ("type",))
        if not isinstance(a["type"], str) or a["type"].removeprefix("not-") not in PROMPTFOO_TYPES:
            raise refuse(SOURCE, f"{where}[{i}]: unknown assertion type {a['type']!r}",
                         f"promptfoo's types imported here: {', '.join(MAPPED)}")
        out.append(a)
    return out


def import_promptfoo(file: Path) -> Imported:
    """The questions, items and candidate entries of a promptfoo config (refused in one line otherwise)."""
    from rubric_engine.errors import ConfigError, SpecError
    from rubric_engine.spec.files import read_bounded_yaml

    try:
        config = read_bounded_yaml(file)
    except SpecError as exc:
        raise ConfigError(f"import {SOURCE}: {exc} (nothing was written)") from None
    config = known_keys(SOURCE, str(file), config, _TOP, ("tests",))
    unmapped: list[str] = [f"{k}: not carried over" for k in config if k not in ("description", "prompts", "providers",
                                                                                 "tests", "defaultTest", "targets")]
    default = known_keys(SOURCE, "defaultTest", config.get("defaultTest") or {}, _TEST)
    default_asserts = _assertions("defaultTest.assert", default.get("assert"))
    prompts = _prompts(config.get("prompts") or ["{{ prompt }}"], unmapped)
    candidates = _providers(config.get("providers", config.get("targets")), unmapped)
    tests = config["tests"]
    if not isinstance(tests, list):
        raise refuse(SOURCE, "tests: a tests file (file://...) is not read by the import", "list the tests inline")
    judge = _judge(default, unmapped)
    rows = []
    for i, t in enumerate(tests):
        t = known_keys(SOURCE, f"tests[{i}]", t, _TEST)
        asserts = default_asserts + _assertions(f"tests[{i}].assert", t.get("assert"))
        if t.get("threshold", default.get("threshold")) is not None:
            unmapped.append(f"tests[{i}].threshold: the engine scores the weighted share of met items; a test's pass "
                            "threshold is not applied")
        cases = _cases(i, {**dict(default.get("vars") or {}), **dict(t.get("vars") or {})}, unmapped)
        for (v, variables), (j, p) in itertools.product(enumerate(cases), enumerate(prompts)):
            items = [it for k, a in enumerate(asserts) if (it := _item(_where(i, k, len(default_asserts)), a, variables,
                                                                      unmapped)) is not None]
            if not items:
                unmapped.append(f"tests[{i}]: no assertion could be imported; the test is left out")
                continue
            qid = f"t{i + 1}" + (f"-v{v + 1}" if len(cases) > 1 else "") + (f"-p{j + 1}" if len(prompts) > 1 else "")
            rows.append(Row(id=qid, prompt=_chat(render(SOURCE, f"prompts[{j}] with tests[{i}].vars", p, variables)),
                            items=items))
    name = re.sub(r"[^A-Za-z0-9_-]", "_", file.parent.name if file.stem == "promptfooconfig" else file.stem)[:60]
    imported = Imported(name=name or "promptfoo", source=f"promptfoo config {file.name}", rows=rows,
                        candidates=candidates, unmapped=unmapped)
    if judge:
        imported.judge_model = judge
    return imported


def _cases(i: int, variables: dict[str, Any], unmapped: list[str]) -> list[dict[str, Any]]:
    """A test's vars as promptfoo runs them: a var holding a list gives one case per value (every combination)."""
    for name, value in variables.items():
        if isinstance(value, str) and value.startswith("file://"):
            unmapped.append(f"tests[{i}].vars.{name}: a value read from a file is not read; its text stays {value!r}")
    lists = {k: v for k, v in variables.items() if isinstance(v, list)}
    if not lists:
        return [variables]
    combos = list(itertools.product(*lists.values()))
    if len(combos) > 1000:
        raise refuse(SOURCE, f"tests[{i}].vars: {len(combos)} combinations of list values", "keep it under 1,000")
    return [{**variables, **dict(zip(lists, combo))} for combo in combos]


def _chat(prompt: str) -> str | list[dict[str, str]]:
    """A prompt that is a JSON list of chat messages (as promptfoo reads one) as those messages; else the text."""
    if not prompt.lstrip().startswith("["):
        return prompt
    try:
        messages = json.loads(prompt)
    except ValueError:
        return prompt
    ok = isinstance(messages, list) and messages and all(
        isinstance(m, dict) and set(m) == {"role", "content"} and m["role"] in ("system", "user", "assistant")
        and isinstance(m["content"], str) for m in messages)
    return messages if ok else prompt


def _where(test: int, k: int, n_default: int) -> str:
    return f"defaultTest.assert[{k}]" if k < n_default else f"tests[{test}].assert[{k - n_default}]"


def _judge(default: Mapping[str, Any], unmapped: list[str]) -> str | None:
    """The grading provider defaultTest.options names, as a LiteLLM id (None: the import's default judge)."""
    provider = (default.get("options") or {}).get("provider")
    if provider is None:
        return None
    pid = provider if isinstance(provider, str) else provider.get("id") if isinstance(provider, Mapping) else None
    mapped = _litellm_id(pid) if isinstance(pid, str) else None
    if mapped is None:
        unmapped.append(f"defaultTest.options.provider ({pid!r}): no LiteLLM id known; the default judge is used")
    return mapped[0] if mapped else None
