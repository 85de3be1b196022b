"""Run evaluations in simulator processes: batched, watched, and restarted after a crash.

One process runs many evaluations (the harness streams a result line per evaluation). A
watchdog kills a process whose current evaluation exceeds its wall-clock budget (that
evaluation is a ``timeout``); a process that dies marks the evaluation it held as
``error`` with the log tail, and the rest are re-run in a fresh process. The number of
results always equals the number of evaluations.
"""

from __future__ import annotations

import json
import logging
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hwtp import env
from hwtp.sim.buildcache import Build
from hwtp.sim.job import Evaluation, Job, Limits

log = logging.getLogger("hwtp.sim")
#: Seconds a simulator process may take to start before its first evaluation counts.
STARTUP_GRACE_S = 60.0
_LOG_TAIL_LINES = 20


@dataclass(frozen=True)
class EvalResult:
    """What one evaluation gave: ``pass``, ``fail``, ``timeout`` or ``error``."""

    id: str
    status: str
    first: dict[str, Any] | None = None
    tests: tuple[dict[str, Any], ...] = ()
    cycles: int = 0
    reason: str | None = None
    seconds: float = 0.0  # time the harness spent on it, inside the simulator

    def as_line(self) -> dict[str, Any]:
        """The JSON form the harness writes (and the run store keeps)."""
        return {"id": self.id, "status": self.status, "first": self.first, "tests": list(self.tests),
                "cycles": self.cycles, "reason": self.reason, "seconds": self.seconds}

    @classmethod
    def from_line(cls, data: dict[str, Any]) -> EvalResult:
        return cls(
            id=str(data["id"]),
            status=str(data["status"]),
            first=data.get("first"),
            tests=tuple(data.get("tests", ())),
            cycles=int(data.get("cycles", 0)),
            reason=data.get("reason"),
            seconds=float(data.get("seconds", 0.0)),
        )


@dataclass
class Counters:
    """How much work was done (processes started, evaluations simulated)."""

    processes: int = 0
    evaluations: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def add(self, processes: int = 0, evaluations: int = 0) -> None:
        with self._lock:
            self.processes += processes
            self.evaluations += evaluations


def log_tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file ("" when it cannot be read)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


class ResultTail:
    """Reads a results file incrementally: only complete new lines, each parsed once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.results: list[EvalResult] = []

    def poll(self) -> list[EvalResult]:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        end = chunk.rfind(b"\n") + 1  # a line cut short by a crash is not complete
        new = []
        for line in chunk[:end].splitlines():
            if line.strip():
                try:
                    new.append(EvalResult.from_line(json.loads(line)))
                except (ValueError, KeyError):
                    break
        self.offset += end
        self.results.extend(new)
        return new


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the simulator gets SIGKILL when hwtp dies, even by ``kill -9`` (no orphans)."""
    if _PRCTL is not None:
        _PRCTL(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


def _load_prctl() -> Any:
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl() if sys.platform.startswith("linux") else None


def _run_process(
    build: Build,
    job: Job,
    workdir: Path,
    plusargs: Sequence[str],
    counters: Counters,
    on_result: Callable[[EvalResult], None] | None = None,
) -> tuple[list[EvalResult], str | None, str]:
    """Start one process on ``job``; return (results written, failure kind, log tail).

    ``on_result`` receives each result as soon as the harness has written it.
    """
    workdir = workdir.resolve()  # the simulator runs in workdir: every path it gets is absolute
    workdir.mkdir(parents=True, exist_ok=True)
    job_path, results_path, log_path = workdir / "job.json", workdir / "results.jsonl", workdir / "sim.log"
    job_path.write_text(json.dumps(job.as_data()), encoding="utf-8")
    results_path.unlink(missing_ok=True)
    environ = build.backend.environment(build.top)
    environ[env.JOB_VAR] = str(job_path)
    environ[env.RESULTS_VAR] = str(results_path)
    environ["COCOTB_RESULTS_FILE"] = str(workdir / "results.xml")
    argv = build.backend.command(build.path, build.top, plusargs)
    log.debug("$ %s", shlex.join(argv))
    counters.add(processes=1)
    tail = ResultTail(results_path)
    kind = None
    with log_path.open("w", encoding="utf-8") as log_fh:
        proc = subprocess.Popen(
            argv,
            cwd=workdir,
            env=environ,
            stdout=log_fh,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent if _PRCTL is not None else None,
        )
        last_progress, budget = time.monotonic(), STARTUP_GRACE_S + job.limits.wall_s
        while True:
            try:
                proc.wait(timeout=0.2)
                finished = True
            except subprocess.TimeoutExpired:
                finished = False
            new = tail.poll()
            for result in new:
                counters.add(evaluations=1)
                if on_result:
                    on_result(result)
            if finished:
                break
            if new:
                last_progress, budget = time.monotonic(), job.limits.wall_s + 5.0
            elif time.monotonic() - last_progress > budget:
                proc.kill()
                proc.wait()
                kind = "timeout"
                for result in tail.poll():
                    counters.add(evaluations=1)
                    if on_result:
                        on_result(result)
                break
    if kind is None and len(tail.results) < len(job.evaluations):
        kind = "error"
    return tail.results, kind, log_tail(log_path)


def run_job(
    build: Build,
    job: Job,
    workdir: Path | None = None,
    plusargs: Sequence[str] = (),
    counters: Counters | None = None,
    progress: Callable[[int], None] | None = None,
    on_result: Callable[[EvalResult], None] | None = None,
) -> list[EvalResult]:
    """Run every evaluation of ``job``, restarting after crashes; results in job order.

    ``on_result`` is called with every result as soon as it exists (for a store that must
    not lose finished work if hwtp is killed).
    """
    counters = counters or Counters()
    pending = list(job.evaluations)
    results: dict[str, EvalResult] = {}
    for ev in list(pending):
        if ev.cycles > job.limits.max_cycles:
            results[ev.id] = EvalResult(
                ev.id, "timeout", reason=f"plan simulates {ev.cycles} cycles, over the limit of {job.limits.max_cycles}"
            )
            pending.remove(ev)
            if on_result:
                on_result(results[ev.id])
    with tempfile.TemporaryDirectory(prefix="hwtp-sim-", dir=workdir) as tmp:
        attempt = 0
        while pending:
            batch = replace(job, evaluations=tuple(pending))
            got, kind, tail = _run_process(build, batch, Path(tmp) / f"p{attempt}", plusargs, counters, on_result)
            attempt += 1
            for r in got:
                results[r.id] = r
            if progress and got:
                progress(len(got))
            pending = pending[len(got) :]
            if pending and kind is not None:
                held = pending.pop(0)
                reason = (
                    f"wall-clock limit of {job.limits.wall_s:g} s exceeded"
                    if kind == "timeout"
                    else "simulator process died"
                )
                results[held.id] = EvalResult(
                    held.id, kind, reason=f"{reason}; log tail:\n{tail}" if kind == "error" else reason
                )
                if on_result:
                    on_result(results[held.id])
                if progress:
                    progress(1)
    return [results[ev.id] for ev in job.evaluations]


def run_parallel(
    build: Build,
    job: Job,
    jobs: int = 1,
    workdir: Path | None = None,
    plusargs: Sequence[str] = (),
    counters: Counters | None = None,
    progress: Callable[[int], None] | None = None,
    on_result: Callable[[EvalResult], None] | None = None,
) -> list[EvalResult]:
    """Split ``job`` into ``jobs`` contiguous chunks run by as many processes at once."""
    counters = counters or Counters()
    evaluations = list(job.evaluations)
    jobs = max(1, min(jobs, len(evaluations)))
    if jobs == 1:
        return run_job(build, job, workdir, plusargs, counters, progress, on_result)
    size = -(-len(evaluations) // jobs)
    chunks = [evaluations[i : i + size] for i in range(0, len(evaluations), size)]
    lock = threading.Lock()

    def tick(n: int) -> None:
        if progress:
            with lock:
                progress(n)

    with ThreadPoolExecutor(max_workers=len(chunks)) as pool:
        futures = [
            pool.submit(
                run_job, build, replace(job, evaluations=tuple(c)), workdir, plusargs, counters, tick, on_result
            )
            for c in chunks
        ]
        out: list[EvalResult] = []
        for f in futures:
            out.extend(f.result())
    return out


__all__ = ["Counters", "EvalResult", "Evaluation", "Limits", "run_job", "run_parallel"]
