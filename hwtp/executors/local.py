"""The local executor: today's simulator processes on this machine (batched, or one per evaluation)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hwtp.executors.base import Target
from hwtp.sim import procs
from hwtp.sim.job import Evaluation, Job, Limits
from hwtp.sim.runner import Counters, EvalResult, run_job, run_parallel


def run_batched(
    build: Any,
    design: Any,
    evaluations: Sequence[Evaluation],
    limits: Limits,
    jobs: int = 1,
    isolated: bool = False,
    progress: Callable[[int], None] | None = None,
    counters: Counters | None = None,
    on_result: Callable[[EvalResult], None] | None = None,
    workdir: Path | None = None,
) -> dict[str, EvalResult]:
    """Run evaluations batched over ``jobs`` processes, or one process each (``isolated``)."""
    if not evaluations:
        return {}
    if isolated:

        def one(ev: Evaluation) -> EvalResult:
            job = Job(design, (ev,), limits=limits)
            return run_job(build, job, workdir, counters=counters, progress=progress, on_result=on_result)[0]

        done = procs.map_threads(one, list(evaluations), jobs)
    else:
        job = Job(design, tuple(evaluations), limits=limits)
        done = run_parallel(build, job, jobs, workdir, counters=counters, progress=progress, on_result=on_result)
    return {r.id: r for r in done}


class LocalExecutor:
    """Simulator processes on this machine: ``jobs`` batched processes (or one per evaluation)."""

    name = "local"

    def __init__(self, jobs: int = 1, isolated: bool = False) -> None:
        self.jobs = max(1, jobs)
        self.isolated = isolated

    def run(
        self,
        target: Target,
        evaluations: Sequence[Evaluation],
        limits: Limits,
        progress: Callable[[int], None] | None = None,
        on_result: Callable[[EvalResult], None] | None = None,
        counters: Counters | None = None,
        workdir: Path | None = None,
    ) -> dict[str, EvalResult]:
        if not evaluations:
            return {}
        return run_batched(
            target.build(), target.design, evaluations, limits, self.jobs, self.isolated,
            progress, counters, on_result, workdir,
        )

    def close(self) -> None:
        return None
