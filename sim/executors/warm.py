"""The warm executor: simulator processes on this machine kept alive between calls.

Each schemata part gets a :class:`hwtp.sim.warm.WarmPool` registered under the set's key
(:attr:`hwtp.sim.executors.base.Schemata.key`, the part's number after the first), so every
executor of one process shares the pools of a mutant set, as ``hwtp.sim.warm.pool_for``
keeps them; the parts of one set share one process budget (``hwtp.sim.warm.budget_for``) of
``workers``. A pool's processes stop after ``idle_seconds`` without work; :meth:`close`
closes the pools this executor made. A pool holds the limits of the call that made it, so
pools are known by their limits too (:attr:`hwtp.sim.job.Limits.key`). Limits a pool does not
honour (a total budget, hang dropping: :attr:`hwtp.sim.job.Limits.pooled`) run in batched
processes of their own, as the local executor runs them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from hwtp.sim import warm
from hwtp.sim.executors.base import Builds, Schemata, in_thread, joined
from hwtp.sim.executors.local import LocalExecutor
from hwtp.sim.job import Evaluation, Limits
from hwtp.sim.runner import Counters, EvalResult


class WarmExecutor:
    """Warm simulator pools on this machine, ``workers`` processes per mutant set."""

    name = "local"

    def __init__(self, workers: int = 1, idle_seconds: float = 300.0) -> None:
        self.workers = max(1, workers)
        self.idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._keys: set[str] = set()  # the pools made through this executor (hwtp.sim.warm.pool_for keys)
        self._batched = LocalExecutor(self.workers)  # for limits no pool honours

    def _pool(self, schemata: Schemata, part: int, limits: Limits) -> warm.WarmPool:
        key = schemata.key + (f":{part + 1}" if part else "") + f"@{limits.key}"
        target = schemata.targets[part]

        def make() -> warm.WarmPool:
            return warm.WarmPool(
                target.build(),
                target.design,
                workers=self.workers,
                limits=limits,
                idle_seconds=self.idle_seconds,
                budget=warm.budget_for(schemata.key, self.workers),
            )

        with self._lock:
            self._keys.add(key)
        return warm.pool_for(key, make)

    def build(self, schemata: Schemata) -> Builds:
        return Builds.of([t.build() for t in schemata.targets])

    def submit(
        self, schemata: Schemata, evaluations: Sequence[Evaluation], limits: Limits
    ) -> Future[dict[str, EvalResult]]:
        """Each evaluation in the pool of the schemata part of its selector value."""
        if not limits.pooled:
            return in_thread(lambda: self._batched.run(schemata, evaluations, limits), "hwtp-warm")
        return joined([self._pool(schemata, i, limits).submit(group) for i, group in schemata.split(evaluations)])

    def run(
        self,
        schemata: Schemata,
        evaluations: Sequence[Evaluation],
        limits: Limits,
        progress: Callable[[int], None] | None = None,
        on_result: Callable[[EvalResult], None] | None = None,
        counters: Counters | None = None,
        workdir: Path | None = None,
    ) -> dict[str, EvalResult]:
        """:meth:`submit`, waited for; ``on_result`` and ``progress`` once the batch is back."""
        if not limits.pooled:
            return self._batched.run(schemata, evaluations, limits, progress, on_result, counters, workdir)
        results = self.submit(schemata, evaluations, limits).result()
        for result in results.values():
            if on_result is not None:
                on_result(result)
        if counters is not None:
            counters.add(evaluations=len(results))
        if progress is not None and results:
            progress(len(results))
        return results

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def close(self) -> None:
        with self._lock:
            keys, self._keys = list(self._keys), set()
        live = warm.pools()
        for key in keys:
            pool = live.get(key)
            if pool is not None:
                pool.close()
