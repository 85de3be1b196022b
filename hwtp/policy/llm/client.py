"""Async client for OpenAI-compatible chat endpoints (vLLM, SGLang, llama.cpp, OpenAI, ...).

:class:`ChatClient` posts to ``{endpoint}/chat/completions`` over an injectable ``httpx``
client or transport. It asks for ``n`` samples in one request and, when the server rejects
``n > 1`` or returns fewer choices than asked, falls back to parallel single requests (and
remembers that for the rest of the client's life). Transient failures (429, 500, 502, 503, 504,
connection and read errors, timeouts, unparsable or empty responses) are retried with
exponential backoff and full jitter, honouring ``Retry-After``; other 4xx fail at once with the
server's message; 401/403 is :class:`hwtp.errors.EndpointAuthError` and fails every later
request of the client at once. ``finish_reason: length`` is not an error: the truncated text
comes back with its finish reason. Every attempt is bounded: ``request_timeout`` is a total
deadline from sending to the last byte (not per read), and the body is streamed and refused
beyond ``max_response_bytes``. With a :class:`hwtp.policy.llm.cache.ResponseCache`, cached samples are
returned without a request and each received sample is stored as soon as it arrives.

The API key is read from the environment (:func:`hwtp.env.api_key`) and goes only into the
``Authorization`` header: it is never logged, put in an exception or repr, or cached; a
completion that reflects it has it replaced by ``[redacted]``. Lone surrogates (JSON
``"\\ud800"``) in completions become U+FFFD, so every completion can be stored as UTF-8.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import random
import re
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from types import TracebackType
from typing import Any

import httpx

from hwtp import env
from hwtp.errors import ConfigError, EndpointAuthError, HwtpError, PolicyError
from hwtp.policy.llm.cache import ResponseCache, cache_key
from hwtp.policy.llm.chat import (
    ChatRequest,
    ClientConfig,
    Completion,
    PartialCompletionsError,
    RequestResult,
    SamplingParams,
    Usage,
    redact_url,
)
from hwtp.policy.llm.retry import parse_retry_after, retry_delay, wait_budget
from hwtp.yamlio import clean_text

log = logging.getLogger("hwtp.policy.llm.client")

#: HTTP statuses retried with backoff.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: Server error text kept in exception messages (characters).
ERROR_TEXT_MAX = 300
#: Bytes of an error response read (the rest is not read).
ERROR_BODY_MAX = 64 * 1024
#: What replaces the API key's value when a server reflects it into a completion.
REDACTED = "[redacted]"
_RETRY_ERRORS = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
_MENTIONS_N = re.compile(r"(?<![A-Za-z0-9_])n(?![A-Za-z0-9_])")

Message = Mapping[str, Any]
Sleep = Callable[[float], Awaitable[None]]


class _Transient(Exception):
    """A failure worth retrying."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class _NRejected(Exception):
    """The server refused ``n > 1``."""


@dataclass(frozen=True)
class _Reply:
    choices: tuple[tuple[str, str | None], ...]  # (text, finish_reason), by choice index
    usage: Usage | None
    model: str
    request_id: str | None
    latency_s: float


class ChatClient:
    """Async chat client of one endpoint; use as ``async with ChatClient(config) as client``.

    ``client`` (an ``httpx.AsyncClient``, not closed here) or ``transport`` may be injected.
    Otherwise the client opens ``config.concurrency`` lanes, each an ``httpx.AsyncClient``
    holding one keep-alive connection, closed on exit: httpcore's pool spends time quadratic
    in its size per request (encode/httpx#3215), so small pools are much faster than one
    large one at high concurrency (see bench/bench_llm.py). Either way at most
    ``config.concurrency`` HTTP requests are in flight.
    ``refresh=True`` ignores cached samples but still stores (replaces) the new ones.
    ``rng`` and ``sleep`` are for tests (jitter, waiting).
    """

    def __init__(
        self,
        config: ClientConfig,
        *,
        client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        cache: ResponseCache | None = None,
        refresh: bool = False,
        rng: random.Random | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if client is not None and transport is not None:
            raise ConfigError("give ChatClient either client or transport, not both")
        self.config = config
        self._cache = cache
        self._refresh = refresh
        self._rng = rng or random.Random()
        self._sleep = sleep
        self._secret = env.api_key(config.api_key_env)
        self._headers = {"Authorization": f"Bearer {self._secret}"} if self._secret else {}
        self._timeout = httpx.Timeout(config.read_timeout, connect=config.connect_timeout)
        if client is not None:
            self._owned: list[httpx.AsyncClient] = []
            lanes = [client] * config.concurrency
        elif transport is not None:
            self._owned = [self._new_client(transport, config.concurrency)]
            lanes = self._owned * config.concurrency
        else:
            self._owned = [self._new_client(None, 1) for _ in range(config.concurrency)]
            lanes = self._owned
        self._lanes: asyncio.Queue[httpx.AsyncClient] = asyncio.Queue()
        for lane in lanes:
            self._lanes.put_nowait(lane)
        base = httpx.URL(config.endpoint)
        self._url = base.copy_with(path=base.path.rstrip("/") + "/chat/completions")
        self._where = redact_url(str(self._url))
        self._cache_endpoint = redact_url(config.endpoint).rstrip("/")
        #: False once the endpoint refused ``n > 1`` or returned fewer choices than asked.
        self.supports_n = True
        #: Set once the endpoint refused the credentials: every later request fails with it.
        self._auth_failure: str | None = None

    def __repr__(self) -> str:
        return f"ChatClient(endpoint={self._where!r}, model={self.config.model!r})"

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP clients this object created (not an injected one)."""
        for owned in self._owned:
            await owned.aclose()

    def _new_client(self, transport: httpx.AsyncBaseTransport | None, connections: int) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=transport,
            verify=_ssl_context(),
            timeout=self._timeout,
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
        )

    async def complete(
        self,
        messages: Sequence[Message],
        params: SamplingParams | None = None,
        n: int | None = None,
    ) -> list[Completion]:
        """``n`` samples (default ``params.n``) for ``messages``, ordered by sample index.

        Raises :class:`PolicyError`; when some samples arrived before the failure it is a
        :class:`PartialCompletionsError` carrying them (they are cached too, if caching).
        """
        params = params or SamplingParams()
        count = params.n if n is None else n
        if count < 1:
            raise ConfigError(f"n must be >= 1, got {count}")
        msgs = [dict(m) for m in messages]
        keys = [self._key(msgs, params, i) for i in range(count)] if self._cache is not None else []
        found: dict[int, Completion] = {}
        if self._cache is not None and not self._refresh:
            for i, key in enumerate(keys):
                cached = _from_cache(self._cache.get(key))
                if cached is not None:
                    found[i] = dataclasses.replace(cached, text=self._sanitize(cached.text))
        missing = [i for i in range(count) if i not in found]
        if missing:
            log.debug("%s: %d cached, requesting %d", self._where, len(found), len(missing))
            try:
                await self._fetch(msgs, params, missing, found, keys)
            except EndpointAuthError:
                raise
            except PolicyError as exc:
                if not found:
                    raise
                got = [found[i] for i in sorted(found)]
                raise PartialCompletionsError(f"{exc} ({len(got)} of {count} samples received)", got) from exc
        return [found[i] for i in range(count)]

    async def complete_many(self, requests: Sequence[ChatRequest]) -> list[RequestResult]:
        """Run every request concurrently; one result per request, in order, never raising
        for a failed request (its error and any samples it received are in its result)."""

        async def one(request: ChatRequest) -> RequestResult:
            try:
                got = await self.complete(request.messages, request.params, request.n)
            except PartialCompletionsError as exc:
                return RequestResult(exc.completions, exc)
            except HwtpError as exc:
                return RequestResult((), exc)
            return RequestResult(tuple(got))

        return list(await asyncio.gather(*(one(r) for r in requests)))

    def _key(self, msgs: list[dict[str, Any]], params: SamplingParams, index: int) -> str:
        return cache_key(
            {
                "endpoint": self._cache_endpoint,
                "model": self.config.model,
                "messages": msgs,
                "params": params.body(),
                "index": index,
            }
        )

    async def _fetch(
        self,
        msgs: list[dict[str, Any]],
        params: SamplingParams,
        missing: list[int],
        found: dict[int, Completion],
        keys: list[str],
    ) -> None:
        if len(missing) > 1 and self.supports_n:
            try:
                reply = await self._request(msgs, params, len(missing), missing[0])
            except _NRejected as exc:
                self.supports_n = False
                log.info("%s refused n=%d (%s); using single requests", self._where, len(missing), exc)
            else:
                self._record(reply, missing, found, keys)
                if len(reply.choices) < len(missing):
                    self.supports_n = False
                    log.info(
                        "%s returned %d of %d choices; using single requests",
                        self._where,
                        len(reply.choices),
                        len(missing),
                    )
                missing = [i for i in missing if i not in found]
        if len(missing) == 1:  # the common case: no extra task
            await self._single(msgs, params, missing[0], found, keys)
            return
        singles = [self._single(msgs, params, i, found, keys) for i in missing]
        errors = [r for r in await asyncio.gather(*singles, return_exceptions=True) if r is not None]
        for error in errors:
            if not isinstance(error, PolicyError):
                raise error
        if errors:
            raise next((e for e in errors if isinstance(e, EndpointAuthError)), errors[0])

    async def _single(
        self,
        msgs: list[dict[str, Any]],
        params: SamplingParams,
        index: int,
        found: dict[int, Completion],
        keys: list[str],
    ) -> None:
        reply = await self._request(msgs, params, 1, index)
        self._record(reply, [index], found, keys)

    def _record(self, reply: _Reply, indices: list[int], found: dict[int, Completion], keys: list[str]) -> None:
        for pos, (index, (text, finish)) in enumerate(zip(indices, reply.choices, strict=False)):
            completion = Completion(
                text=text,
                finish_reason=finish,
                index=index,
                usage=reply.usage if pos == 0 else None,
                latency_s=reply.latency_s,
                model=reply.model,
                request_id=reply.request_id,
            )
            found[index] = completion
            if self._cache is not None:
                value = asdict(completion)
                del value["from_cache"]
                try:
                    self._cache.put(keys[index], value, replace=self._refresh)
                except HwtpError as exc:  # a sample in hand beats a cached one
                    log.warning("not cached: %s", exc)

    async def _request(self, msgs: list[dict[str, Any]], params: SamplingParams, n: int, first: int) -> _Reply:
        body: dict[str, Any] = {"model": self.config.model, "messages": msgs, **params.body()}
        if params.seed is not None:
            body["seed"] = params.seed + first
        if n > 1:
            body["n"] = n
        attempts = self.config.max_retries + 1
        last = "no attempt made"
        budget = wait_budget(self.config)
        for attempt in range(attempts):
            try:
                return await self._attempt(body, n)
            except _Transient as exc:
                last = exc.reason
                if attempt + 1 == attempts:
                    break
                delay = retry_delay(attempt, self.config, exc.retry_after, self._rng, budget)
                capped = ""
                if exc.retry_after is not None and exc.retry_after > delay:
                    capped = (
                        f" (Retry-After {exc.retry_after:g} s capped: a request waits at most "
                        f"{self.config.retry_after_max:g} s per retry and its --timeout, "
                        f"{wait_budget(self.config):g} s, in all; {max(0.0, budget):g} s were left)"
                    )
                log.warning(
                    "%s: %s; retry %d of %d in %.2f s%s",
                    self._where,
                    last,
                    attempt + 1,
                    self.config.max_retries,
                    delay,
                    capped,
                )
                budget -= delay
                await self._sleep(delay)
        plural = "s" if attempts > 1 else ""
        raise PolicyError(f"{self._where}: gave up after {attempts} attempt{plural}; last error: {last}")

    async def _attempt(self, body: dict[str, Any], n: int) -> _Reply:
        if self._auth_failure is not None:
            raise EndpointAuthError(self._auth_failure)
        lane = await self._lanes.get()  # waits while config.concurrency requests are out
        start = time.perf_counter()
        deadline = self.config.request_timeout
        try:
            status, phrase, headers, content = await asyncio.wait_for(self._exchange(lane, body), deadline)
        except asyncio.TimeoutError:
            raise _Transient(f"timed out: no complete response within {deadline:g} s") from None
        except _RETRY_ERRORS as exc:
            raise _Transient(f"{type(exc).__name__} {self._scrub(str(exc))}".strip()) from None
        except httpx.HTTPError as exc:
            raise PolicyError(f"{self._where}: {type(exc).__name__} {self._scrub(str(exc))}") from None
        finally:
            self._lanes.put_nowait(lane)
        latency = time.perf_counter() - start
        if status in RETRY_STATUSES:
            raise _Transient(
                f"HTTP {status} {phrase}: {self._error_text(content)}",
                parse_retry_after(headers.get("retry-after")),
            )
        if not 200 <= status < 300:
            text = self._error_text(content)
            if n > 1 and status in (400, 422) and _MENTIONS_N.search(text):
                raise _NRejected(f"HTTP {status}: {text}")
            if status in (401, 403):
                self._auth_failure = self._auth_message(status, phrase, text)
                raise EndpointAuthError(self._auth_failure)
            raise PolicyError(f"{self._where}: HTTP {status} {phrase}: {text}")
        return self._parse(content, n, latency)

    async def _exchange(self, lane: httpx.AsyncClient, body: dict[str, Any]) -> tuple[int, str, httpx.Headers, bytes]:
        """One HTTP exchange: status, reason, headers and the body, streamed and capped (a
        success body beyond ``max_response_bytes`` fails; an error body is cut short)."""
        async with lane.stream("POST", self._url, json=body, headers=self._headers, timeout=self._timeout) as response:
            ok = response.is_success
            cap = self.config.max_response_bytes if ok else ERROR_BODY_MAX
            declared = response.headers.get("content-length", "")
            if ok and declared.isdigit() and int(declared) > cap:
                raise PolicyError(self._too_large(cap))
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():  # decoded bytes: a compressed bomb is capped too
                size += len(chunk)
                if size > cap:
                    if ok:
                        raise PolicyError(self._too_large(cap))
                    chunks.append(chunk[: len(chunk) - (size - cap)])
                    break
                chunks.append(chunk)
            return response.status_code, response.reason_phrase, response.headers, b"".join(chunks)

    def _too_large(self, cap: int) -> str:
        return f"{self._where}: response exceeds {cap} bytes (the limit is --max-response-bytes)"

    def _auth_message(self, status: int, phrase: str, text: str) -> str:
        var = self.config.api_key_env
        if self._secret:
            hint = f"the endpoint refused the API key in ${var}: set {var} to a valid key"
        else:
            hint = f"no API key was sent: ${var} is not set"
        return f"{self._where}: HTTP {status} {phrase}: {text}; {hint} (or name another variable with --api-key-env)"

    def _sanitize(self, text: str) -> str:
        """Text from the endpoint, safe to store: valid Unicode, without the API key."""
        text = clean_text(text)
        for secret in (self._secret, httpx.URL(self.config.endpoint).password):
            if secret:
                text = text.replace(secret, REDACTED)
        return text

    def _parse(self, body: bytes, n: int, latency: float) -> _Reply:
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            raise _Transient("response body is not valid JSON") from None
        if not isinstance(data, dict):
            raise _Transient("response body is not a JSON object")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise _Transient("response has no choices")
        parsed: list[tuple[int, str, str | None]] = []
        for pos, choice in enumerate(choices[:n]):
            message = choice.get("message") if isinstance(choice, dict) else None
            content = message.get("content") if isinstance(message, dict) else None
            finish = choice.get("finish_reason") if isinstance(choice, dict) else None
            if content is None and finish == "length":
                content = ""  # cut off before any content (e.g. while reasoning)
            if not isinstance(content, str):
                raise _Transient(f"choice {pos} has no message content")
            index = choice.get("index", pos)
            parsed.append(
                (
                    index if isinstance(index, int) else pos,
                    self._sanitize(content),
                    finish if isinstance(finish, str) else None,
                )
            )
        parsed.sort(key=lambda item: item[0])
        return _Reply(
            choices=tuple((text, finish) for _, text, finish in parsed),
            usage=_usage(data.get("usage"), len(parsed)),
            model=self._sanitize(str(data.get("model") or self.config.model)),
            request_id=self._sanitize(str(data["id"])) if data.get("id") is not None else None,
            latency_s=latency,
        )

    def _error_text(self, content: bytes) -> str:
        """The server's error message (JSON ``error.message``/``message``/``detail`` or the raw
        body), without the API key, truncated."""
        text = clean_text(content.decode("utf-8", "replace"))
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            data = None
        if isinstance(data, dict):
            error = data.get("error")
            if isinstance(error, dict) and error.get("message"):
                text = str(error["message"])
            elif isinstance(error, str) and error:
                text = error
            elif data.get("message"):
                text = str(data["message"])
            elif data.get("detail"):
                text = str(data["detail"])
        text = self._scrub(" ".join(text.split()))
        if len(text) > ERROR_TEXT_MAX:
            text = text[:ERROR_TEXT_MAX] + "..."
        return text or "(empty body)"

    def _scrub(self, text: str) -> str:
        """``text`` with the API key and the endpoint's password removed."""
        for secret in (self._secret, httpx.URL(self.config.endpoint).password):
            if secret:
                text = text.replace(secret, "***")
        return text


@functools.lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    """httpx's default TLS context, built once: loading the CA bundle takes ~0.1 s."""
    return httpx.create_ssl_context()


def _usage(raw: object, choices: int) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return Usage(prompt_tokens=prompt, completion_tokens=completion, choices=choices)


def _from_cache(value: dict[str, Any] | None) -> Completion | None:
    if value is None:
        return None
    try:
        usage = Usage(**value["usage"]) if value.get("usage") else None
        return Completion(**{**value, "usage": usage, "from_cache": True})
    except (TypeError, KeyError):
        log.warning("ignoring a cached completion of an unknown layout")
        return None


def complete_many(
    config: ClientConfig,
    requests: Sequence[ChatRequest],
    *,
    cache: ResponseCache | None = None,
    refresh: bool = False,
    transport: httpx.AsyncBaseTransport | None = None,
) -> list[RequestResult]:
    """Synchronous convenience: run ``requests`` concurrently (up to ``config.concurrency``
    HTTP requests in flight) and return one :class:`RequestResult` per request, in order.

    A failed request does not lose anything: its result holds the error and whatever samples
    it received, every other request's samples are returned, and with a ``cache`` every
    received sample is already stored (a rerun requests only what is missing).
    Must not be called from a running event loop (use :meth:`ChatClient.complete_many`).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise ConfigError("complete_many() cannot run inside an event loop; await ChatClient.complete_many() instead")

    async def run() -> list[RequestResult]:
        async with ChatClient(config, transport=transport, cache=cache, refresh=refresh) as client:
            return await client.complete_many(requests)

    return asyncio.run(run())
