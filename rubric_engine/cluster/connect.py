"""Joining Ray: the one import of `ray` the engine makes, the one line when it is missing, and one namespace.

Why one place: a Ray option (`ray=`, a shared limit, a reward pool) must fail the same way when the extra is not
installed, and every process of one engine on a cluster must find the same named actors, which Ray scopes by
namespace. `address`: `local` starts a Ray instance in this process's machine (for one box, and for tests), `auto`
joins the cluster this machine belongs to (`ray start --head` / `ray start --address=...`), anything else is
handed to `ray.init` as is (`HOST:PORT`, `ray://HOST:10001`). A process already inside Ray (a Ray task, an actor,
a Hydra Ray-launcher job) is connected already and keeps its connection.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from rubric_engine.errors import ConfigError

__all__ = ["NAMESPACE", "INSTALL", "require_ray", "connect", "connected"]

NAMESPACE = "rubric-engine"
INSTALL = "pip install 'rubric-engine[ray]'"


def require_ray(option: str) -> Any:
    """The `ray` module, or a ConfigError naming `option` and the extra to install."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"{option} needs Ray, which is not installed here; install the extra ({INSTALL}) "
                          f"or leave {option} unset to run on this machine") from None
    return ray


def connected() -> bool:
    """Whether this process is connected to Ray already (False when Ray is not installed)."""
    try:
        import ray
    except ImportError:
        return False
    return bool(ray.is_initialized())


def connect(address: str, option: str = "ray=") -> Any:
    """Connect this process to Ray at `address` (see module docstring) once; return the `ray` module."""
    ray = require_ray(option)
    if ray.is_initialized():
        return ray
    try:
        _probe(address)
        # "local" is Ray's own word for a new instance here: no address would join a cluster another program
        # started on this machine (Ray reads the last one's address from its temp directory)
        # logging_level: Ray's start-up INFO lines ("Started a local Ray instance.") stay out of the run's stderr;
        # its warnings still show
        if address == "local":
            _quiet_default_notice()
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, include_dashboard=False,
                 logging_level=logging.WARNING)
    except (OSError, RuntimeError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"{option}{address}: could not join a Ray cluster there ({first}); start one with "
                          f"`ray start --head`, give its address (ray=HOST:6379), or ray=local for one on this "
                          f"machine") from None
    return ray


class _DefaultNotice(logging.Filter):
    """Drops Ray's notice that a new local instance has token authentication on (its own default, which the engine
    keeps): it came on every `ray=local` run and pool start, and its advice (opt out) would weaken that instance."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Token authentication is enabled for this Ray cluster")


def _quiet_default_notice() -> None:
    logger = logging.getLogger("ray._private.authentication.authentication_token_setup")
    if not any(isinstance(f, _DefaultNotice) for f in logger.filters):
        logger.addFilter(_DefaultNotice())


def _probe(address: str, seconds: float = 5.0) -> None:
    """Refuse at once a HOST:PORT (or ray://HOST:PORT) where nothing listens: Ray itself would wait minutes."""
    if address in ("local", "auto"):
        return
    host, sep, port = address.split("://", 1)[-1].rpartition(":")
    if sep and port.isdigit():
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=seconds):
            pass
