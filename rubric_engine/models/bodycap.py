"""Reply bodies capped while they arrive: the HTTP transport under LiteLLM's OpenAI client counts bytes.

Why: LiteLLM (through the OpenAI SDK and httpx) reads a whole response body into memory before the engine
sees it, so a server that floods a reply (gigabytes, with or without gzip) would grow the process without
bound, whatever `timeout` says. The call still goes through LiteLLM: for models LiteLLM serves with its
OpenAI client (`openai/...`, every OpenAI-compatible server named by `api_base` included) the engine
passes LiteLLM its own `AsyncOpenAI` client (`acompletion(client=...)`), whose transport (the one LiteLLM
would use, wrapped) stops reading past `max_reply_bytes()` and raises `ReplyTooLarge`. One such client per
model client and event loop, so connections are reused; `ModelClient.aclose` closes it.

The cap: 16 MiB by default (a long reply is well under 1 MiB), `$RUBRIC_ENGINE_MAX_REPLY_MB` to change it.
"""

from __future__ import annotations

import os
import sys
import zlib
from collections.abc import AsyncIterator
from typing import Any

__all__ = ["ReplyTooLarge", "capped_transport", "max_reply_bytes", "openai_client", "served_by_openai_client",
           "DEFAULT_MAX_REPLY_MB", "MAX_REPLY_ENV"]

DEFAULT_MAX_REPLY_MB = 16.0
MAX_REPLY_ENV = "RUBRIC_ENGINE_MAX_REPLY_MB"


class ReplyTooLarge(Exception):
    """A reply body passed the cap; the same request would get the same body, so it is never retried."""

    def __init__(self, cap: int, declared: int | None = None) -> None:
        said = f" (it declared {declared:,} bytes)" if declared is not None else ""
        super().__init__(f"the reply body passed the {cap / 2**20:g} MiB limit{said}; reading stopped there")
        self.cap = cap


def max_reply_bytes() -> int:
    """The cap in bytes: $RUBRIC_ENGINE_MAX_REPLY_MB (a number of MiB > 0) or 16 MiB."""
    from rubric_engine.errors import ConfigError

    raw = os.environ.get(MAX_REPLY_ENV, "").strip()
    try:
        mb = float(raw) if raw else DEFAULT_MAX_REPLY_MB
    except ValueError:
        mb = -1.0
    if not 0 < mb <= 1_048_576:  # NaN fails too
        raise ConfigError(f"${MAX_REPLY_ENV}={raw!r} is not a size; give the reply body limit in MiB, e.g. "
                          f"{MAX_REPLY_ENV}=64 (default {DEFAULT_MAX_REPLY_MB:g})")
    return int(mb * 2**20)


def capped_transport(cap: int, proxy: str | None = None) -> Any:
    """httpx's own transport (connection pool, per-request timeouts) with every response body cut at `cap`.
    Built on first use: httpx is imported only by a process that makes a call."""
    import httpx

    class CappedStream(httpx.AsyncByteStream):
        """The body as it arrives, decompressed here (so the cap counts what would be held), cut at `cap`."""

        def __init__(self, inner: httpx.AsyncByteStream, encoding: str) -> None:
            self._inner = inner
            self._decoder = zlib.decompressobj(47 if encoding == "gzip" else 15) if encoding != "identity" else None

        async def __aiter__(self) -> AsyncIterator[bytes]:
            seen = 0
            async for chunk in self._inner:
                if self._decoder is not None:  # at most cap + 1 bytes out of any chunk: a zip bomb stops too
                    chunk = self._decoder.decompress(chunk, cap + 1 - seen)
                seen += len(chunk)
                if seen > cap:
                    raise ReplyTooLarge(cap)
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    class CappedTransport(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            self._inner = (None if proxy else _litellm_transport()) or httpx.AsyncHTTPTransport(proxy=proxy)

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            response = await self._inner.handle_async_request(request)
            headers = httpx.Headers(response.headers)
            encoding = headers.get("content-encoding", "").strip().lower() or "identity"
            declared = headers.get("content-length", "").strip()
            if encoding not in ("identity", "gzip", "deflate"):
                await response.aclose()
                raise httpx.DecodingError(f"unsupported content-encoding {encoding!r} (the engine asks for identity)")
            if encoding == "identity" and declared.isdigit() and int(declared) > cap:
                await response.aclose()
                raise ReplyTooLarge(cap, int(declared))
            if encoding != "identity":  # decoded in CappedStream: httpx must not decode it again
                del headers["content-encoding"]
                headers.pop("content-length", None)
            return httpx.Response(response.status_code, headers=headers, extensions=response.extensions,
                                  stream=CappedStream(response.stream, encoding))  # type: ignore[arg-type]

        @property
        def inner(self) -> httpx.AsyncBaseTransport:
            return self._inner

        async def aclose(self) -> None:
            await self._inner.aclose()

    return CappedTransport()


def _litellm_transport() -> Any:
    """The transport LiteLLM itself would give this client (its aiohttp one: several times the throughput of
    httpx's at high concurrency, measured with bench/bench_calls.py; it reads proxies from the environment
    itself), or None where this LiteLLM has no such helper or gives httpx's default."""
    if "litellm" not in sys.modules:  # imported (and configured) by litellm_runtime before any call
        return None
    try:
        from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

        return AsyncHTTPHandler.create_async_transport()
    except Exception:  # noqa: BLE001 - another LiteLLM: httpx's own transport (and httpx's proxy mounts)
        return None


def openai_client(*, api_key: str | None, api_base: str | None, timeout: float, cap: int) -> Any:
    """An `AsyncOpenAI` for LiteLLM's `client=`: the endpoint and key LiteLLM would use, no SDK retries (the
    engine retries), an httpx client on a capped transport asking for uncompressed bodies. None when there
    is no key at all: LiteLLM then reports the missing key itself, before any request."""
    key = api_key or os.environ.get("OPENAI_API_KEY")
    if not key:
        return None
    import httpx
    from openai import AsyncOpenAI

    base = (api_base or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
            or "https://api.openai.com/v1")
    transport = capped_transport(cap)
    # httpx ignores the environment's proxies for a client given a transport: mounted here unless LiteLLM's
    # aiohttp transport (which reads them itself) is the one underneath
    mounts = _proxy_mounts(cap) if isinstance(transport.inner, httpx.AsyncHTTPTransport) else {}
    http = httpx.AsyncClient(transport=transport, mounts=mounts, timeout=timeout, follow_redirects=True,
                             headers={"Accept-Encoding": "identity"})
    # the openai package annotates httpx2's client and accepts httpx's (its _httpx2 compatibility layer)
    return AsyncOpenAI(api_key=key, base_url=base, max_retries=0, timeout=timeout, http_client=http)  # type: ignore[arg-type]


def _proxy_mounts(cap: int) -> dict[str, Any]:
    """HTTP(S)_PROXY / ALL_PROXY / NO_PROXY as httpx (and LiteLLM) honour them, each proxy behind a capped
    transport: httpx ignores the environment's proxies for a client given its own transport."""
    found: dict[str, str | None]
    try:
        from httpx._utils import get_environment_proxies  # httpx's own reading of the variables
    except ImportError:  # another httpx: proxies as urllib reads them, without NO_PROXY patterns
        from urllib.request import getproxies

        found = {f"{k}://": v if "://" in v else f"http://{v}" for k, v in getproxies().items()
                 if k in ("http", "https", "all") and v}
    else:
        found = get_environment_proxies()
    return {pattern: None if url is None else capped_transport(cap, url) for pattern, url in found.items()}


def served_by_openai_client(litellm: Any, model: str, api_base: str | None) -> bool:
    """True when LiteLLM sends `model` through its OpenAI client (provider `openai`: OpenAI itself, and every
    `openai/...` model at an api_base), the only route whose client LiteLLM lets the engine supply as is."""
    try:
        return litellm.get_llm_provider(model=model, api_base=api_base)[1] == "openai"
    except Exception:  # noqa: BLE001 - a model LiteLLM does not know: its own error comes with the call
        return False
