"""The composed Hydra config as the engine's plain `RunSettings`: model entries, jurors, values checked.

Why apart from cli/main.py: the run, the dry run and a sweep's key check (cli/sweepcheck.py) all turn a
composed config into settings the same way; cli/main.py keeps the Hydra app, the sweep and the dispatch.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, ListConfig, OmegaConf

from rubric_engine.errors import ConfigError
from rubric_engine.models.adhoc import is_model_id
from rubric_engine.models.concurrency import parse_concurrency
from rubric_engine.models.entries import MAX_TIMEOUT
from rubric_engine.models.named import CONFIG_MODULE, entry_data, entry_file as _entry_file
from rubric_engine.models.workers import workers_count

__all__ = ["CONFIG_MODULE", "settings_from_config", "entry_data", "spread_from_config"]  # the entry readers: models/named.py

def _model_spec(node: Any, role: str, timeout: float | None, given: set[str] | None = None) -> Any:
    from rubric_engine.models.entries import ModelSpec

    if node is None:
        return None
    data = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)
    given = _overridden_keys() if given is None else given
    if f"{role}.api_base" in given and f"{role}.api_key_env" not in given and isinstance(data, dict):
        # An endpoint moved on the command line gets a key only when the same command line names it:
        # `candidate=gpt-4o candidate.api_base=http://elsewhere` must not carry $OPENAI_API_KEY there.
        data["api_key_env"] = None
    return ModelSpec.from_config(data, role=role, timeout=timeout)  # type: ignore[arg-type]


def _overridden_keys(overrides: list[str] | None = None) -> set[str]:
    """Keys set on the command line of this Hydra job (empty outside Hydra), or in `overrides`."""
    if overrides is None and not HydraConfig.initialized():
        return set()
    return {o.split("=", 1)[0].lstrip("+~") for o in (HydraConfig.get().overrides.task if overrides is None
                                                       else overrides)}


def settings_from_config(cfg: DictConfig, out_dir: Path, overrides: list[str] | None = None) -> Any:
    """Turn the composed Hydra config into the engine's plain `RunSettings`. `overrides`: the job's command
    line when `cfg` was composed outside a Hydra job (a sweep's jobs checked before the first one runs)."""
    given = _overridden_keys(overrides)
    from rubric_engine.run.settings import RunSettings

    def opt(key: str) -> Any:
        return OmegaConf.select(cfg, key, default=None)

    ids = opt("ids")
    if isinstance(ids, str):
        ids = [s for s in re.split(r"[,\s]+", ids) if s]
    if ids is not None and not ids:
        raise ConfigError("ids=[] selects no question; list ids (ids=[a,b]) or leave ids out to run every question")
    if ids is not None:
        ids = [str(i) for i in ids]  # ids are compared as strings everywhere
    _check_values(cfg)
    jury = [_juror(j, opt("timeout"), given) for j in (opt("jury.judges") or [])]
    return RunSettings(
        benchmark=str(cfg.benchmark), out_dir=out_dir,
        candidate=_model_spec(opt("candidate"), "candidate", opt("timeout"), given),
        judge=_model_spec(opt("judge"), "judge", opt("timeout"), given), timeout=opt("timeout"),
        user=_model_spec(opt("user"), "user", opt("timeout"), given),
        benchmark_dirs=list(opt("benchmark_dirs") or []), data_path=opt("data.path"), data_cache_dir=opt("data.cache_dir"),
        subset=opt("subset"), limit=opt("limit"), ids=list(ids) if ids else None, stage=str(cfg.stage),
        answers=opt("answers"), from_run=opt("from_run"), concurrency=parse_concurrency(cfg.concurrency),
        rpm=opt("rpm"), tpm=opt("tpm"),
        max_retries=int(cfg.max_retries), cache_dir=opt("cache.dir"), cache_enabled=bool(opt("cache.enabled")),
        workers=workers_count(1 if opt("workers") is None else opt("workers")),
        progress="none" if opt("quiet") else str(cfg.progress), quiet=bool(opt("quiet")),
        trust_code=bool(opt("trust_code")), trust_endpoints=bool(opt("trust_endpoints")),
        prompt_cache=opt("prompt_cache"),
        jury=jury, jury_rule=str(opt("jury.rule") or "majority"), repeats=opt("repeats"), tie=opt("tie"),
        repeats_max=opt("repeats_max"), repeats_prior=_dirs(opt("repeats_prior")),
        repeats_confidence=opt("repeats_confidence"),
        samples=1 if opt("samples") is None else opt("samples"), candidate_errors=opt("candidate_errors"),
        baseline=_baseline(opt("baseline"), opt("timeout"), given), baseline_answers=opt("baseline.answers"),
        batch=bool(opt("batch")), batch_poll=float(opt("batch_poll") or 30.0),
        batch_max_wait=float(opt("batch_max_wait") or 90_000.0),
        retry_errors=bool(opt("retry_errors")),
        limits=_limits(opt("limits"), opt("ray")),
    )


def _limits(choice: Any, address: Any) -> Any:
    """limits=: where every client keeps its rate and concurrency limits, decided once (rubric_engine/cluster/limits.py)."""
    from rubric_engine.cluster.limits import limits_source

    return limits_source("auto" if choice is None else choice, None if address is None else str(address))


def _dirs(value: Any) -> list[str]:
    """judge.repeats_prior: one run directory or a list of them."""
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, (list, tuple, ListConfig)) else [str(value)]


def _juror(node: Any, timeout: float | None, given: set[str]) -> Any:
    """One jury entry: a judge entry's name, a LiteLLM id or an inline entry. A name is looked up as `judge=<name>` is (Hydra's
    search path): the shipped conf/judge/ first, then the user's config dirs, so a shipped entry is never
    silently replaced by a user file of the same name (docs/cli.md)."""
    if isinstance(node, DictConfig):
        return _model_spec(node, "judge", timeout, given)
    name = str(node)
    if _entry_file(name, "judge") is None and not is_model_id(name):
        raise ConfigError(f"judge=[...]: {name!r} is not a judge entry; use names from conf/judge/, LiteLLM ids "
                          "(openai/gpt-4o-mini) or inline entries {name: x, model: provider/model, ...}")
    return _model_spec(entry_data(name, "judge", ("judge",)), "judge", timeout, given)


def _baseline(node: Any, timeout: float | None, given: set[str]) -> Any:
    """`baseline=ENTRY` (a conf/candidate/ entry, resolved as jurors are, or an ad-hoc LiteLLM id such as
    openai/gpt-4o) with `baseline.model=` / `baseline.api_base=` / `baseline.api_key_env=` overrides; None
    without an entry (the spec's baseline, or `baseline.answers=`)."""
    node = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else (node or {})
    entry, changes = node.get("entry"), {k: node.get(k) for k in ("model", "api_base", "api_key_env") if node.get(k)}
    if entry is None:
        if changes:
            raise ConfigError(f"baseline.{next(iter(changes))}= changes a baseline entry, but no baseline= chooses "
                              "one; write baseline=<entry or LiteLLM id> first (see docs/cli.md)")
        return None
    data = entry_data(str(entry), "baseline", ("candidate",))
    if data.get("model") == "mock/candidate":
        # the shipped candidate mock as the baseline: named for its role (as mock-judge is), so a run of
        # candidate=mock baseline=mock reads "win rate against mock-baseline", not against itself
        data.update(name="mock-baseline", model="mock/baseline")
    data.update(changes)
    return _model_spec(data, "baseline", timeout, given)


def _whole(cfg: DictConfig, key: str, minimum: int, optional: bool = False) -> None:
    value = OmegaConf.select(cfg, key, default=None)
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{key}={value} is not valid; give a whole number >= {minimum}"
                          + (" (or null)" if optional else ""))


def _check_values(cfg: DictConfig) -> None:
    """Command-line values are checked before use: one line each, never a cast that silently rounds."""
    try:
        parse_concurrency(OmegaConf.select(cfg, "concurrency", default=None))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    _whole(cfg, "max_retries", 0)
    _whole(cfg, "limit", 0, optional=True)
    _whole(cfg, "shards", 1, optional=True)
    _whole(cfg, "bootstrap.samples", 1)  # read only by a sweep's leaderboard, after every job paid: check now
    _whole(cfg, "bootstrap.seed", 0)
    for key, top in (("rpm", 1e9), ("tpm", 1e12), ("timeout", MAX_TIMEOUT), ("batch_poll", 86_400),
                     ("batch_max_wait", 30 * 86_400)):
        value = OmegaConf.select(cfg, key, default=None)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not 0 < value <= top):  # NaN fails both comparisons
            raise ConfigError(f"{key}={value} is not valid; give a number > 0 and <= {top:g} (or null)")
    progress = OmegaConf.select(cfg, "progress", default="auto")
    if progress not in ("auto", "rich", "plain", "none"):
        raise ConfigError(f"progress={progress} is not valid; use auto, rich, plain or none")
    if OmegaConf.select(cfg, "prompt_cache", default=None) not in (None, True, False):
        raise ConfigError(f"prompt_cache={OmegaConf.select(cfg, 'prompt_cache')} is not valid; use true, false or null "
                          "(null: on for per-criterion judging)")
    for key in ("cache.enabled", "dry_run", "debug", "quiet", "batch", "retry_errors", "trust_endpoints"):
        value = OmegaConf.select(cfg, key, default=False)
        if not isinstance(value, bool):
            raise ConfigError(f"{key}={value} is not valid; use true or false")


def spread_from_config(cfg: DictConfig) -> Any:
    """`ray=ADDRESS` (and `shards=N`): the run's shards on that Ray cluster (cluster/shards.RaySpread), joined here so
    a missing extra or an unreachable address fails in one line before the run directory is claimed; None without
    ray= (the run stays in this process)."""
    address, shards = OmegaConf.select(cfg, "ray", default=None), OmegaConf.select(cfg, "shards", default=None)
    if address is None:
        if shards is not None:
            raise ConfigError(f"shards={shards} splits a run over a Ray cluster: give ray=ADDRESS too (ray=local for "
                              "this machine), or leave shards= unset")
        return None
    if not isinstance(address, str) or not address:
        raise ConfigError(f"ray={address} is not valid; use local, auto, HOST:PORT or ray://HOST:PORT (or null)")
    if OmegaConf.select(cfg, "batch", default=False):
        raise ConfigError("ray= with batch=true: a provider batch is already one request for the whole run; "
                          "leave ray= unset")
    from rubric_engine.cluster.connect import connect

    connect(address, "ray=")
    from rubric_engine.cluster.shards import RaySpread

    return RaySpread(address, shards)
