"""Retry timing for the chat client: full-jitter backoff, ``Retry-After``, safe URLs."""

from __future__ import annotations

import email.utils
import random
import time

from hwtp.policy.llm.chat import ClientConfig


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait according to a ``Retry-After`` header value, or None if unusable.

    Accepts delta-seconds (fractions too, beyond RFC 9110) and HTTP dates; past dates give 0.
    """
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Full-jitter exponential backoff: uniform in [0, min(cap, base * 2**attempt)]."""
    return rng.uniform(0.0, min(cap, base * 2.0 ** min(attempt, 60)))


def retry_delay(
    attempt: int, config: ClientConfig, retry_after: float | None, rng: random.Random, budget: float | None = None
) -> float:
    """The wait before retry ``attempt + 1``: the backoff, but never less than ``Retry-After``,
    itself capped at ``config.retry_after_max`` per retry and at ``budget``, the seconds of
    waiting the request has left (:func:`wait_budget`)."""
    delay = backoff_delay(attempt, config.backoff_base, config.backoff_max, rng)
    if retry_after is not None:
        asked = min(retry_after, config.retry_after_max)
        if budget is not None:
            asked = min(asked, max(0.0, budget))
        delay = max(delay, asked)
    return delay


def wait_budget(config: ClientConfig) -> float:
    """Seconds one request may spend waiting between its attempts on ``Retry-After``: one
    ``request_timeout`` (``--timeout``) in all, however many retries (``--retries``) it has; a
    server asking for 100000 s costs at most that, never ``retries x retry_after_max``."""
    return config.request_timeout
