"""The local executor: simulator processes on this machine (batched, or one per evaluation)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from hwtp.sim import procs
from hwtp.sim.buildcache import Build
from hwtp.sim.executors.base import Builds, Schemata, in_thread
from hwtp.sim.job import Evaluation, Job, Limits
from hwtp.sim.runner import Counters, EvalResult, run_job


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
    deadline: float | None = None,
) -> dict[str, EvalResult]:
    """Run evaluations of one build batched over ``jobs`` processes, or one process each
    (``isolated``), within ``deadline`` (``time.monotonic()``; default: ``limits.total_s`` from
    now) and dropping hung states as ``limits.drop_hung`` says."""
    if not evaluations:
        return {}
    if deadline is None:
        deadline = limits.deadline()
    options: dict[str, Any] = {
        "counters": counters, "progress": progress, "on_result": on_result, "deadline": deadline,
        "drop_hung": limits.drop_hung,
    }
    if isolated:

        def one(ev: Evaluation) -> EvalResult:
            return run_job(build, Job(design, (ev,), limits=limits), workdir, **options)[0]

        done = procs.map_threads(one, list(evaluations), jobs)
    else:
        done = run_job(build, Job(design, tuple(evaluations), limits=limits), workdir, jobs=jobs, **options)
    return {r.id: r for r in done}


class LocalExecutor:
    """Simulator processes on this machine: ``jobs`` batched processes (or one per evaluation).
    A schemata of several parts builds them ``jobs`` at once, and its parts share the ``jobs``
    processes: up to that many parts run at once, each with its share (a process at least)."""

    name = "local"

    def __init__(self, jobs: int = 1, isolated: bool = False) -> None:
        self.jobs = max(1, jobs)
        self.isolated = isolated
        self._lock = threading.Lock()
        self._builds: dict[tuple[str, str], Build] = {}  # made by this executor, by (target key, cache)

    def _made(self, schemata: Schemata) -> tuple[tuple[Build, ...], Builds]:
        def one(i: int) -> tuple[Build, bool]:
            target = schemata.targets[i]
            key = (target.key, str(target.cache_root))
            with self._lock:
                known = self._builds.get(key)
            if known is not None:
                return known, False
            build = target.build()
            with self._lock:
                self._builds[key] = build
            return build, True

        made = procs.map_threads(one, list(range(len(schemata.targets))), self.jobs)
        builds = tuple(b for b, _ in made)
        return builds, Builds.of([b for b, fresh in made if fresh])

    def build(self, schemata: Schemata) -> Builds:
        return self._made(schemata)[1]

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
        groups = schemata.split(evaluations)
        if not groups:
            return {}
        builds, _ = self._made(schemata)
        design = schemata.targets[0].design
        deadline = limits.deadline()  # one budget for every part, counted from here
        if len(groups) == 1:
            i, group = groups[0]
            return run_batched(
                builds[i], design, group, limits, self.jobs, self.isolated, progress, counters, on_result, workdir,
                deadline,
            )
        share = max(1, self.jobs // len(groups))

        def run(item: tuple[int, list[Evaluation]]) -> dict[str, EvalResult]:
            i, group = item
            return run_batched(
                builds[i], design, group, limits, share, self.isolated, progress, counters, on_result, workdir,
                deadline,
            )

        out: dict[str, EvalResult] = {}
        for done in procs.map_threads(run, groups, self.jobs):
            out.update(done)
        return out

    def submit(
        self, schemata: Schemata, evaluations: Sequence[Evaluation], limits: Limits
    ) -> Future[dict[str, EvalResult]]:
        return in_thread(lambda: self.run(schemata, evaluations, limits), "hwtp-local")

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def close(self) -> None:
        return None
