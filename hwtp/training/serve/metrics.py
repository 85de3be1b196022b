"""Counters and latency percentiles of ``hwtp serve``, read by ``GET /metrics``.

Everything here is touched from the event loop only (one thread), except :meth:`Metrics.evaluated`,
which the scoring threads call; a lock keeps the numbers consistent for both.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter, deque
from typing import Any

#: Latencies kept for the percentiles: the most recent requests, so a long-lived service reports
#: what it does now, in bounded memory.
WINDOW = 4096
#: The Ray executor's counters, exported by the Prometheus format.
RAY_COUNTERS = ("chunks", "resubmitted", "actors_lost", "duplicates")


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


class Metrics:
    """Requests per route and status, items and evaluations scored, latencies, queue and in flight."""

    def __init__(self, window: int = WINDOW) -> None:
        self._lock = threading.Lock()
        self.started = time.monotonic()
        self.requests: Counter[str] = Counter()
        self.statuses: Counter[str] = Counter()
        self.rejected: Counter[str] = Counter()
        self.items = 0
        self.evaluations = 0
        self.batches = 0
        self.outcomes: Counter[str] = Counter()
        self.in_flight = 0
        self.queued = 0
        self._latency: dict[str, deque[float]] = {}
        self._window = window

    def request_done(self, route: str, status: int, seconds: float) -> None:
        """One request answered on ``route`` with ``status`` after ``seconds``."""
        with self._lock:
            self.requests[route] += 1
            self.statuses[str(status)] += 1
            if status < 400:
                self._latency.setdefault(route, deque(maxlen=self._window)).append(seconds)

    def reject(self, reason: str) -> None:
        """A request refused before scoring (``too_large``, ``busy``, ``unauthorized``...)."""
        with self._lock:
            self.rejected[reason] += 1

    def evaluated(self, items: int, evaluations: int, outcomes: list[str]) -> None:
        """One batch scored: its items, the simulator evaluations they took, their outcomes."""
        with self._lock:
            self.batches += 1
            self.items += items
            self.evaluations += evaluations
            self.outcomes.update(outcomes)

    def snapshot(self) -> dict[str, Any]:
        """The JSON body of ``GET /metrics``; latencies in milliseconds."""
        with self._lock:
            latency = {}
            for route, values in sorted(self._latency.items()):
                data = list(values)
                latency[route] = {
                    "count": len(data),
                    **{f"p{q}_ms": _ms(percentile(data, q)) for q in (50, 95, 99)},
                }
            return {
                "uptime_s": round(time.monotonic() - self.started, 3),
                "requests": dict(self.requests),
                "requests_total": sum(self.requests.values()),
                "statuses": dict(self.statuses),
                "rejected": dict(self.rejected),
                "items": self.items,
                "evaluations": self.evaluations,
                "batches": self.batches,
                "outcomes": dict(self.outcomes),
                "in_flight": self.in_flight,
                "queue_depth": self.queued,
                "latency": latency,
            }

    def prometheus(self, executor: dict[str, Any] | None = None) -> str:
        """The same numbers in the Prometheus text format (``GET /metrics?format=prometheus``),
        with the Ray executor's counters when ``executor`` (``hwtp.rewards.executor_stats()``) has them."""
        snap = self.snapshot()
        lines = [
            "# TYPE hwtp_serve_requests_total counter",
            *(f'hwtp_serve_requests_total{{route="{r}"}} {n}' for r, n in sorted(snap["requests"].items())),
            "# TYPE hwtp_serve_responses_total counter",
            *(f'hwtp_serve_responses_total{{status="{s}"}} {n}' for s, n in sorted(snap["statuses"].items())),
            "# TYPE hwtp_serve_rejected_total counter",
            *(f'hwtp_serve_rejected_total{{reason="{s}"}} {n}' for s, n in sorted(snap["rejected"].items())),
            "# TYPE hwtp_serve_items_total counter",
            f"hwtp_serve_items_total {snap['items']}",
            "# TYPE hwtp_serve_evaluations_total counter",
            f"hwtp_serve_evaluations_total {snap['evaluations']}",
            "# TYPE hwtp_serve_in_flight gauge",
            f"hwtp_serve_in_flight {snap['in_flight']}",
            "# TYPE hwtp_serve_queue_depth gauge",
            f"hwtp_serve_queue_depth {snap['queue_depth']}",
            "# TYPE hwtp_serve_latency_seconds summary",
        ]
        for route, stats in snap["latency"].items():
            for q in (50, 95, 99):
                value = stats[f"p{q}_ms"]
                if value is not None:
                    lines.append(f'hwtp_serve_latency_seconds{{route="{route}",quantile="0.{q}"}} {value / 1000:.6f}')
        for key in RAY_COUNTERS:
            if executor is not None and key in executor:
                lines += [f"# TYPE hwtp_serve_ray_{key}_total counter", f"hwtp_serve_ray_{key}_total {executor[key]}"]
        return "\n".join(lines) + "\n"


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000.0, 3)
