"""modelspec: a declared model -> ModelSpec (errors word for word, timeouts, family), the provider's key
variable, and what the cache key does and does not depend on. Written against survivors of
`python bench/mutation.py modelspec`."""

from __future__ import annotations

import itertools

import pytest

from rubric_engine.errors import ConfigError
from rubric_engine.models.entries import CACHE_KEY_VERSION, MessageTexts, ModelSpec, cache_key, provider_key_env

MSG = [{"role": "user", "content": "你好"}]


@pytest.mark.parametrize("model, env", [
    ("openai/gpt-4o", "OPENAI_API_KEY"), ("anthropic/claude-x", "ANTHROPIC_API_KEY"),
    ("together_ai/llama", "TOGETHERAI_API_KEY"), ("gpt-4o", "OPENAI_API_KEY"),
    ("claude-3-haiku", "ANTHROPIC_API_KEY"), ("gemini-pro", "GEMINI_API_KEY"), ("mistral-large", "MISTRAL_API_KEY"),
    ("deepseek-chat", "DEEPSEEK_API_KEY"), ("openrouter/a/b", "OPENROUTER_API_KEY"),
])
def test_provider_key_env(model: str, env: str) -> None:
    assert provider_key_env(model) == env
    assert ModelSpec("m", model).key_env == env
    assert ModelSpec("m", model, api_key_env="MINE").key_env == "MINE"


def test_from_config_fills_defaults() -> None:
    s = ModelSpec.from_config({"model": "openai/served-name"}, role="judge")
    assert s == ModelSpec(name="served-name", model="openai/served-name", timeout=120.0)
    assert (s.api_base, s.api_key_env, s.params, s.family, s.revision) == (None, None, {}, None, None)
    full = ModelSpec.from_config({"name": "n", "model": "m/x", "api_base": "http://h/v1", "api_key_env": "K",
                                  "params": {"temperature": 0}, "timeout": "30", "family": " Qwen ",
                                  "revision": 7}, role="candidate")
    assert full == ModelSpec("n", "m/x", "http://h/v1", "K", {"temperature": 0}, 30.0, "qwen", "7")
    blank = ModelSpec.from_config({"model": "m/x", "api_base": "", "api_key_env": "", "family": ""}, role="judge")
    assert (blank.api_base, blank.api_key_env, blank.family) == (None, None, None)


def test_run_wide_timeout_wins_over_the_entry() -> None:
    assert ModelSpec.from_config({"model": "m/x", "timeout": 30}, role="judge", timeout=5).timeout == 5.0
    assert ModelSpec.from_config({"model": "m/x", "timeout": 30}, role="judge").timeout == 30.0
    with pytest.raises(ConfigError) as err:
        ModelSpec.from_config({"model": "m/x", "timeout": "soon"}, role="judge")
    assert str(err.value) == "judge: timeout must be a number of seconds (got 'soon')"


def test_from_config_errors() -> None:
    with pytest.raises(ConfigError) as err:
        ModelSpec.from_config({"model": "m/x", "api_key": "sk", "colour": 1}, role="judge")
    assert str(err.value) == ("judge: unknown key(s) api_key, colour; allowed: api_base, api_key_env, family, model, "
                              "name, params, revision, server, timeout (API keys are never put in config: name the environment "
                              "variable with api_key_env)")
    with pytest.raises(ConfigError) as err:
        ModelSpec.from_config({"model": "m/x", "colour": 1}, role="judge")
    assert str(err.value).endswith("revision, server, timeout")
    with pytest.raises(ConfigError) as err:
        ModelSpec.from_config({"name": "x"}, role="candidate")
    assert str(err.value) == "candidate.model is not set; e.g. candidate.model=openai/<served-model-name>"


def test_spec_checks() -> None:
    with pytest.raises(ConfigError) as err:
        ModelSpec("n", "  ")
    assert str(err.value) == "model 'n': 'model' must be a LiteLLM id like 'openai/gpt-4o' (got '  ')"
    for bad in (0, -1.0, float("nan"), float("inf"), 86_401):
        with pytest.raises(ConfigError) as err:
            ModelSpec("n", "m/x", timeout=bad)
        assert str(err.value) == f"model 'n': timeout must be a number of seconds > 0 and <= 86400.0 (got {bad!r})"
    with pytest.raises(ConfigError) as err:
        ModelSpec("n", "m/x", params={"api_key": "sk"})
    assert str(err.value).startswith("model 'n': params.api_key is not allowed")
    with pytest.raises(ConfigError) as err:
        ModelSpec("n", "m/x", family="Open AI!")
    assert str(err.value) == ("model 'n': family must be a short name like 'openai' or 'qwen' (letters, digits, - _ .), "
                              "got 'Open AI!'")
    assert ModelSpec("n", "m/x", family="a" * 64).family == "a" * 64
    with pytest.raises(ConfigError):
        ModelSpec("n", "m/x", family="a" * 65)


def test_specs_with_equal_fields_hash_equal() -> None:
    a = ModelSpec("n", "m/x", params={"t": [1, 2]})
    b = ModelSpec("n", "m/x", params={"t": (1, 2)})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert hash(a) != hash(ModelSpec("n", "m/x", params={"t": [2, 1]}))
    assert hash(a) != hash(ModelSpec("n", "m/x", params={"t": [1, 2]}, revision="r"))


def test_cache_key_ignores_key_timeout_and_retries() -> None:
    base = ModelSpec("n", "openai/x", api_base="http://h/v1/", params={"temperature": 0})
    key = cache_key(base, MSG, None)
    same = ModelSpec("other-name", "openai/x", api_base="http://h/v1", api_key_env="K", timeout=5,
                     params={"temperature": 0, "timeout": 9, "request_timeout": 9, "num_retries": 3, "max_retries": 3})
    assert cache_key(same, MSG, None) == key  # trailing slash, name, key variable, timeouts, retries: same answer
    assert cache_key(base, MSG, None, repeat=0) == key
    for changed in (ModelSpec("n", "openai/y", api_base="http://h/v1", params={"temperature": 0}),
                    ModelSpec("n", "openai/x", api_base="http://other/v1", params={"temperature": 0}),
                    ModelSpec("n", "openai/x", api_base="http://h/v1", params={"temperature": 1}),
                    ModelSpec("n", "openai/x", api_base="http://h/v1", params={"temperature": 0}, revision="r2")):
        assert cache_key(changed, MSG, None) != key
    assert cache_key(base, MSG, {"type": "json_object"}) != key
    assert cache_key(base, [{"role": "user", "content": "你好!"}], None) != key
    assert cache_key(base, MSG, None, repeat=1) != key != cache_key(base, MSG, None, repeat=2)
    assert len(key) == 64 and int(key, 16) >= 0 and CACHE_KEY_VERSION == 1


def test_cache_key_is_pinned() -> None:
    """The recipe is part of every stored cache: changing it silently re-asks every model (bump the version)."""
    import hashlib
    import json

    spec = ModelSpec("n", "openai/x", params={"temperature": 0})
    payload = {"v": 1, "model": "openai/x", "api_base": None, "messages": MSG, "params": {"temperature": 0},
               "response_format": None}
    expected = hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()
    assert cache_key(spec, MSG, None) == expected
    payload.update(repeat=2, revision="r")
    expected = hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()
    assert cache_key(ModelSpec("n", "openai/x", params={"temperature": 0}, revision="r"), MSG, None, repeat=2) == expected


def _pinned(spec: ModelSpec, messages: list, fmt: dict | None = None, repeat: int = 0) -> str:
    """The recipe as test_cache_key_is_pinned states it: every value serialised whole."""
    import hashlib
    import json

    payload = {**spec._key_part, "messages": messages, "response_format": fmt}
    if repeat:
        payload["repeat"] = repeat
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


MARK = "\x00messages\x00"  # the text the remembered path puts where the messages go


@pytest.mark.parametrize("messages", [
    [],
    MSG,
    [{"role": "system", "content": "quotes \" and \\ and\nnew lines\t, \x00 \x1f \u2028 and 😀"},
     {"role": "user", "content": ""}, {"role": "assistant", "content": MARK}],
    [{"role": "user", "content": [{"type": "text", "text": "a part"}]}],     # not plain: serialised whole
    [{"role": "user", "content": "hi", "name": "ann"}],                        # a third key: whole
    [{"content": "hi", "role": "user"}, {"role": "user", "content": None}],   # a None content: whole
    [{"role": 1, "content": "x"}],
])
def test_remembered_message_texts_hash_to_the_pinned_key(messages: list) -> None:
    """A client's MessageTexts serialises each plain message once; the text hashed stays character for character
    the recipe's (stored keys stay valid), whatever the content holds, the mark's own text included."""
    texts = MessageTexts()
    earlier = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    specs = (ModelSpec("n", "openai/x", params={"temperature": 0}),
             ModelSpec("n", "openai/x", api_base="http://h/v1", params={"stop": MARK}, revision="r"),
             ModelSpec("n", "openai/x", api_base=MARK, params={}))  # the mark's text before the messages' place
    # alone, and after earlier turns (only requests carrying earlier turns are remembered)
    for spec, sent in itertools.product(specs, (messages, [*earlier, *messages])):
        for fmt, repeat in ((None, 0), ({"type": "json_object", "z": MARK}, 3)):
            for _ in range(2):  # serialised, then remembered
                assert cache_key(spec, sent, fmt, repeat, texts) == _pinned(spec, sent, fmt, repeat)


def test_a_growing_conversation_serialises_each_message_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from rubric_engine.models import entries

    made: list[str] = []
    real = entries._message_json
    monkeypatch.setattr(entries, "_message_json", lambda role, content: made.append(content) or real(role, content))
    spec, texts = ModelSpec("n", "openai/x"), MessageTexts()
    convo: list[dict] = [{"role": "system", "content": "be brief"}]
    for k in range(50):  # each request a new list repeating every earlier turn
        convo = [*convo, {"role": "user", "content": f"q{k}"}]
        assert cache_key(spec, convo, None, 0, texts) == _pinned(spec, convo)
        convo = [*convo, {"role": "assistant", "content": f"a{k}"}]
    # not the 2,500 of serialising every request whole; the first request repeats no earlier turn: not remembered
    assert len(made) == 1 + 50 + 49 == len(set(made))


def test_remembered_message_texts_are_bounded_by_their_characters(monkeypatch: pytest.MonkeyPatch) -> None:
    from rubric_engine.models import entries

    made: list[str] = []
    real = entries._message_json
    monkeypatch.setattr(entries, "_message_json", lambda role, content: made.append(content) or real(role, content))
    texts = MessageTexts(max_chars=66)  # {"content": "aa", "role": "user"}: 33 characters
    spec = ModelSpec("n", "openai/x")
    for said in ("aa " * 3, "aa " * 3, "aa bb aa", "aa " * 3, "c " * 3, "aa " * 3, "bb", "bb c"):
        # new message objects each time: a request that repeats a remembered one object for object continues
        # its hash instead (test_prefixes.py), which would hide the texts' memory
        messages = [{"role": "user", "content": t} for t in said.split()]
        assert cache_key(spec, messages, None, 0, texts) == _pinned(spec, messages)
    assert made == ["aa", "bb", "c", "aa"]  # 66 characters fit; the 67th starts again; short requests: never


@pytest.mark.parametrize("key, fix", [
    ("model", "candidate.model=openai/<served-model-name>"),
    ("api_base", "candidate.api_base=http://<host>:<port>/v1 (the server's OpenAI-compatible URL)"),
])
def test_a_mandatory_value_left_unset_is_named_with_its_fix(key: str, fix: str) -> None:
    """An entry's `???` (e.g. candidate=openai_compatible without candidate.api_base) is one config line."""
    data = {"model": "openai/x", "api_base": "http://h/v1", key: "???"}
    with pytest.raises(ConfigError) as err:
        ModelSpec.from_config(data, role="candidate")
    assert str(err.value) == f"candidate.{key} is not set and this model entry needs it; add {fix}"


def test_the_default_name_is_the_id_after_the_provider() -> None:
    assert ModelSpec.from_config({"model": "openrouter/meta/llama-3"}, role="judge").name == "meta/llama-3"
    assert ModelSpec.from_config({"model": "gpt-4o"}, role="judge").name == "gpt-4o"


def test_a_key_in_params_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError) as err:
        ModelSpec("n", "m/x", params={"api_key": "sk"})
    assert str(err.value).startswith("model 'n': params.api_key is not allowed") and "api_key_env" in str(err.value)


def test_hash_ignores_param_order_and_takes_any_value() -> None:
    a = ModelSpec("n", "m/x", params={"temperature": 0, "top_p": 1})
    b = ModelSpec("n", "m/x", params={"top_p": 1, "temperature": 0})
    assert a == b and hash(a) == hash(b)

    class Opaque:
        def __str__(self) -> str:
            return "opaque"
    assert isinstance(hash(ModelSpec("n", "m/x", params={"x": Opaque()})), int)


def test_cache_key_reads_values_json_cannot_spell_as_text() -> None:
    class Tagged:
        def __init__(self, tag: str) -> None:
            self.tag = tag

        def __str__(self) -> str:
            return self.tag
    spec = ModelSpec("n", "openai/x")
    one = cache_key(spec, [{"role": "user", "content": Tagged("a")}], None)
    assert one != cache_key(spec, [{"role": "user", "content": Tagged("b")}], None)
    assert one == cache_key(spec, [{"role": "user", "content": "a"}], None)


@pytest.mark.parametrize("key", ["api_base", "base_url", "API_BASE", "azure_endpoint", "extra_headers", "headers",
                                 "api_key", "aws_secret_access_key", "vertex_credentials", "custom_llm_provider",
                                 "proxy_url", "http_client", "access_token"])
def test_endpoint_and_credential_params_are_refused(key: str) -> None:
    with pytest.raises(ConfigError) as err:
        ModelSpec.from_config({"model": "openai/x", "params": {key: "x"}}, role="judge")
    assert str(err.value).startswith(f"judge.params.{key} is not allowed") and "api_base field" in str(err.value)


def test_sampling_params_are_not_mistaken_for_endpoints() -> None:
    params = {"temperature": 0, "top_p": 1, "max_tokens": 64, "max_completion_tokens": 64, "seed": 1, "stop": ["x"],
              "reasoning_effort": "low", "top_k": 5, "extra_body": {"x": 1}, "api_version": "2024-10-21"}
    assert ModelSpec.from_config({"model": "openai/x", "params": params}, role="judge").params == params


def test_a_mock_entry_is_never_shown_as_a_keyed_provider_and_a_replaced_one_is_not_mock() -> None:
    from rubric_engine.models.entries import destination
    assert "$MOCK_API_KEY" not in destination("mock/judge", None, None)
    assert "no call" in destination("mock/judge", None, None)
    replaced = ModelSpec.from_config({"name": "mock-candidate", "model": "openai/gpt-4o", "family": "mock"},
                                     role="candidate")
    assert replaced.required_key_env == "OPENAI_API_KEY"
    assert ModelSpec.from_config({"model": "gpt-4o"}, role="candidate").required_key_env == "OPENAI_API_KEY"
