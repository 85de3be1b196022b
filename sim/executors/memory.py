"""The in-memory executor: evaluations answered by a Python function, for tests without a simulator.

It speaks the executor protocol (:class:`hwtp.sim.executors.base.Executor`) exactly: results by
id, each reported once through ``on_result``, ``progress`` per result, futures from
:meth:`submit`; so scoring, ``hwtp run``'s resume and the reward logic run on it unchanged.
``evaluate`` is given each evaluation (its compiled plan ops in ``tests``, its selector
value in ``mutant``: 0 is golden) and the limits, and returns its result; ``ran`` lists the
evaluation ids in the order they ran. The limits of a call hold as in a real executor: past
``total_s`` the evaluations left are not run (fault ``budget``); with ``drop_hung``, a state's
evaluations after one that hung (fault ``hang``) are not run either.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from hwtp.sim.executors.base import Builds, Schemata
from hwtp.sim.job import Evaluation, Limits
from hwtp.sim.runner import Counters, EvalResult, Fault, budget_spent, hung_before

Evaluate = Callable[[Evaluation, Limits], EvalResult]


class MemoryExecutor:
    """Evaluations run by ``evaluate`` in this thread (no build, no process)."""

    name = "memory"

    def __init__(self, evaluate: Evaluate) -> None:
        self.evaluate = evaluate
        self.ran: list[str] = []
        self._lock = threading.Lock()

    def build(self, schemata: Schemata) -> Builds:
        return Builds()

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
        out: dict[str, EvalResult] = {}
        deadline = limits.deadline()
        hung: dict[int, str] = {}  # selector value -> the reason its evaluation hung (drop_hung)
        for _, group in schemata.split(evaluations):  # refuses a selector value the schemata lacks
            for ev in group:
                if ev.id in out:
                    continue
                if deadline is not None and time.monotonic() > deadline:
                    result = budget_spent(ev.id)
                elif ev.mutant in hung:
                    result = hung_before(ev.id, hung[ev.mutant])
                else:
                    result = self.evaluate(ev, limits)
                    if result.id != ev.id:
                        raise ValueError(f"evaluate({ev.id!r}) answered for {result.id!r}")
                    with self._lock:
                        self.ran.append(ev.id)
                    if limits.drop_hung and result.fault == Fault.HANG:
                        hung[ev.mutant] = result.reason or "hung"
                out[ev.id] = result
                if on_result is not None:
                    on_result(result)
                if counters is not None:
                    counters.add(evaluations=1)
                if progress is not None:
                    progress(1)
        return out

    def submit(
        self, schemata: Schemata, evaluations: Sequence[Evaluation], limits: Limits
    ) -> Future[dict[str, EvalResult]]:
        future: Future[dict[str, EvalResult]] = Future()
        try:
            future.set_result(self.run(schemata, evaluations, limits))
        except Exception as exc:  # handed to the caller through the future, as a real executor does
            future.set_exception(exc)
        return future

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "evaluations": len(self.ran)}

    def close(self) -> None:
        return None
