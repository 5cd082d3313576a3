"""A finished run's spec and judge, read back from the config Hydra saved in its directory (`.hydra/config.yaml`).

Why here: commands that call a run's judge again (`robustness`) must call the very entry the run called (model,
endpoint, key variable, parameters) with its call settings and cache, and must build it the one way a run does
(cli/config.py's model spec, where an endpoint moved on the run's command line without a key variable carries
no key; the run's own overrides in `.hydra/overrides.yaml` decide that, as they did for the run). The spec is
loaded as the run loaded it (templates included) and must hash to the run's `spec_hash`: a spec or template
edited since would re-judge with another prompt and mix the comparison.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rubric_engine.cli.config import _model_spec, entry_data
from rubric_engine.errors import ConfigError
from rubric_engine.models.concurrency import parse_concurrency

__all__ = ["run_judge", "run_spec", "model_entry"]


def _load(path: Path, what: str) -> Any:
    if not path.is_file():
        raise ConfigError(f"{path} is missing: {what} needs the config Hydra saved in the run directory; "
                          "give the directory of a run made by rubric-engine")
    try:
        return OmegaConf.load(path)
    except Exception as exc:  # a hand-edited file: the file and the error, one line
        raise ConfigError(f"{path}: not readable as YAML ({str(exc).splitlines()[0]}); restore it from the run") from None


def run_judge(run_dir: Path, what: str = "robustness") -> tuple[Any, Any, dict[str, Any]]:
    """(judge ModelSpec, call cache or None, client limits) as the run at run_dir used them."""
    from rubric_engine.models.cache import ResultCache, default_cache_dir

    cfg = _load(run_dir / ".hydra" / "config.yaml", what)
    overrides = _load(run_dir / ".hydra" / "overrides.yaml", what)
    if not isinstance(cfg, DictConfig) or cfg.get("judge") is None:
        raise ConfigError(f"{run_dir / '.hydra' / 'config.yaml'}: the run declares no judge; {what} re-judges a "
                          "run's replies with the run's judge")
    if list((cfg.get("jury") or {}).get("judges") or []):
        raise ConfigError(f"{what}: {run_dir} was graded by a jury; re-judging needs a run graded by one judge")
    given = {str(o).split("=", 1)[0].lstrip("+~") for o in overrides or []}
    judge = _model_spec(cfg.judge, "judge", cfg.get("timeout"), given)
    cache_cfg = cfg.get("cache") or {}
    cache = ResultCache(Path(str(cache_cfg.get("dir"))).expanduser() if cache_cfg.get("dir") else default_cache_dir()) \
        if cache_cfg.get("enabled", True) else None
    limits = {"concurrency": parse_concurrency(cfg.get("concurrency") or 8), "rpm": cfg.get("rpm"), "tpm": cfg.get("tpm"),
              "max_retries": int(cfg.get("max_retries") if cfg.get("max_retries") is not None else 4)}
    return judge, cache, limits


def run_spec(run_dir: Path, summary: dict[str, Any], what: str = "robustness") -> Any:
    """The run's BenchmarkSpec, loaded by name as the run loaded it, checked against its spec_hash."""
    from rubric_engine.run.identity import spec_digest
    from rubric_engine.spec.files import benchmark_search_path
    from rubric_engine.spec.load import load_spec

    cfg = _load(run_dir / ".hydra" / "config.yaml", what)
    spec = load_spec(str(cfg.benchmark), benchmark_search_path(list(cfg.get("benchmark_dirs") or [])),
                     bool(cfg.get("trust_code", False)))
    spec = spec.with_candidate_errors(cfg.get("candidate_errors"))
    if summary.get("spec_hash") and spec_digest(spec) != summary["spec_hash"]:
        raise ConfigError(f"{what}: benchmark {cfg.benchmark!r} or its templates changed since {run_dir} was made "
                          "(spec_hash differs); re-judging would use another prompt: restore them, or re-run first")
    return spec


def model_entry(name: str, role: str, timeout: float | None) -> Any:
    """A model named on the command line (`paraphraser=ENTRY`): a conf/judge/ or conf/candidate/ entry, as a run
    finds `judge=NAME`, or a LiteLLM id (provider/model); built the one way every model spec is."""
    return _model_spec(entry_data(name, role, ("judge", "candidate")), role, timeout, set())
