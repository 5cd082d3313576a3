"""Failures across the worker-process boundary (`workers=N`, models/workers.py): an exception chain as plain data
and back.

Why apart: a failure in a worker must classify in the main process exactly as it would have in-process
(models/failures.py reads class names, HTTP status, body and headers), so it travels as those and is rebuilt
as exceptions with the same class names: the real class for builtins and the engine's own, a look-alike
subclass (same name, same bases where importable) for a library's.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["describe_error", "rebuild_error"]

_CHAIN_LIMIT = 8
_REAL_MODULES = ("builtins", "rubric_engine.")  # classes rebuilt as themselves; others by name


def describe_error(exc: BaseException) -> list[dict[str, Any]]:
    """The exception chain (outermost first) as plain data: class names, message, status, body, headers."""
    out: list[dict[str, Any]] = []
    node: BaseException | None = exc
    seen: set[int] = set()
    while node is not None and id(node) not in seen and len(out) < _CHAIN_LIMIT:
        seen.add(id(node))
        headers = getattr(node, "litellm_response_headers", None) or getattr(getattr(node, "response", None),
                                                                             "headers", None)
        try:
            headers = {str(k): str(v) for k, v in dict(headers or {}).items()} or None
        except Exception:  # noqa: BLE001 - unreadable headers carry no hint
            headers = None
        body = getattr(node, "body", None)
        item = {"mro": [(c.__module__, c.__name__) for c in type(node).__mro__], "msg": _text(node),
                "status_code": getattr(node, "status_code", None), "headers": headers,
                "body": body if _plain(body) else None}
        for name in ("code", "type"):
            value = getattr(node, name, None)
            if isinstance(value, str):
                item[name] = value
        out.append(item)
        node = node.__cause__ or node.__context__
    return out


def rebuild_error(chain: list[dict[str, Any]]) -> BaseException:
    """Exceptions with the same class names (and the real class for builtins and the engine's own), message,
    status, body and headers, linked as they were."""
    built: list[BaseException] = []
    for item in chain:
        cls = _rebuilt_class(tuple(tuple(x) for x in item["mro"]))
        exc: BaseException = cls.__new__(cls)
        exc.args = (item["msg"],)
        for name in ("status_code", "body", "code", "type"):
            if item.get(name) is not None:
                _set(exc, name, item[name])
        if item.get("headers"):
            _set(exc, "litellm_response_headers", item["headers"])
        built.append(exc)
    for outer, inner in zip(built, built[1:]):
        outer.__cause__ = inner
    return built[0] if built else RuntimeError("a worker process reported an empty failure")


_CLASSES: dict[tuple[tuple[str, str], ...], type[BaseException]] = {}


def _rebuilt_class(mro: tuple[tuple[str, str], ...]) -> type[BaseException]:
    found = _CLASSES.get(mro)
    if found is not None:
        return found
    base: type[BaseException]
    anchor_at, base = len(mro), Exception
    for i, (module, name) in enumerate(mro):
        real = _real_class(module, name)
        if real is not None and issubclass(real, BaseException):
            anchor_at, base = i, real
            break
    cls = base
    for module, name in reversed(mro[:anchor_at]):
        cls = type(name, (cls,), {"__module__": module})  # a subclass of base
    _CLASSES[mro] = cls
    return cls


def _real_class(module: str, name: str) -> type | None:
    if not module.startswith(_REAL_MODULES) and module != "builtins":
        return None
    mod = sys.modules.get(module)
    found = getattr(mod, name, None) if mod is not None else None
    return found if isinstance(found, type) else None


def _set(exc: BaseException, name: str, value: Any) -> None:
    try:
        setattr(exc, name, value)
    except (AttributeError, TypeError):
        pass


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001
        return type(exc).__name__


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool)) or (
        isinstance(value, dict) and all(isinstance(k, str) and _plain(v) for k, v in value.items())) or (
        isinstance(value, list) and all(_plain(v) for v in value))
