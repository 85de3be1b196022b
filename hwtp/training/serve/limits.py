"""The bounds of ``hwtp serve``: body size, items per request, concurrency with a bounded queue,
and the time a request may take.

Admission is counted on the event loop (one thread): a request takes one of ``concurrency`` slots,
or waits in a queue of at most ``queue`` requests, or is refused at once with 503 and
``Retry-After`` so a trainer backs off instead of piling up connections.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

from hwtp.training.serve.metrics import Metrics

#: The default time limit of a request: under OpenRLHF's 180 s client timeout (0.11), so that a slow
#: request gets hwtp's 504 and its message before the client gives up and sends it again.
REQUEST_TIMEOUT_S = 170.0


@dataclass(frozen=True)
class ServeLimits:
    """Every bound of the service; the CLI options map one to one."""

    max_body_bytes: int = 16 * 1024 * 1024
    max_items: int = 1024
    concurrency: int = 8
    queue: int = 64
    request_timeout_s: float = REQUEST_TIMEOUT_S
    #: Seconds a client may take to send one request, headers and body (slow clients are cut off).
    read_timeout_s: float = 30.0
    retry_after_s: int = 1
    #: Items merged into one call of the scoring core when concurrent requests wait together.
    max_batch_items: int = 512
    #: Scoring threads: batches scored at the same time (the warm pools run each batch's
    #: evaluations on their own workers).
    scoring_threads: int = 2

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_items", "concurrency", "max_batch_items", "scoring_threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.queue < 0:
            raise ValueError("queue must be 0 or more")
        for name in ("request_timeout_s", "read_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")


class Busy(Exception):
    """Every slot is taken and the queue is full."""


class Admission:
    """``concurrency`` slots and a FIFO queue of at most ``queue`` waiters (event loop only)."""

    def __init__(self, concurrency: int, queue: int, metrics: Metrics) -> None:
        self.concurrency = concurrency
        self.queue = queue
        self.metrics = metrics
        self._waiters: deque[asyncio.Future[None]] = deque()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a slot for the body of the ``async with``; raise :class:`Busy` when full."""
        if self.metrics.in_flight < self.concurrency and not self._waiters:
            self.metrics.in_flight += 1
        elif len(self._waiters) >= self.queue:
            raise Busy
        else:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            self.metrics.queued += 1
            try:
                await waiter  # the releasing request hands its slot over (in_flight unchanged)
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._release()  # handed a slot just as we were cancelled: pass it on
                else:
                    with suppress(ValueError):
                        self._waiters.remove(waiter)
                raise
            finally:
                self.metrics.queued -= 1
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.metrics.in_flight -= 1
