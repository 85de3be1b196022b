"""Records of the OpenAI-compatible chat client: sampling parameters, client configuration,
requests, completions and results (:mod:`hwtp.policy.llm.client` is the client itself)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from hwtp import env
from hwtp.errors import ConfigError, HwtpError, PolicyError

Message = Mapping[str, Any]


def redact_url(url: str) -> str:
    """``url`` without user info, query or fragment (safe for messages and logs)."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return "<invalid URL>"
    return str(parsed.copy_with(username=None, password=None, query=None, fragment=None))


@dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters sent with every request (``None``/empty ones are left out)."""

    #: Softmax temperature (>= 0); 1.0 samples the policy as trained, as GRPO expects.
    temperature: float = 1.0
    #: Nucleus sampling mass in (0, 1].
    top_p: float = 1.0
    #: Cap on generated tokens; None leaves it to the server.
    max_tokens: int | None = None
    #: Sampling seed. Sample ``i`` (of a request for several) is sent ``seed + i`` when
    #: requested alone, or ``seed + first index`` for a batch starting at that index.
    seed: int | None = None
    #: Stop sequences (a single string is taken as one sequence).
    stop: tuple[str, ...] = ()
    #: Default number of samples per prompt (``ChatClient.complete(n=...)`` overrides it).
    n: int = 1
    #: OpenAI ``response_format`` for structured output, e.g. a ``json_schema`` object.
    response_format: Mapping[str, Any] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)
        object.__setattr__(self, "stop", stop)
        if self.temperature < 0:
            raise ConfigError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ConfigError(f"max_tokens must be >= 1 or None, got {self.max_tokens}")
        if self.n < 1:
            raise ConfigError(f"n must be >= 1, got {self.n}")

    def body(self) -> dict[str, Any]:
        """The request fields these parameters set, without ``n`` (also the cache identity)."""
        out: dict[str, Any] = {"temperature": self.temperature, "top_p": self.top_p}
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        if self.seed is not None:
            out["seed"] = self.seed
        if self.stop:
            out["stop"] = list(self.stop)
        if self.response_format is not None:
            out["response_format"] = dict(self.response_format)
        return out


@dataclass(frozen=True)
class ClientConfig:
    """Where and how to reach an OpenAI-compatible endpoint. Times are in seconds."""

    #: Base URL including the API prefix, e.g. ``http://127.0.0.1:8000/v1``.
    endpoint: str
    #: Model name as the endpoint serves it (sent as ``model``; part of the cache key).
    model: str
    #: Environment variable holding the API key; unset or empty means no Authorization header.
    api_key_env: str = env.DEFAULT_API_KEY_VAR
    #: Longest wait to open a connection.
    connect_timeout: float = 10.0
    #: Longest wait for the next bytes of a response (generation can be slow).
    read_timeout: float = 300.0
    #: Total deadline of one HTTP attempt, from sending the request to the last byte of the
    #: response (a server that drips a byte at a time never outlives it).
    request_timeout: float = 300.0
    #: Largest response body read; a longer one fails the request ("response exceeds N bytes").
    max_response_bytes: int = env.DEFAULT_MAX_RESPONSE_BYTES
    #: Retries after the first attempt of each HTTP request.
    max_retries: int = 5
    #: Retry ``k`` (from 0) waits uniformly in [0, min(backoff_max, backoff_base * 2**k)].
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    #: Longest wait a ``Retry-After`` header can impose.
    retry_after_max: float = 120.0
    #: HTTP requests in flight at once.
    concurrency: int = 8

    def __post_init__(self) -> None:
        try:
            url = httpx.URL(self.endpoint) if "://" in self.endpoint else None
        except httpx.InvalidURL:
            url = None
        if url is None or url.scheme not in ("http", "https") or not url.host:
            raise ConfigError(
                f"endpoint must be an http(s) base URL such as http://127.0.0.1:8000/v1, "
                f"got {redact_url(self.endpoint)!r}"
            )
        if not self.model:
            raise ConfigError("model must be set (the name the endpoint serves)")
        for name in ("connect_timeout", "read_timeout", "request_timeout", "retry_after_max"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.backoff_base < 0 or self.backoff_max < 0:
            raise ConfigError("backoff_base and backoff_max must be >= 0")
        if self.max_retries < 0:
            raise ConfigError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.max_response_bytes < 1:
            raise ConfigError(f"max_response_bytes must be >= 1, got {self.max_response_bytes}")


@dataclass(frozen=True)
class Usage:
    """Token counts of one HTTP request, which produced ``choices`` completions."""

    prompt_tokens: int
    completion_tokens: int
    choices: int = 1


@dataclass(frozen=True)
class Completion:
    """One sample.

    ``usage`` is recorded once per request: on the lowest-index completion a request produced,
    covering all ``usage.choices`` of them; the others have ``usage=None``. Summing the
    ``usage`` of completions therefore counts every request exactly once. ``latency_s`` is the
    time of the successful HTTP attempt. ``from_cache`` completions carry their original usage.
    """

    text: str
    finish_reason: str | None
    index: int
    usage: Usage | None
    latency_s: float
    model: str
    request_id: str | None
    from_cache: bool = False


@dataclass(frozen=True)
class ChatRequest:
    """One prompt for :meth:`hwtp.policy.llm.client.ChatClient.complete_many`; ``n=None`` means ``params.n``."""

    messages: Sequence[Message]
    params: SamplingParams = field(default_factory=SamplingParams)
    n: int | None = None


@dataclass(frozen=True)
class RequestResult:
    """What one :class:`ChatRequest` gave: its completions, and the error if it failed.

    On failure ``completions`` still holds the samples received before the error.
    """

    completions: tuple[Completion, ...]
    error: HwtpError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class PartialCompletionsError(PolicyError):
    """Some samples of a prompt failed; ``completions`` holds those that were received."""

    def __init__(self, message: str, completions: Sequence[Completion]) -> None:
        super().__init__(message)
        self.completions = tuple(completions)
