"""Scoring off the event loop: concurrent requests' items merged into batches for the core.

Scoring blocks (it waits on simulator processes), so it runs in a small thread pool and the
event loop stays free to accept, refuse and answer. Requests that arrive while every scoring
thread is busy wait together; the next free thread takes all of them at once (up to
``max_batch_items``) in one call of :func:`hwtp.rewards.score_completions`, which groups the
work per design and mutant set on the warm pools. A lone request never waits for company.

One request must not fail the requests batched with it: a batch that the core refuses (a bad
ground truth, :class:`~hwtp.errors.RewardError`) or fails on is scored again request by request,
so the error reaches only the request it belongs to. (A completion the core cannot read is never
such an error: it is scored ``invalid`` on its own.)
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from hwtp.rewards import RewardResult
from hwtp.training.serve.metrics import Metrics
from hwtp.training.serve.protocol import Item

#: ``hwtp.rewards.score_completions``: (ground truth, text) pairs and their prompts.
ScoreFn = Callable[[Sequence[tuple[Any, str]], Sequence[str | None]], list[RewardResult]]


@dataclass
class _Job:
    items: list[Item]
    future: asyncio.Future[list[RewardResult]]
    abandoned: bool = field(default=False)


class Batcher:
    """Score item lists from the event loop; see the module docstring."""

    def __init__(self, score: ScoreFn, metrics: Metrics, threads: int, max_batch_items: int) -> None:
        self._score = score
        self._metrics = metrics
        self._threads = threads
        self._max_batch_items = max_batch_items
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="hwtp-serve-score")
        self._pending: deque[_Job] = deque()
        self._running = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def score(self, items: list[Item], timeout: float) -> list[RewardResult]:
        """Rewards of ``items`` in order; :class:`TimeoutError` after ``timeout`` seconds (the
        batch, if already running, finishes and its results for this request are dropped)."""
        job = _Job(items, asyncio.get_running_loop().create_future())
        self._pending.append(job)
        self._dispatch()
        try:
            return await asyncio.wait_for(asyncio.shield(job.future), timeout)
        except BaseException:
            job.abandoned = True
            raise

    @property
    def pending_items(self) -> int:
        return sum(len(job.items) for job in self._pending)

    def _dispatch(self) -> None:
        while self._pending and self._running < self._threads:
            batch: list[_Job] = []
            size = 0
            while self._pending:
                job = self._pending[0]
                if job.abandoned:
                    self._pending.popleft()
                    continue
                if batch and size + len(job.items) > self._max_batch_items:
                    break
                batch.append(self._pending.popleft())
                size += len(job.items)
            if not batch:
                return
            self._running += 1
            task = asyncio.get_running_loop().create_task(self._run(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[_Job]) -> None:
        loop = asyncio.get_running_loop()
        try:
            items = [item for job in batch for item in job.items]
            try:
                results = await loop.run_in_executor(self._executor, self._scored, items)
            except Exception as exc:
                if len(batch) == 1:
                    _fail(batch[0], exc)
                    return
                for job in batch:  # find the request the error belongs to
                    try:
                        _resolve(job, await loop.run_in_executor(self._executor, self._scored, job.items))
                    except Exception as job_exc:
                        _fail(job, job_exc)
                return
            start = 0
            for job in batch:
                _resolve(job, results[start : start + len(job.items)])
                start += len(job.items)
        finally:
            self._running -= 1
            self._dispatch()

    def _scored(self, items: list[Item]) -> list[RewardResult]:
        results = self._score([(truth, text) for truth, text, _ in items], [prompt for *_, prompt in items])
        if len(results) != len(items):
            raise RuntimeError(f"the scoring core returned {len(results)} results for {len(items)} items")
        self._metrics.evaluated(len(items), sum(_evaluations(r) for r in results), [r.outcome for r in results])
        return results

    async def drain(self) -> None:
        """Wait for every running batch (shutdown: accepted requests finish first)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def close(self) -> None:
        """Stop the scoring threads (after :meth:`drain`)."""
        self._executor.shutdown(wait=True)


def _resolve(job: _Job, results: list[RewardResult]) -> None:
    if not job.future.done():
        job.future.set_result(results)


def _fail(job: _Job, exc: BaseException) -> None:
    if not job.future.done():
        job.future.set_exception(exc)
    # An abandoned request never reads its exception: mark it retrieved so asyncio stays quiet.
    if job.abandoned:
        job.future.exception()


def _evaluations(result: RewardResult) -> int:
    """Simulator evaluations one result took (an invalid plan never reaches the simulator)."""
    count = result.detail.get("evaluations") if isinstance(result.detail, dict) else None
    if isinstance(count, int):
        return count
    return 0 if result.outcome == "invalid" else 1
