"""Run evaluations in simulator processes: batched, watched, and restarted after a crash.

One process runs many evaluations (the harness streams a result line per evaluation). Two
budgets, counted apart: start-up (process start and elaboration, until the harness reports
it is ready; ``Limits.startup_s`` CPU seconds of the process, with a wall-clock backstop)
and each evaluation's own wall clock (``Limits.wall_s``, from the moment the previous
result, or the ready line, was written). A watchdog kills a process whose current
evaluation exceeds its budget (that evaluation is a ``timeout``, the mutant possibly
non-terminating); a process that dies marks the evaluation it held as ``error`` with the
simulator's message (a design fault: ``$finish``, ``$fatal``, a combinational loop) or the
log tail, and the rest are re-run in a fresh process. A process that cannot get ready is not
retried: the design (or the toolchain) is broken. The number of results always equals the
number of evaluations.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

from hwtp import env
from hwtp.errors import DesignError, SimulationError
from hwtp.sim import procs
from hwtp.sim.buildcache import Build
from hwtp.sim.job import Evaluation, Job, Limits

log = logging.getLogger("hwtp.sim")
_LOG_TAIL_LINES = 20
_POLL_S = 0.05
#: Seconds a process may take to exit after its last result (cocotb's shutdown).
_SHUTDOWN_S = 10.0


class EvalStatus(str, Enum):
    """What one simulator run of tests gave: an evaluation of a plan on one state, or a
    ``hwtp ci`` run of the user's testbench on one state."""

    PASS = "pass"  # noqa: S105  (a status, not a password)
    FAIL = "fail"
    TIMEOUT = "timeout"  # over its wall-clock budget (or not run: see the fault)
    ERROR = "error"  # the simulator process died or wrote no result


class Fault(str, Enum):
    """Why a ``timeout``/``error`` happened, when it is known."""

    HANG = "hang"  # the evaluation exceeded its wall-clock budget
    DESIGN = "design"  # the design stopped the simulator
    BUDGET = "budget"  # not run: the caller's overall time budget was spent


@dataclass(frozen=True)
class EvalResult:
    """What one evaluation gave, and why when it is a ``timeout``/``error`` (``fault``)."""

    id: str
    status: EvalStatus
    first: dict[str, Any] | None = None
    tests: tuple[dict[str, Any], ...] = ()
    cycles: int = 0
    reason: str | None = None
    seconds: float = 0.0  # time the harness spent on it, inside the simulator
    fault: Fault | None = None

    def as_line(self) -> dict[str, Any]:
        """The JSON form the harness writes (and the run store keeps)."""
        line = {
            "id": self.id,
            "status": self.status.value,
            "first": self.first,
            "tests": list(self.tests),
            "cycles": self.cycles,
            "reason": self.reason,
            "seconds": self.seconds,
        }
        if self.fault:
            line["fault"] = self.fault.value
        return line

    @classmethod
    def from_line(cls, data: dict[str, Any]) -> EvalResult:
        return cls(
            id=str(data["id"]),
            status=EvalStatus(data["status"]),
            first=data.get("first"),
            tests=tuple(data.get("tests", ())),
            cycles=int(data.get("cycles", 0)),
            reason=data.get("reason"),
            seconds=float(data.get("seconds", 0.0)),
            fault=Fault(data["fault"]) if data.get("fault") else None,
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


# What a simulator prints when the design itself stops the simulation (Verilator, Icarus).
_FAULTS = (
    (re.compile(r"%Error-DIDNOTCONVERGE:\s*(?P<msg>.*)"), "combinational loop: {msg}"),
    (re.compile(r"%Fatal:\s*(?P<msg>.*)"), "$fatal: {msg}"),
    (re.compile(r"%Error:\s*(?P<msg>\S+:\d+: Verilog \$stop.*)"), "$stop at {msg}"),
    (re.compile(r"^- (?P<msg>\S+:\d+): Verilog \$finish"), "$finish at {msg}"),
    (re.compile(r"(?P<msg>\S+:\d+: \$finish called at .*)"), "$finish at {msg}"),
    (re.compile(r"^(?P<msg>FATAL: .*)"), "$fatal: {msg}"),
    (re.compile(r"%Error:\s*(?P<msg>\S+:\d+: .*)"), "{msg}"),
)
_BUILD_PATH = re.compile(r"(?<![\w.-])(?:/[^\s:]*/)?src/(?=\S+:\d+)")  # a build's sources folder


def design_fault(log_text: str) -> str | None:
    """The simulator's message when the design stopped the simulation, else None."""
    for line in log_text.splitlines():
        for pattern, template in _FAULTS:
            match = pattern.search(line.strip())
            if match:
                return template.format(msg=_BUILD_PATH.sub("", match.group("msg").strip()))
    return None


class ResultTail:
    """Reads a results file incrementally: only complete new lines, each parsed once.

    The harness's first line (``{"ready": true}``) sets :attr:`ready`; it is no result."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.ready = False
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
                    data = json.loads(line)
                    if "ready" in data and "id" not in data:
                        self.ready = True
                        continue
                    new.append(EvalResult.from_line(data))
                except (ValueError, KeyError, TypeError):
                    break
        self.offset += end
        self.results.extend(new)
        return new


class Ending(Enum):
    """Why a simulator process ended before its last evaluation."""

    TIMEOUT = "timeout"  # the current evaluation exceeded its budget: killed
    ERROR = "error"  # it died after it was ready
    STARTUP = "startup"  # it died before it was ready
    STARTUP_TIMEOUT = "startup-timeout"  # not ready within the start-up budget (CPU s): killed
    STARTUP_STALLED = "startup-stalled"  # not ready within the wall-clock backstop, under its CPU budget
    BUDGET = "budget"  # the caller's overall deadline passed: killed


@dataclass(frozen=True)
class _Ended:
    """How one simulator process ended."""

    results: list[EvalResult]
    kind: Ending | None  # None: every evaluation has its result
    log: str
    ready: bool
    code: int | None


def _run_process(
    build: Build,
    job: Job,
    workdir: Path,
    plusargs: Sequence[str],
    counters: Counters,
    on_result: Callable[[EvalResult], None] | None = None,
    deadline: float | None = None,
) -> _Ended:
    """Start one process on ``job`` and watch it until it ends or a budget is spent.

    ``on_result`` receives each result as soon as the harness has written it; on an
    interrupt the process group is killed and what was written is still delivered.
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
    tail = ResultTail(results_path)
    limits = job.limits
    kind: Ending | None = None

    def deliver() -> bool:
        new = tail.poll()
        for result in new:
            counters.add(evaluations=1)
            if on_result:
                on_result(result)
        return bool(new)

    try:
        with (
            log_path.open("w", encoding="utf-8") as log_fh,
            procs.supervised(argv, cwd=workdir, env=environ, stdout=log_fh, stderr=subprocess.STDOUT) as proc,
        ):
            counters.add(processes=1)
            since = time.monotonic()
            clock = procs.CpuClock(proc)  # the start-up budget, in the process's own CPU seconds
            while True:
                finished = procs.wait(proc, _POLL_S)
                was_ready = tail.ready
                progressed = deliver()
                now = time.monotonic()
                if progressed or (tail.ready and not was_ready):
                    since = now  # the next evaluation's budget starts now
                if finished:
                    break
                if len(tail.results) >= len(job.evaluations):
                    over = now - since > _SHUTDOWN_S  # all done: only cocotb's shutdown is left
                elif deadline is not None and now > deadline:
                    kind, over = Ending.BUDGET, True
                elif not tail.ready:
                    kind = _startup_over(clock, limits)
                    over = kind is not None
                else:
                    over = now - since > limits.wall_s
                    kind = Ending.TIMEOUT if over else None
                if over:
                    break  # leaving the block kills the group
    finally:
        deliver()  # what the simulator wrote before it ended or was stopped (an interrupt too)
    if kind is None and len(tail.results) < len(job.evaluations):
        kind = Ending.ERROR if tail.ready else Ending.STARTUP
    return _Ended(tail.results, kind, log_tail(log_path, 400), tail.ready, proc.returncode)


def _startup_over(clock: procs.CpuClock, limits: Limits) -> Ending | None:
    """Whether a simulator not yet ready has passed its start-up budget: CPU seconds of its own
    (so a starved process on a busy machine is not taken for a design that never settles), or
    the wall-clock backstop (:func:`hwtp.sim.procs.backstop`: stuck, or given almost no CPU)."""
    overrun = clock.over(limits.startup_s)
    if overrun is None:
        return None
    return Ending.STARTUP_TIMEOUT if overrun == procs.Overrun.CPU else Ending.STARTUP_STALLED


def _startup_failure(ended: _Ended, limits: Limits) -> Exception:
    """The error for a simulator process that never got ready (not retried: every process
    of this build would fail the same way)."""
    fault = design_fault(ended.log)
    if fault:
        return DesignError(f"the design stopped the simulator at start-up: {fault}")
    short = "\n".join(ended.log.splitlines()[-_LOG_TAIL_LINES:])
    if ended.kind == Ending.STARTUP_TIMEOUT:
        return DesignError(
            f"the simulator was not ready within its start-up budget of {limits.startup_s:g} CPU s: the design "
            f"may never settle at time 0 (a loop in an initial block, a combinational loop); log tail:\n{short}"
        )
    if ended.kind == Ending.STARTUP_STALLED:
        return SimulationError(
            f"the simulator was not ready after {procs.backstop(limits.startup_s):g} s of wall-clock time, having "
            f"used less than its start-up budget of {limits.startup_s:g} CPU s: it is stuck, or the machine gives "
            f"it almost no CPU (other work, or a high nice value); log tail:\n{short}"
        )
    return SimulationError(
        f"the simulator process exited before it was ready (exit code {ended.code}); log tail:\n{short}"
    )


@dataclass(frozen=True)
class _Context:
    """What every chunk of one :func:`run_job` call shares."""

    build: Build
    workdir: Path | None
    plusargs: Sequence[str]
    counters: Counters
    progress: Callable[[int], None] | None
    on_result: Callable[[EvalResult], None] | None
    deadline: float | None
    drop_hung: bool


def run_job(
    build: Build,
    job: Job,
    workdir: Path | None = None,
    plusargs: Sequence[str] = (),
    counters: Counters | None = None,
    progress: Callable[[int], None] | None = None,
    on_result: Callable[[EvalResult], None] | None = None,
    *,
    jobs: int = 1,
    deadline: float | None = None,
    drop_hung: bool = False,
) -> list[EvalResult]:
    """Run every evaluation of ``job``, restarting after crashes; results in job order.

    ``jobs`` > 1 splits the evaluations into that many contiguous chunks, one process each,
    run at once. ``on_result`` is called with every result as soon as it exists (for a
    store that must not lose finished work if hwtp is killed). ``deadline``
    (``time.monotonic()``) is an overall budget: evaluations not run by then are ``timeout``
    with fault ``budget``. ``drop_hung``: once an evaluation of a state exceeds its budget,
    the state's later evaluations are not run (``timeout``, fault ``hang``): each would hang
    as well; once a golden (mutant 0) evaluation stops the simulator, the evaluations up to
    the next golden one are not run (``error``, fault ``design``): they are compared with
    that golden run.
    """
    evaluations = list(job.evaluations)
    jobs = max(1, min(jobs, len(evaluations)))
    lock = threading.Lock()

    def tick(n: int) -> None:
        if progress:
            with lock:
                progress(n)

    ctx = _Context(
        build, workdir, plusargs, counters or Counters(), tick if jobs > 1 else progress, on_result, deadline, drop_hung
    )
    if jobs == 1:
        return _run_chunk(job, ctx)
    size = -(-len(evaluations) // jobs)
    chunks = [replace(job, evaluations=tuple(evaluations[i : i + size])) for i in range(0, len(evaluations), size)]
    out: list[EvalResult] = []
    for part in procs.map_threads(lambda chunk: _run_chunk(chunk, ctx), chunks, len(chunks)):
        out.extend(part)
    return out


def _run_chunk(job: Job, ctx: _Context) -> list[EvalResult]:
    """:func:`run_job` in one process at a time (a fresh one after each fault)."""
    pending = list(job.evaluations)
    results: dict[str, EvalResult] = {}
    wall = job.limits.wall_s

    def put(result: EvalResult) -> None:
        results[result.id] = result
        if ctx.on_result:
            ctx.on_result(result)
        if ctx.progress:
            ctx.progress(1)

    for ev in list(pending):
        refused = over_cycle_limit(ev, job.limits)
        if refused:
            pending.remove(ev)
            put(refused)
    with procs.tempdir("sim", ctx.workdir) as tmp:
        attempt = 0
        while pending:
            if ctx.deadline is not None and time.monotonic() > ctx.deadline:
                for ev in pending:
                    put(budget_spent(ev.id))
                break
            batch = replace(job, evaluations=tuple(pending))
            ended = _run_process(
                ctx.build, batch, Path(tmp) / f"p{attempt}", ctx.plusargs, ctx.counters, ctx.on_result, ctx.deadline
            )
            attempt += 1
            procs.check()
            for r in ended.results:
                results[r.id] = r
            if ctx.progress and ended.results:
                ctx.progress(len(ended.results))
            pending = pending[len(ended.results) :]
            if not pending or ended.kind is None:
                continue
            if ended.kind in (Ending.STARTUP, Ending.STARTUP_TIMEOUT, Ending.STARTUP_STALLED):
                raise _startup_failure(ended, job.limits)
            if ended.kind == Ending.BUDGET:
                continue  # the loop head marks the rest
            held = pending.pop(0)
            if ended.kind == Ending.TIMEOUT:
                reason = f"evaluation exceeded {wall:g} s"
                put(EvalResult(held.id, EvalStatus.TIMEOUT, reason=reason, fault=Fault.HANG))
                if ctx.drop_hung:
                    skipped = [ev for ev in pending if ev.mutant == held.mutant]
                    pending = [ev for ev in pending if ev.mutant != held.mutant]
                    for ev in skipped:
                        put(hung_before(ev.id, reason))
                continue
            put(died(held.id, ended.log))
            if ctx.drop_hung and results[held.id].fault == Fault.DESIGN and held.mutant == 0:
                # golden stops the simulator: mutants up to the next golden evaluation prove nothing
                while pending and pending[0].mutant != 0:
                    ev = pending.pop(0)
                    put(
                        EvalResult(
                            ev.id,
                            EvalStatus.ERROR,
                            reason=f"not run: golden {results[held.id].reason}",
                            fault=Fault.DESIGN,
                        )
                    )
    return [results[ev.id] for ev in job.evaluations]


def budget_spent(id_: str) -> EvalResult:
    """The result of an evaluation not run because the call's time budget was spent."""
    return EvalResult(id_, EvalStatus.TIMEOUT, reason="not run: the time budget was spent", fault=Fault.BUDGET)


def hung_before(id_: str, reason: str) -> EvalResult:
    """The result of an evaluation not run because an earlier one of its state hung (``drop_hung``)."""
    return EvalResult(id_, EvalStatus.TIMEOUT, reason=f"{reason} (an earlier evaluation)", fault=Fault.HANG)


def over_cycle_limit(ev: Evaluation, limits: Limits) -> EvalResult | None:
    """The ``timeout`` of an evaluation that would simulate more cycles than the limit (it is
    not run), else None."""
    if ev.cycles <= limits.max_cycles:
        return None
    return EvalResult(
        ev.id, EvalStatus.TIMEOUT, reason=f"plan simulates {ev.cycles} cycles, over the limit of {limits.max_cycles}"
    )


def died(id_: str, log_text: str) -> EvalResult:
    """The result of the evaluation a simulator process held when it died: the design's
    message when the design stopped it (fault ``design``), else the log tail."""
    fault = design_fault(log_text)
    if fault:
        return EvalResult(id_, EvalStatus.ERROR, reason=f"simulator process died: {fault}", fault=Fault.DESIGN)
    short = "\n".join(log_text.splitlines()[-_LOG_TAIL_LINES:])
    return EvalResult(id_, EvalStatus.ERROR, reason=f"simulator process died; log tail:\n{short}")
