"""How a declared model becomes a `ModelSpec`, and the cache key of a call to it.

Why apart from the client: the spec loader, the CLI, the runner and the localizer build specs and
keys without making calls; none of them needs the retry loop or LiteLLM. `ModelSpec.from_config` is
the one constructor for every declared model (a conf/ entry, an override, a spec's judge).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping

from rubric_engine.errors import ConfigError
from rubric_engine.models.dialects import SERVERS
from rubric_engine.models.mock import is_mock
from rubric_engine.models.prefixes import PrefixMemory
from rubric_engine.models.redact import HISTORY, redact

__all__ = ["ModelSpec", "cache_key", "MessageTexts", "provider_key_env", "provider_of", "check_keys",
           "CACHE_KEY_VERSION",
           "endpoint_params", "PARAMS_FIX", "destination", "KEYED_PROVIDERS", "spec_chosen_key", "check_spec_keys",
           "TRUST_ENDPOINTS", "declared_line", "faking_params", "FAKING_FIX",
           "params_text", "replies_per_request", "reply_ceiling", "SpecKeyError", "provider_base_env"]

CACHE_KEY_VERSION = 1  # bump to invalidate every stored result if the key recipe changes
MAX_TIMEOUT = 86_400.0  # one day: a per-attempt limit, and what httpx / asyncio are given must be finite
_NOT_IN_KEY = frozenset({"api_key", "timeout", "request_timeout", "num_retries", "max_retries"})
_KEY_ENV_EXCEPTIONS = {"together_ai": "TOGETHERAI_API_KEY"}  # the rest follow <PROVIDER>_API_KEY
# Hosted providers whose own endpoint always wants a key in <PROVIDER>_API_KEY: an entry for one of them
# without api_key_env (a spec's declared judge, an inline juror) is checked for that variable before any
# call. Providers not listed (local servers, cloud credentials such as bedrock / vertex_ai) are not checked.
KEYED_PROVIDERS = frozenset({"openai", "anthropic", "gemini", "mistral", "deepseek", "dashscope", "moonshot",
                              "together_ai", "groq", "xai", "openrouter", "fireworks_ai", "cohere", "perplexity",
                              "deepinfra", "cerebras"})
_FAMILY_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
# Words (as `_`-separated parts of a params key) and prefixes that name where a request goes or what
# credential it carries: `api_base`, `base_url`, `extra_headers`, `aws_secret_access_key`, `vertex_credentials`.
# Such a key in params would move the call (and the entry's key) somewhere `validate` does not show.
_ENDPOINT_WORDS = frozenset({"base", "url", "urls", "uri", "endpoint", "host", "hostname", "port", "header",
                             "headers", "key", "keys", "token", "secret", "password", "credential", "credentials",
                             "proxy", "proxies", "auth", "authorization", "organization", "client", "provider"})
_ENDPOINT_PREFIXES = ("api_", "aws_", "azure_", "vertex_", "gcp_", "google_", "litellm_", "watsonx_")
_PARAMS_ALLOWED = frozenset({"api_version"})  # Azure's API version: neither an endpoint nor a credential
PARAMS_FIX = ("set the endpoint with the entry's own api_base field and the key with api_key_env (a key goes only "
              "where its entry's api_base sends it, and validate shows both)")
_MISSING = "???"  # OmegaConf's mandatory value, as to_container() leaves it when nobody set it
_EXAMPLES = {"model": "{role}.model=openai/<served-model-name>",
             "api_base": "{role}.api_base=http://<host>:<port>/v1 (the server's OpenAI-compatible URL)"}


def provider_of(model: str) -> str:
    """The LiteLLM provider of a model id: its prefix, or the one LiteLLM infers from a bare name."""
    if "/" in model:
        return model.split("/", 1)[0]
    provider = next((p for p in ("claude", "gemini", "mistral", "deepseek") if model.startswith(p)), "openai")
    return {"claude": "anthropic"}.get(provider, provider)


def provider_key_env(model: str) -> str:
    """The env var LiteLLM reads for `model`'s provider when no api_key_env is given."""
    provider = provider_of(model)
    return _KEY_ENV_EXCEPTIONS.get(provider, f"{provider.upper()}_API_KEY")


def endpoint_params(params: Mapping[str, Any]) -> list[str]:
    """The keys of `params` that name an endpoint, a header or a credential (refused: see PARAMS_FIX)."""
    bad = []
    for key in map(str, params):
        low = key.lower()
        if low in _PARAMS_ALLOWED:
            continue
        if low.startswith(_ENDPOINT_PREFIXES) or _ENDPOINT_WORDS & set(re.split(r"[_\-.]", low)):
            bad.append(key)
    return bad


def faking_params(params: Mapping[str, Any]) -> list[str]:
    """The keys of `params` that make LiteLLM answer (or fail) without calling the model: `mock_response`,
    `mock_tool_calls`, `mock_timeout`, `mock_delay`, the router's `mock_testing_*`, `fake_stream` and any other
    `mock_*` / `fake_*` key (refused: a report would name a model that never answered; see FAKING_FIX)."""
    return [k for k in map(str, params) if k.lower().startswith(("mock_", "fake_"))]


FAKING_FIX = ("remove it: it makes LiteLLM answer without calling the model, so a report would name a judge that "
              "never judged (an offline stand-in is a mock/... model id, labelled mock everywhere)")


def _refuse_endpoint_params(params: Mapping[str, Any], where: str) -> None:
    bad = endpoint_params(params)
    if bad:
        raise ConfigError(f"{where}.{bad[0]} is not allowed (an endpoint or credential in params would bypass "
                          f"the key rule); {PARAMS_FIX}")
    fake = faking_params(params)
    if fake:
        raise ConfigError(f"{where}.{fake[0]} is not allowed; {FAKING_FIX}")


def destination(model: str, api_base: str | None, api_key_env: str | None) -> str:
    """Where calls to this entry go and which variable's key goes with them, as validate and a run say it."""
    if is_mock(model):  # answered by the engine itself, whatever api_base / api_key_env say
        return "no call (the engine's offline mock answers), no key"
    if api_base:
        key = f"key from ${api_key_env}" if api_key_env else "no key (placeholder 'no-key')"
        return f"endpoint {redact(api_base)}, {key}"
    key = f"key from ${api_key_env or provider_key_env(model)}"
    moved = provider_base_env(model)
    if moved is not None:  # LiteLLM (and the engine's OpenAI client) send the call where the variable says
        return f"endpoint ${moved[0]} ({redact(moved[1])}), {key}"
    return f"the provider's endpoint for {model.split('/', 1)[0] if '/' in model else model}, {key}"


def provider_base_env(model: str) -> tuple[str, str] | None:
    """(variable, value) of the environment variable that moves this provider's endpoint when an entry sets no
    api_base, or None: OPENAI_BASE_URL then OPENAI_API_BASE for openai (LiteLLM's and the OpenAI SDK's order),
    <PROVIDER>_API_BASE then <PROVIDER>_BASE_URL for the others (ANTHROPIC_API_BASE, MISTRAL_API_BASE, ...)."""
    provider = provider_of(model).upper()
    names = ("BASE_URL", "API_BASE") if provider == "OPENAI" else ("API_BASE", "BASE_URL")
    return next(((f"{provider}_{n}", os.environ[f"{provider}_{n}"]) for n in names
                 if os.environ.get(f"{provider}_{n}")), None)


TRUST_ENDPOINTS = "trust_endpoints=true"  # the user's word that a spec's entries may name keys and keyed endpoints


def declared_line(label: str, name: str, model: str, api_base: str | None, api_key_env: str | None,
                  params: Mapping[str, Any] | None = None) -> str:
    """validate's line for a model entry a spec declares: where it calls, with which key, with which params, and
    whether a run refuses it (a key the spec chose) unless the user trusts the spec."""
    line = f"{label} {name} ({model}) calls {destination(model, api_base, api_key_env)}"
    if params:
        line += f"; params {params_text(params)}"
    why = spec_chosen_key(model, api_base, api_key_env)
    if why:
        line += f" (a run refuses this: the spec {why}; allow it with {TRUST_ENDPOINTS} if you trust the spec)"
    return line


def params_text(params: Mapping[str, Any]) -> str:
    """Every params key an entry sends with each request, as validate and the dry run show them: `n=128, ...`."""
    return ", ".join(f"{k}={v}" if isinstance(v, (int, float, str)) and not isinstance(v, bool)
                     else f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in params.items())


def replies_per_request(params: Mapping[str, Any]) -> int:
    """How many replies one request asks for and is billed for (`n`, or `best_of` generated server-side)."""
    counts = [params.get(k) for k in ("n", "best_of")]
    return max([int(c) for c in counts if isinstance(c, (int, float)) and not isinstance(c, bool) and c >= 1] or [1])


def reply_ceiling(params: Mapping[str, Any]) -> int | None:
    """The most completion tokens one reply may be billed for (`max_tokens` / `max_completion_tokens`), or None."""
    given = [params.get(k) for k in ("max_tokens", "max_completion_tokens", "max_output_tokens")]
    caps = [int(c) for c in given if isinstance(c, (int, float)) and not isinstance(c, bool) and c > 0]
    return min(caps) if caps else None


def spec_chosen_key(model: str, api_base: str | None, api_key_env: str | None) -> str | None:
    """Why an entry shipped in a spec would decide where one of the user's keys goes, or None when it does not.

    A spec may declare a mock, a keyless endpoint of its own (sent the placeholder 'no-key'), or a provider's
    own endpoint with that provider's own key variable; a key variable it names for its own endpoint, or a
    variable other than the provider's for the provider's endpoint, is the spec author's choice of secret and
    destination, not the user's."""
    if is_mock(model) or not api_key_env:
        return None
    if api_base:
        return f"would send ${api_key_env} to {redact(api_base)}"
    if api_key_env != provider_key_env(model):
        return f"would send ${api_key_env} to the provider's endpoint for {provider_of(model)}"
    return None


class SpecKeyError(ConfigError):
    """A model entry a spec declared would send a key the spec chose (check_spec_keys): a sweep checks it for
    every job before the first one runs, as it checks keys."""


def check_spec_keys(specs: "list[ModelSpec]", trusted: bool) -> None:
    """Before any call and before a run directory is written: every entry a spec declared (`declared_in` set)
    that would send a key the spec chose is one line (ConfigError, exit 2), unless the user trusts it."""
    if trusted:
        return
    for spec in specs:
        why = spec.declared_in and spec_chosen_key(spec.model, spec.api_base, spec.api_key_env)
        if why:
            role = spec.role or "model"
            raise SpecKeyError(f"{role} {spec.name} ({spec.model}) declared in {spec.declared_in} {why}: a spec "
                               f"may not choose where your keys go; allow it with {TRUST_ENDPOINTS} if you trust "
                               f"this spec, or choose the {role} yourself ({role}=ENTRY)")


def _plain(value: Any) -> Any:
    """Mappings/sequences (e.g. OmegaConf containers) -> dict/list, so specs hash and serialise."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class ModelSpec:
    """One model as the user declared it. `params` are sampling params passed to LiteLLM."""

    name: str
    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    timeout: float = 120.0
    family: str | None = None  # maker / lineage (openai, anthropic, qwen, ...): the self-preference audit's unit
    revision: str | None = None  # any string naming what is served behind `model` (part of the cache key)
    server: str | None = None  # server family (models/dialects.py): how a structured reply is asked for; None: from the id
    # the role it plays (candidate, judge, user, baseline): its errors name the overrides to use; not part of
    # equality, hashing or any cache key (one model in two roles is one model)
    role: str | None = field(default=None, compare=False)
    # where a spec declared this entry (file:line), None for the user's own entries (conf/, the command line):
    # a spec's entry may not name a key unless the user trusts it (check_spec_keys)
    declared_in: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError(f"model {self.name!r}: 'model' must be a LiteLLM id like 'openai/gpt-4o' (got {self.model!r})")
        if (isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float))
                or not 0 < self.timeout <= MAX_TIMEOUT):  # NaN fails both comparisons; inf is not a limit
            raise ConfigError(f"model {self.name!r}: timeout must be a number of seconds > 0 and <= {MAX_TIMEOUT} "
                              f"(got {self.timeout!r})")
        params = _plain(self.params or {})
        _refuse_endpoint_params(params, f"model {self.name!r}: params")
        object.__setattr__(self, "params", params)
        if self.family is not None:
            fam = str(self.family).strip().lower()
            if not _FAMILY_RE.fullmatch(fam):
                raise ConfigError(f"model {self.name!r}: family must be a short name like 'openai' or 'qwen' "
                                  f"(letters, digits, - _ .), got {self.family!r}")
            object.__setattr__(self, "family", fam)
        if self.server is not None and self.server not in SERVERS:
            raise ConfigError(f"model {self.name!r}: server must be one of {', '.join(SERVERS)} (got {self.server!r})")

    def __hash__(self) -> int:
        return hash((self.name, self.model, self.api_base, self.api_key_env, self.timeout, self.family, self.revision,
                     json.dumps(self.params, sort_keys=True, default=str)))

    @classmethod
    def from_config(cls, data: Mapping[str, Any], *, role: str, timeout: float | None = None) -> "ModelSpec":
        """The one way a declared model (a conf/ entry, an override, a spec's judge) becomes a ModelSpec.

        `timeout` is the run-wide override (`timeout=` on the command line): it wins over the entry's own
        `timeout`, which wins over the default of 120 s.
        """
        data = _plain(dict(data))
        allowed = {"name", "model", "api_base", "api_key_env", "params", "timeout", "family", "revision", "server"}
        unknown = sorted(set(data) - allowed)
        if unknown:
            hint = " (API keys are never put in config: name the environment variable with api_key_env)" \
                if any("key" in k for k in unknown) else ""
            raise ConfigError(f"{role}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}{hint}")
        for key in ("model", "api_base"):  # an entry's `???` (OmegaConf: must be given) left unset
            if data.get(key) == _MISSING:
                example = _EXAMPLES[key].format(role=role)
                raise ConfigError(f"{role}.{key} is not set and this model entry needs it; add {example}")
        _refuse_endpoint_params(data.get("params") or {}, f"{role}.params")
        model = data.get("model")
        if not model:
            raise ConfigError(f"{role}.model is not set; e.g. {role}.model=openai/<served-model-name>")
        chosen = timeout if timeout is not None else data.get("timeout")
        try:
            seconds = float(chosen) if chosen is not None else 120.0
        except (TypeError, ValueError):
            raise ConfigError(f"{role}: timeout must be a number of seconds (got {chosen!r})") from None
        return cls(name=str(data.get("name") or str(model).split("/", 1)[-1]), model=str(model),
                   api_base=data.get("api_base") or None, api_key_env=data.get("api_key_env") or None,
                   params=dict(data.get("params") or {}), timeout=seconds, family=data.get("family") or None,
                   revision=None if data.get("revision") is None else str(data.get("revision")), role=role,
                   server=data.get("server") or None)

    @cached_property
    def _key_part(self) -> dict[str, Any]:
        """This model's share of every cache key (see cache_key), computed once."""
        part = {"v": CACHE_KEY_VERSION, "model": self.model, "api_base": (self.api_base or "").rstrip("/") or None,
                "params": {k: v for k, v in self.params.items() if k not in _NOT_IN_KEY}}
        if self.revision is not None:  # only when declared, so keys of entries without one stay as they were
            part["revision"] = self.revision
        return part

    @property
    def offline(self) -> bool:
        """True for a `mock/` model: the engine answers it itself (models/mock.py), no call, no key, no cost."""
        return is_mock(self.model)

    @property
    def key_env(self) -> str:
        """The env var holding this model's key (declared, or the provider's default)."""
        return self.api_key_env or provider_key_env(self.model)

    @property
    def required_key_env(self) -> str | None:
        """The env var that must hold a key before this model is called, or None: the declared api_key_env;
        without one, a hosted provider's own variable when the call goes to that provider's endpoint (no
        api_base, which never receives the provider's key); None for mock models."""
        if is_mock(self.model):
            return None
        if self.api_key_env:
            return self.api_key_env
        if self.api_base:
            return None
        provider = self.model.split("/", 1)[0] if "/" in self.model else None
        env = provider_key_env(self.model)
        return env if provider is None or provider in KEYED_PROVIDERS else None


def check_keys(*specs: "ModelSpec | None") -> None:
    """Before the first call of anything: every model that will be called has its key, or one line
    naming the variable (ConfigError, exit 2). The one key check for runs, sweeps and localize."""
    for spec in specs:
        env = spec.required_key_env if spec is not None else None
        if spec is not None and env and not os.environ.get(env):
            where = f"{spec.role}.api_key_env=<VAR>" if spec.role else "api_key_env=<VAR>"
            raise ConfigError(f"{spec.role + ' ' if spec.role else ''}{spec.name} ({spec.model}) needs an API key: "
                              f"export {env}=... (or point it elsewhere with {where})")


def cache_key(spec: ModelSpec, messages: list[dict[str, Any]], response_format: dict[str, Any] | None,
              repeat: int = 0, parts: "MessageTexts | None" = None) -> str:
    """sha256 over what determines the answer; never the key, timeout, retries or concurrency.
    `repeat` > 0 (an independent re-grading) gets its own key; 0 keeps the key of a single grading.

    Per call only the messages are new: the spec's part is built once (`ModelSpec._key_part`), and
    mappings that are not dicts (OmegaConf) are converted while serialising, not copied beforehand; the
    text hashed is the same as when everything was copied first, so stored keys stay valid. With `parts`
    (a client's `MessageTexts`) each plain message is serialised once, not once per request that repeats it:
    the text hashed is the same, character for character."""
    payload = {**spec._key_part, "messages": messages, "response_format": response_format}
    if repeat:
        payload["repeat"] = repeat
    if parts is not None and len(messages) >= HISTORY:
        payload["messages"] = _MARK
        head, mark, tail = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=_jsonable).partition(_MARKED)
        if mark and _MARKED not in tail:  # the first mark is the messages' (no value before them holds its text)
            hashed = parts.hashed(head, messages)
            if hashed is not None:
                hashed.update(("]" + tail).encode("utf-8"))
                return hashed.hexdigest()
        payload["messages"] = messages
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=_jsonable)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_MARK = "\x00messages\x00"  # stands for the messages' JSON while the rest of the key's text is serialised
_MARKED = json.dumps(_MARK)


class MessageTexts:
    """The JSON text of each plain message (a dict of a string role and a string content, as conversations and
    prompts are) that a client's cache keys hold, remembered: a conversation's request at turn k repeats the
    k - 1 turns before it, and serialising them all again for every key made the keys quadratic in the turns.
    Only requests that carry earlier turns (models/redact.HISTORY messages or more) are remembered, bounded by
    the characters held (`max_chars`); when full it starts again. Each remembered request's hash is kept too,
    so the next turn's key hashes only the messages it adds (models/prefixes.py)."""

    def __init__(self, max_chars: int = 4_000_000) -> None:
        self.max_chars = max_chars
        self._done: dict[tuple[str, str], str] = {}
        self._chars = 0
        self._prefixes: PrefixMemory[tuple[str, "hashlib._Hash"]] = PrefixMemory()  # request -> (head, its hash)

    def hashed(self, head: str, messages: list[dict[str, Any]]) -> "hashlib._Hash | None":
        """sha256 fed `head`, then `messages` as `json.dumps(messages, sort_keys=True, ensure_ascii=False)` writes
        them, without the closing bracket (the caller adds it and what follows); None when a message is not plain
        (the caller serialises the whole). A request that repeats a remembered one and adds messages continues that
        one's hash: only the new messages are serialised (models/prefixes.py)."""
        n, held = self._prefixes.longest(messages)
        if held is not None and held[0] == head:
            hashed, sep = held[1].copy(), ", "
        else:
            n, hashed, sep = 0, hashlib.sha256((head + "[").encode("utf-8")), ""
        for m in itertools.islice(messages, n, None):
            text = self._text(m)
            if text is None:
                return None
            hashed.update((sep + text).encode("utf-8"))
            sep = ", "
        self._prefixes.remember(messages, (head, hashed.copy()))
        return hashed

    def _text(self, m: Any) -> str | None:
        """One plain message's JSON text (remembered by its role and content); None when it is not plain."""
        if type(m) is not dict or len(m) != 2:
            return None
        role, content = m.get("role"), m.get("content")
        if type(role) is not str or type(content) is not str:
            return None
        done = self._done.get((role, content))
        if done is None:
            done = _message_json(role, content)
            if self._chars + len(done) > self.max_chars:
                self._done, self._chars = {}, 0
            self._done[(role, content)] = done
            self._chars += len(done)
        return done


def _message_json(role: str, content: str) -> str:
    return json.dumps({"content": content, "role": role}, ensure_ascii=False)


def _jsonable(value: Any) -> Any:
    """json.dumps' fallback: a non-dict mapping as a dict (as `_plain` would), anything else as text."""
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    return str(value)
