"""Rubric rewards from the command line's words: `RubricReward(benchmark=..., judge=..., overrides=[...])` and
`rubric-engine serve-reward benchmark=... judge=... port=...`.

Why in cli/: a reward is configured exactly as a run is, by key=value overrides composed with the shipped
configs and the user's ./conf entries (Hydra), checked by the same key checks, and turned into `RunSettings` and
model entries by cli/config.py. Hydra lives only here, so the reward's Python face is built here too; the
reward itself (reward/) takes plain `RunSettings`. Composing inside a program that is itself a Hydra app (verl's
trainer is one) sets that program's global Hydra state aside for the moment and puts it back after.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rubric_engine.cli.args import COMMANDS, HelpRequested, as_int
from rubric_engine.cli.config import settings_from_config
from rubric_engine.errors import ConfigError
from rubric_engine.reward import rubric as reward_rubric
from rubric_engine.reward.frameworks import Reward

__all__ = ["RubricReward", "settings_from_overrides", "serve_reward_main"]


def settings_from_overrides(overrides: Sequence[str]) -> Any:
    """`RunSettings` from a run's key=value overrides, through the run's own path: the same rewriting
    (`judge=[a,b]` juries, `judge.repeats=`), key checks, Hydra form, user config directories, composition and
    cli/config.settings_from_config."""
    from hydra.initialize import get_gh_backup, restore_gh_from_backup

    from rubric_engine.cli.compose import compose, rewrite, user_search_path
    from rubric_engine.cli.overrides import check_overrides, hydra_form

    argv = rewrite([str(o) for o in overrides])
    bad = [a for a in argv if "=" not in a or a.startswith("-")]
    if bad:
        raise ConfigError(f"override {bad[0]!r} is not key=value; write overrides as on the command line, "
                          "e.g. judge.api_base=http://127.0.0.1:8000/v1")
    check_overrides(argv)
    argv = [hydra_form(a) for a in argv]
    saved = get_gh_backup()  # a Hydra app around us (verl's trainer): set aside, restored below
    try:
        from hydra.core.global_hydra import GlobalHydra

        GlobalHydra.instance().clear()
        cfg = compose([*argv, *user_search_path(argv)])
    finally:
        restore_gh_from_backup(saved)
    return settings_from_config(cfg, Path("."), argv)


def _overrides(benchmark: str | None, judge: str | None, overrides: Sequence[str]) -> list[str]:
    if isinstance(overrides, str):
        raise ConfigError("overrides= is a list of key=value strings, e.g. overrides=['concurrency=32']")
    return [*([f"benchmark={benchmark}"] if benchmark else []), *([f"judge={judge}"] if judge else []), *overrides]


class RubricReward(reward_rubric.RubricReward):
    """A rubric reward configured like a run: `benchmark`, `judge` (an entry name) and `overrides`, the command
    line's key=value words (`judge.api_base=...`, `data.path=...`, `cache.enabled=false`, `concurrency=...`).
    `shadow`: a judge entry grading `shadow_fraction` of distinct rollouts, `shadow_overrides` its keys
    (`judge.api_base=...`, as for the judge). `pool=N` / `ray=ADDRESS`: the batches judged by N Ray actors
    (cluster/rewardpool.py; `ray=` alone: one actor there); neither: in this process. See reward/frameworks.py
    for the interfaces. The same reward from Python's words, without Hydra: rubric_engine.reward.rubric.RubricReward
    (this class's base)."""

    def __init__(self, benchmark: str | None = None, judge: str | None = None, overrides: Sequence[str] = (), *,
                 id_column: str | None = None, shadow: str | None = None, shadow_overrides: Sequence[str] = (),
                 shadow_fraction: float = 0.0, failure_score: float = 0.0, counts_path: str | Path | None = None,
                 pool: int | None = None, ray: str | None = None) -> None:
        given = _overrides(benchmark, judge, overrides)
        settings = settings_from_overrides(given)
        shadow_spec = None
        if shadow:  # built as `judge=<shadow>` is, with the main run's other keys (benchmark, data, timeout)
            keep = [o for o in given if not o.lstrip("+").startswith(("judge", "jury"))]
            shadow_spec = settings_from_overrides([*keep, f"judge={shadow}", *shadow_overrides]).judge
        scorer = _pool(settings, shadow_spec, shadow_fraction, pool, ray)
        # the words built the settings; the base's own constructor builds them from Python's words instead
        Reward.__init__(self, settings, id_column=id_column, shadow=shadow_spec, shadow_fraction=shadow_fraction,
                        failure_score=failure_score, counts_path=counts_path, scorer=scorer)


def _pool(settings: Any, shadow: Any, shadow_fraction: float, pool: Any, ray: str | None) -> Any:
    """The pool of reward actors `pool=` / `ray=` ask for, or None (this process judges)."""
    from rubric_engine.cluster.rewardpool import pool_size

    size = pool_size(pool)
    if ray is not None and (not isinstance(ray, str) or not ray.strip()):
        raise ConfigError(f"ray={ray!r} is not an address; give local, auto, HOST:PORT or ray://HOST:PORT")
    if ray is None and (size or 1) == 1:
        return None
    from rubric_engine.cluster.rewardpool import RewardPool

    return RewardPool(settings, size=size or 1, address=ray, shadow=shadow, shadow_fraction=shadow_fraction)


_OWN = ("port", "host", "id_column", "failure_score", "shadow", "shadow_fraction", "counts_path", "debug", "token_env",
        "max_body_mb", "max_requests", "read_timeout", "pool", "ray")


def _number(value: str, key: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"serve-reward: {key}={value} is not a number") from None


def _limits(own: dict[str, str]) -> Any:
    """The server's limits from its own words (reward/server.py: body cap, requests at once, read timeout,
    token), each checked before the reward is built: one line, exit 2."""
    from rubric_engine.reward import server

    mb = _number(own.get("max_body_mb", str(server.DEFAULT_MAX_BODY_MB)), "max_body_mb")
    if not 0 < mb <= 1024:
        raise ConfigError(f"serve-reward: max_body_mb={own['max_body_mb']} is not valid; give MiB in (0, 1024] "
                          f"(default {server.DEFAULT_MAX_BODY_MB})")
    requests = as_int(own.get("max_requests", str(server.DEFAULT_MAX_REQUESTS)), "max_requests", "serve-reward")
    if not 1 <= requests <= 1024:
        raise ConfigError(f"serve-reward: max_requests={requests} is not valid; give 1..1024 "
                          f"(default {server.DEFAULT_MAX_REQUESTS})")
    timeout = _number(own.get("read_timeout", str(server.DEFAULT_READ_TIMEOUT)), "read_timeout")
    if not 0 < timeout <= 86_400:
        raise ConfigError(f"serve-reward: read_timeout={own['read_timeout']} is not valid; give seconds in "
                          f"(0, 86400] (default {server.DEFAULT_READ_TIMEOUT:g})")
    token = None
    if own.get("token_env"):
        name = own["token_env"]
        token = os.environ.get(name, "")
        if not token.strip():
            raise ConfigError(f"serve-reward: token_env={name}: ${name} is not set; export the token the clients "
                              "will send (Authorization: Bearer <token>) in that variable")
    return server.ServerLimits(max_body_bytes=int(mb * 2**20), max_requests=requests, read_timeout=timeout,
                               token=token)


def serve_reward_main(args: Sequence[str]) -> int:
    """The subcommand: build the reward, serve it, stop cleanly on the first SIGINT / SIGTERM (exit 0; requests
    in progress are answered first); a second signal stops at once (130 / 143)."""
    if any(a in ("-h", "--help") for a in args):
        raise HelpRequested(COMMANDS["serve-reward"].help())
    own = {k: v for k, _, v in (a.partition("=") for a in args) if k in _OWN}
    rest = [a for a in args if a.partition("=")[0] not in _OWN]
    port = as_int(own.get("port", "5000"), "port", "serve-reward")
    if port > 65535:
        raise ConfigError(f"serve-reward: port={port} is not a port; give 0..65535")
    host = own.get("host") or "127.0.0.1"
    limits = _limits(own)
    from rubric_engine.reward.server import LOOPBACK, check_bind

    check_bind(host, limits)  # before the reward is built: one line, no data loaded
    reward = RubricReward(overrides=rest, id_column=own.get("id_column") or None, shadow=own.get("shadow") or None,
                          shadow_fraction=_number(own.get("shadow_fraction", "0"), "shadow_fraction"),
                          failure_score=_number(own.get("failure_score", "0"), "failure_score"),
                          counts_path=own.get("counts_path") or None,
                          pool=as_int(own["pool"], "pool", "serve-reward") if own.get("pool") else None,
                          ray=own.get("ray") or None)
    from rubric_engine.reward.server import RewardServer

    def note(text: str) -> None:
        print(f"serve-reward: {text}", file=sys.stderr, flush=True)

    try:
        try:
            server = RewardServer(reward, host, port, note, limits)
        except OSError as exc:
            raise ConfigError(f"serve-reward: cannot listen on {host}:{port} ({exc.strerror or exc}); "
                              "choose another port= (port=0 picks a free one)") from None
        stop = threading.Event()
        got: list[int] = []

        def on_signal(signum: int, frame: Any) -> None:
            if got:  # the second signal: no waiting for batches in progress
                raise KeyboardInterrupt
            got.append(signum)
            stop.set()

        old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            server.start()
            print(server.url, flush=True)  # stdout: the one result line (a script reads the port from it)
            note(f"{reward.scorer.settings.benchmark}, judge {', '.join(reward.scorer.judges)}, "
                 f"{len(reward.scorer.questions)} questions; stop with Ctrl-C")
            if host not in LOOPBACK:
                note(f"listening on {host}: requests need the token of ${own['token_env']} (Authorization: Bearer)")
            while not stop.wait(0.5):
                pass
            note(f"stopping ({signal.Signals(got[0]).name}): answering the batches in progress")
            server.stop()
        except KeyboardInterrupt:
            note("stopped at once (second signal); batches in progress were not answered")
            return 143 if got and got[0] == signal.SIGTERM else 130
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)
        t = reward.totals
        note(f"stopped: {server.batches} batches, {t.rollouts} rollouts, {t.calls} judge calls, "
             f"{t.cache_hits} cache hits, {t.failures} failures")
        return 0
    finally:
        reward.close()
