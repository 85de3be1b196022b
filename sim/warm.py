"""Warm simulator workers: processes that stay alive between calls and take new evaluations.

A :class:`WarmPool` owns up to ``workers`` simulator processes of one build (one design and
mutant set). Each process runs the harness in warm mode: it connects to a Unix socket its
worker listens on, says it is ready (``{"ready": true, "pid": N}``), then takes evaluations
as JSON lines (the job file's entries) and writes one result line per evaluation back,
exactly the line batch mode writes. So a call costs neither a process start nor a build.

Each worker is one long-lived thread that starts its process (through :mod:`hwtp.sim.procs`,
so the process dies with hwtp: the parent-death signal follows the spawning thread, which
therefore lives as long as the process) and feeds it from the pool's shared queue, a few
evaluations ahead. The budgets and faults are those of :func:`hwtp.sim.runner.run_job`:
start-up has its own budget; each evaluation's wall clock counts from the previous result
(or from when the idle process was handed work); a process over budget is killed, its
evaluation is ``timeout`` (fault ``hang``) and the rest go back to the queue for a fresh
process; a process that dies marks its evaluation ``error`` (the design's message, or the
log tail) and the rest go back likewise. A process that never gets ready fails the calls
whose evaluations it held with the same error batch mode raises. Idle workers stop after
``idle_seconds``; a later call starts them again.

A caller that computes in Python between submits (the reward path reads plans) serves the
processes itself inside :func:`serving`, calling :func:`pump` between two steps: the workers
whose processes run step aside, so no result waits for a thread that waits for the GIL.
While anyone serves, the processes that run at once in all pools leave each serving thread a
CPU (:func:`running_cap`); the rest start on the queue when the last one stops serving.

Pools may share one :class:`Budget` (the schemata builds of one mutant set: one pool per build):
then at most its number of processes run at once across all of them, however many builds the
set has. A worker holds a share of it from the moment it is handed work (its process's start-up
included) until it has no evaluation in flight; an idle process holds none (it waits on its
socket and costs no CPU), so each build keeps its warm processes and the set still runs on
``workers`` CPUs, as a set of one build does.

:func:`pool_for` keeps pools by key (past ``max_pools`` of them, the least recently used one
retires: it finishes the work it has, then its processes stop); :func:`close_all` stops every
pool. The processes alive in all pools are bounded by :func:`process_cap`
(``$HWTP_WARM_PROCESSES``): a process that starts, or goes idle, past it asks the idlest ones
(nothing in flight, least recently handed work) to stop, as if their idle time were over.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import select
import socket
import subprocess
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any, NamedTuple, TypeVar

from hwtp import env
from hwtp.errors import ConfigError, HwtpError, SimulationError
from hwtp.sim import procs
from hwtp.sim.buildcache import Build
from hwtp.sim.cpus import usable_cpus
from hwtp.sim.job import Evaluation, Job, Limits, decode_line, encode_lines
from hwtp.sim.runner import (
    Counters,
    Ending,
    EvalResult,
    EvalStatus,
    Fault,
    _Ended,
    _startup_failure,
    _startup_over,
    died,
    log_tail,
    over_cycle_limit,
)

_T = TypeVar("_T")
_POLL_S = 0.05
#: Evaluations sent ahead to one process, so it never waits for the host between two (nor
#: while the caller's thread holds the GIL compiling the next batch), and few enough that the
#: workers end a batch together: what one process holds, the others cannot take. Measured with
#: bench/bench_rewards.py on 2 cores (3 runs each, 5 repetitions): the machine's idle CPU
#: during score_completions 10-14% at 32, 7-8% at 8, 8-9% at 4; workers alone 8-10% at 32,
#: about 4.5% at 8 and 4 (at 2, 10.5% for score_completions).
_WINDOW = 8
#: Seconds :meth:`WarmPool.close` waits for its worker threads.
_JOIN_S = 10.0


def _ready(conn: socket.socket, write: bool, timeout: float) -> tuple[bool, bool]:
    """Wait up to ``timeout`` s until ``conn`` can be read (or was closed) or, with ``write``,
    written. ``poll``, not ``select``: a server may hold more than 1024 descriptors."""
    poller = select.poll()
    poller.register(conn, select.POLLIN | (select.POLLOUT if write else 0))
    events = 0
    for _fd, mask in poller.poll(timeout * 1000):
        events |= mask
    closed = bool(events & (select.POLLHUP | select.POLLERR | select.POLLNVAL))
    return bool(events & select.POLLIN) or closed, bool(events & select.POLLOUT)


class Budget:
    """How many simulator processes may run at once across the pools that share it."""

    def __init__(self, slots: int) -> None:
        self.slots = max(1, int(slots))
        self._used = 0
        self._cond = threading.Condition()

    def acquire(self, timeout: float) -> bool:
        """Take one share, waiting up to ``timeout`` s for one; whether it was taken."""
        with self._cond:
            end = time.monotonic() + timeout
            while self._used >= self.slots:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            self._used += 1
            return True

    def release(self) -> None:
        with self._cond:
            self._used -= 1
            self._cond.notify()

    @property
    def used(self) -> int:
        """Shares taken now (processes with evaluations in flight)."""
        with self._cond:
            return self._used


class _Ticket:
    """One call's evaluations: their results, routed back to the caller through a future."""

    def __init__(self, order: list[str]) -> None:
        self.order = order
        self.results: dict[str, EvalResult] = {}
        self.future: Future[dict[str, EvalResult]] = Future()
        self.lock = threading.Lock()
        if not order:
            self.future.set_result({})

    @property
    def done(self) -> bool:
        return self.future.done()

    def put(self, result: EvalResult) -> None:
        with self.lock:
            if self.done or result.id in self.results:
                return
            self.results[result.id] = result
            if len(self.results) == len(self.order):
                self.future.set_result({key: self.results[key] for key in self.order})

    def fail(self, error: BaseException) -> None:
        with self.lock:
            if not self.done:
                self.future.set_exception(error)


class _Task(NamedTuple):
    """One queued evaluation: its caller's ticket and its socket line."""

    evaluation: Evaluation
    ticket: _Ticket
    line: bytes


class _NotReady(Exception):
    """The process never got ready: ``error`` is what the callers get."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class _Worker:
    """One thread owning one simulator process at a time (restarted after a fault).

    While a caller's thread reads plans inside :func:`serving`, the thread steps aside (parks)
    and the caller serves the process itself between two plans (:meth:`pump`): results in,
    more work out, with no hand-over of the GIL. ``lock`` says who serves the process now; the
    thread gives it up only while it parks, waits for work or polls the socket, and faults,
    restarts and budgets stay the thread's own (the pump hands it anything unusual)."""

    def __init__(self, pool: WarmPool, number: int) -> None:
        self.pool = pool
        self.used = 0.0  # when it was last handed work (the idlest process stops first past the cap)
        self.stop = False  # asked to stop its process once idle: too many processes are alive
        self.free = True  # has no evaluation in flight (the pool's accounting, under its lock)
        self.holds = False  # holds a share of the pool's budget (while it has evaluations in flight)
        self.running = False  # counted by _start_running: handed work, not yet drained (under _running_lock)
        self.pid: int | None = None  # the simulator's own pid, once ready
        self.proc: subprocess.Popen[Any] | None = None
        self.conn: socket.socket | None = None
        self.log_fh: IO[str] | None = None
        self.folder = Path()
        self.inbuf = bytearray()
        self.out = bytearray()  # lines the socket has not taken yet
        self.inflight: deque[_Task] = deque()
        self.since = 0.0  # when the evaluation in flight started (its wall budget's start)
        self.served = 0.0  # when a pump last routed a result or sent work
        self.lock = threading.Lock()
        self.pumpable = False  # parked or waiting for work, without the lock: a pump may serve it
        self.wanted = False  # a pump saw what only the thread handles (a death, a hang, an error)
        self.error: BaseException | None = None  # what a pump met routing results, for the thread
        # work was sent to a process that had sat idle, and no result came back since: were it
        # found dead now, it may have died unseen while idle (killed, or its last thread still
        # exiting when the send went through), so its evaluations get one fresh process first
        self.unproven = False
        self.thread = threading.Thread(target=self._main, name=f"hwtp-warm-{number}", daemon=True)

    # -- the thread ---------------------------------------------------------------------------

    def _main(self) -> None:
        inflight = self.inflight
        error: BaseException | None = None
        try:
            with procs.tempdir("warm") as tmp:
                self.folder = Path(tmp)
                with self.lock:
                    try:
                        self._loop(inflight)
                    finally:
                        self.pumpable = False
                        self._stop_process()
                        self._release()
        except BaseException as exc:  # never leave a caller waiting
            error = exc if isinstance(exc, (HwtpError, procs.Interrupted)) else SimulationError(
                f"warm simulator worker failed: {type(exc).__name__}: {exc}"
            )
        finally:
            for task in inflight:  # only when the pool closed or something failed
                task.ticket.fail(error or SimulationError("the warm pool was closed"))
            self.pool._exited(self)

    def _unlocked(self, pumpable: bool, wait: Callable[..., _T], *args: Any) -> _T:
        """``wait(*args)`` without the lock (a pump may serve the process meanwhile if ``pumpable``)."""
        self.pumpable = pumpable
        self.lock.release()
        try:
            return wait(*args)
        finally:
            self.lock.acquire()
            self.pumpable = False  # after the lock: a pump that saw True waits for it, not the GIL

    def _loop(self, inflight: deque[_Task]) -> None:
        pool = self.pool
        out = self.out
        self.since = time.monotonic()
        while True:
            if self.error is not None:
                raise self.error
            if inflight:
                new = pool._take(self, _WINDOW - len(inflight), wait=False)
            else:
                self._release()  # nothing in flight: another build's worker may run
                if self.proc is not None:
                    _trim(pool.max_alive, idle=self)  # more processes alive than allowed: the idlest stop
                new = self._unlocked(self.conn is not None, pool._take, self, _WINDOW, True)
                if new is None and inflight and not pool._closed:
                    new = []  # a pump handed it work as it gave up waiting: it serves that first
            if new is None:
                return  # idle past idle_seconds, or the pool is closing
            if new:
                idle = not inflight
                inflight.extend(new)
                if idle and not self._acquire():
                    return  # the pool closed while this worker waited for its share
                for task in new:
                    out += task.line
                # sent at once (each wait for the GIL counts when the caller's thread is busy)
                if self.proc is not None and idle:
                    if self._send(out):
                        self.unproven = True
                    else:
                        self._stop_process()  # it died while idle: no evaluation of its own to blame
                if self.proc is None:
                    try:
                        self._start()
                    except _NotReady as exc:
                        for task in inflight:
                            task.ticket.fail(exc.error)
                        inflight.clear()
                        return
                    self._send(out)  # a failure shows below as the process's death
                if idle:
                    self.since = time.monotonic()  # the first evaluation's budget starts now
            if not inflight:
                continue
            if not self.wanted and _served_for() > 0:
                self._unlocked(True, self._park)
                continue
            crashed = False
            assert self.conn is not None
            conn = self.conn
            try:
                readable, writable = self._unlocked(False, _ready, conn, bool(out), _POLL_S)
                if writable and not self._send(out):
                    crashed = True
                if readable:
                    data = conn.recv(1 << 16)
                    crashed = not data
                    if self._deliver(data, inflight):
                        self.since = time.monotonic()
            except (BlockingIOError, InterruptedError):
                pass  # a pump took what woke the poll
            except OSError:  # the process closed its end: it died
                crashed = True
            self.wanted = False  # whatever a pump saw, this round looked at it
            if pool._closed:
                return
            procs.check()
            over = bool(inflight) and time.monotonic() - self.since > pool.limits.wall_s
            if crashed or over:
                self._fault(Ending.TIMEOUT if over and not crashed else Ending.ERROR, inflight)
                out.clear()  # the rest went back to the queue, for a fresh process
                self.since = time.monotonic()

    def _park(self) -> None:
        """Wait while a caller serves the process (:func:`serving`), or until it wants this thread."""
        pool = self.pool
        with pool._cond:
            while not pool._closed and not self.wanted:
                left = _served_for()
                if left <= 0:
                    return
                pool._cond.wait(left)

    # -- a serving caller's side (any thread but this one; under the lock) ------------------

    def pump(self) -> None:
        """Serve the process once if the thread stepped aside: route the results that arrived,
        send more work. Deaths, hangs and routing errors go to the thread (:attr:`wanted`)."""
        if not self.pumpable or self.wanted:
            return
        if not self.lock.acquire(blocking=False):
            return  # the thread is serving it itself (it woke): no wait for it here
        try:
            if self.pumpable and not self.wanted and self.conn is not None:
                self._pump(self.conn)
        except Exception as exc:  # the thread raises it, failing its callers as its own
            self.error = exc
            self._want()
        finally:
            self.lock.release()

    def _pump(self, conn: socket.socket) -> None:
        pool, inflight = self.pool, self.inflight
        if inflight:
            try:
                data = conn.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:
                data = b""
            if data == b"":
                self._want()  # dead: the thread settles it
                return
            if data:  # routed before any verdict, as the thread does: a result just in counts
                before = len(inflight)
                if self._deliver(data, inflight):
                    self.since = self.served = time.monotonic()
                    pool._count_served(before - len(inflight))
                    if not inflight:
                        self._release()  # nothing in flight: another build's worker may run
            if inflight and time.monotonic() - self.since > pool.limits.wall_s:
                self._want()  # over its budget: the thread settles it
                return
        if len(inflight) < _WINDOW and pool._queue:
            idle, share = not inflight, not self.holds
            if share:
                if not pool.budget.acquire(0.0):
                    return  # other pools' processes hold the budget: the thread waits its turn
                self.holds = True
            new = pool._take(self, _WINDOW - len(inflight), wait=False)
            if not new:
                if share:
                    self._release()
                return
            inflight.extend(new)
            for task in new:
                self.out += task.line
            self.served = time.monotonic()
            if idle:
                self.since = self.served
                self.unproven = True
        if self.out and not self._send(self.out):
            self._want()

    def _want(self) -> None:
        """Hand the process back to the thread."""
        with self.pool._cond:
            self.wanted = True
            self.pool._cond.notify_all()

    def _acquire(self) -> bool:
        """Wait for a share of the pool's budget (unless a pump took it for this worker); False
        when the pool closes meanwhile."""
        if self.holds:
            return True
        while not self.pool.budget.acquire(_POLL_S):
            if self.pool._closed:
                return False
            procs.check()
        self.holds = True
        return True

    def _release(self) -> None:
        """Nothing in flight: give back the budget share and the running count."""
        if self.holds:
            self.holds = False
            self.pool.budget.release()
        if self.running:
            _stop_running(self)

    def _send(self, out: bytearray) -> bool:
        """Send what the socket takes of ``out`` now; False when the process has gone."""
        assert self.conn is not None
        try:
            del out[: self.conn.send(out)]
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            return False
        return True

    # -- results and faults -------------------------------------------------------------------

    def _deliver(self, data: bytes, inflight: deque[_Task]) -> bool:
        """Route every complete result line in ``data`` to its caller; whether any arrived."""
        self.inbuf += data
        end = self.inbuf.rfind(b"\n") + 1
        if not end:
            return False
        lines, self.inbuf = bytes(self.inbuf[:end]), self.inbuf[end:]
        got = 0
        try:
            for line in lines.splitlines():
                if not line.strip():
                    continue
                result = EvalResult.from_line(decode_line(line))
                task = inflight.popleft()
                if task.evaluation.id != result.id:
                    raise SimulationError(f"warm simulator answered {result.id!r} for {task.evaluation.id!r}")
                task.ticket.put(result)
                got += 1
                self.unproven = False
        finally:
            if got:
                self.pool.counters.add(evaluations=got)
        return bool(got)

    def _fault(self, kind: Ending, inflight: deque[_Task]) -> None:
        """The process is over budget or dead: stop it, settle the evaluation it held (unless
        its result arrived meanwhile), give the rest back to the queue."""
        unproven, holding = self.unproven and kind == Ending.ERROR, len(inflight)
        self._stop_process(drain=inflight)  # forgets the process: the next one is proven fresh
        if not inflight:
            return
        procs.check()
        if unproven and len(inflight) == holding:  # dead before any result: nothing shows it ran one
            self.pool._requeue(list(inflight))
            inflight.clear()
            return
        held = inflight.popleft()
        ev = held.evaluation
        if kind == Ending.TIMEOUT:
            result = EvalResult(ev.id, EvalStatus.TIMEOUT,
                                reason=f"evaluation exceeded {self.pool.limits.wall_s:g} s", fault=Fault.HANG)
        else:
            result = died(ev.id, log_tail(self.folder / "sim.log", 400))
        held.ticket.put(result)
        self.pool._requeue(list(inflight))
        inflight.clear()

    # -- the process ----------------------------------------------------------------------------

    def _start(self) -> None:
        """Start a simulator process in warm mode and wait until it is ready."""
        pool = self.pool
        build = pool.build
        address = self.folder / "warm.sock"
        address.unlink(missing_ok=True)
        job_path, log_path = self.folder / "job.json", self.folder / "sim.log"
        job_path.write_text(pool._header, encoding="utf-8")
        environ = build.backend.environment(build.top)
        environ[env.JOB_VAR] = str(job_path)
        environ[env.WARM_VAR] = str(address)
        environ["COCOTB_RESULTS_FILE"] = str(self.folder / "results.xml")
        argv = build.backend.command(build.path, build.top, ())
        self.inbuf = bytearray()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with listener:
            listener.bind(str(address))
            listener.listen(1)
            listener.settimeout(_POLL_S)
            self.log_fh = log_path.open("w", encoding="utf-8")
            self.proc = procs.spawn(argv, cwd=self.folder, env=environ, stdout=self.log_fh, stderr=subprocess.STDOUT)
            pool.counters.add(processes=1)
            _admit(self)
            clock = procs.CpuClock(self.proc)
            ready: dict[str, Any] | None = None
            kind = Ending.STARTUP
            while ready is None:
                procs.check()
                if pool._closed:
                    raise _NotReady(SimulationError("the warm pool was closed"))
                over = _startup_over(clock, pool.limits)
                if over is not None:
                    kind = over
                    break
                if self.conn is None:
                    with contextlib.suppress(TimeoutError):
                        self.conn, _ = listener.accept()
                        self.conn.setblocking(False)
                else:
                    readable, _ = _ready(self.conn, False, _POLL_S)
                    if readable:
                        data = self.conn.recv(1 << 16)
                        if not data:
                            break
                        self.inbuf += data
                        if b"\n" in self.inbuf:
                            first, _, rest = bytes(self.inbuf).partition(b"\n")
                            self.inbuf = bytearray(rest)
                            ready = json.loads(first)
                            continue
                if self.proc.poll() is not None:
                    break
        if ready is None:
            self._stop_process()
            ended = _Ended([], kind, log_tail(log_path, 400), False, self.proc.returncode if self.proc else None)
            raise _NotReady(_startup_failure(ended, pool.limits))
        self.pid = int(ready.get("pid", 0)) or None

    def _stop_process(self, drain: deque[_Task] | None = None) -> None:
        """Kill the process group and forget it; results it wrote before dying go to ``drain``."""
        if self.proc is not None:
            procs.kill(self.proc)
            with _alive_lock:
                _alive.discard(self)
        if self.conn is not None:
            if drain is not None:
                with contextlib.suppress(OSError, ValueError, SimulationError):
                    self.conn.setblocking(True)
                    self.conn.settimeout(1.0)
                    while drain:
                        data = self.conn.recv(1 << 16)
                        if not data:
                            break
                        self._deliver(data, drain)
            self.conn.close()
        if self.log_fh is not None:
            self.log_fh.close()
        self.proc = self.conn = self.log_fh = None
        self.pid = None
        self.unproven = False


class WarmPool:
    """Up to ``workers`` warm simulator processes of one build, shared by every caller.

    ``run`` may be called from many threads at once; each call gets exactly its own results.
    The number of processes is at most ``workers`` and at most one per CPU; they start when
    work arrives and stop after ``idle_seconds`` without any. ``budget``: shared with other
    pools (:class:`Budget`), the processes that run at once in all of them; default: this
    pool's own, of ``workers``.
    """

    def __init__(
        self,
        build: Build,
        design: Any,
        workers: int = 1,
        limits: Limits | None = None,
        idle_seconds: float = 300.0,
        budget: Budget | None = None,
    ) -> None:
        self.build = build
        self.design = design
        self.limits = limits or Limits()
        self.workers = max(1, min(int(workers), usable_cpus()))
        self.budget = budget or Budget(self.workers)
        self.max_alive = process_cap()
        self.idle_seconds = float(idle_seconds)
        self.counters = Counters()
        self._header = json.dumps(Job(design, (), limits=self.limits).as_data())
        self._cond = threading.Condition()
        self._queue: deque[_Task] = deque()
        self._live: set[_Worker] = set()
        self._free = 0
        self._made = 0
        self._closed = False
        self._served_n = 0  # results routed by serving callers (see serving)
        _register(self)

    @property
    def closed(self) -> bool:
        return self._closed

    def run(self, evaluations: Sequence[Evaluation]) -> dict[str, EvalResult]:
        """Run ``evaluations`` (results as :func:`hwtp.scoring.score.run_evaluations` gives them, by id)."""
        return self.submit(evaluations).result()

    def submit(self, evaluations: Sequence[Evaluation]) -> Future[dict[str, EvalResult]]:
        """Queue ``evaluations`` and return at once: the future gives what :meth:`run` returns
        (for callers that compile the next batch meanwhile, or wait in an event loop with
        ``asyncio.wrap_future``)."""
        if self._closed:
            raise SimulationError("the warm pool is closed")
        unique: dict[str, Evaluation] = {}
        for ev in evaluations:
            unique.setdefault(ev.id, ev)  # one run per id, as run_evaluations' result dict
        ticket = _Ticket(list(unique))
        runs = []
        for ev in unique.values():
            refused = over_cycle_limit(ev, self.limits)
            if refused:
                ticket.put(refused)
            else:
                runs.append(ev)
        tasks = [_Task(ev, ticket, line) for ev, line in zip(runs, encode_lines(runs), strict=True)]
        if tasks:
            with self._cond:
                if self._closed:
                    raise SimulationError("the warm pool is closed")
                self._queue.extend(tasks)
                self._grow()
                # a serving caller hands the work out itself at its next pump (no thread woken to
                # wait for the GIL); a process not yet started or not parked needs its thread
                if not getattr(_local, "serving", False) or not all(w.pumpable for w in self._live):
                    self._cond.notify_all()
        return ticket.future

    def _count_served(self, results: int) -> None:
        with self._cond:
            self._served_n += results

    def pids(self) -> list[int]:
        """Process ids of the running simulators (the harness's own, not the reaper's)."""
        with self._cond:
            return sorted(w.pid for w in self._live if w.pid)

    def stats(self) -> dict[str, int]:
        """Workers alive and busy (handed work not yet all answered), evaluations queued,
        processes started, evaluations run, and how many of their results a serving caller
        routed (:func:`serving`)."""
        with self._cond:
            return {
                "workers": len(self._live),
                "busy": sum(1 for w in self._live if w.running),
                "queued": len(self._queue),
                "processes": self.counters.processes,
                "evaluations": self.counters.evaluations,
                "served": self._served_n,
            }

    def retire(self) -> None:
        """Finish the work already given, then stop every process (as if idle at once)."""
        with self._cond:
            self.idle_seconds = 0.0
            self._cond.notify_all()

    def close(self) -> None:
        """Stop every process now; calls still waiting fail with :class:`SimulationError`."""
        with self._cond:
            if self._closed and not self._live:
                return
            self._closed = True
            error = SimulationError("the warm pool was closed")
            for task in self._queue:
                task.ticket.fail(error)
            self._queue.clear()
            workers = list(self._live)
            self._cond.notify_all()
        for worker in workers:
            if worker.thread is not threading.current_thread():
                worker.thread.join(_JOIN_S)
        for worker in workers:  # a thread stuck past the join: its process goes anyway
            proc = worker.proc
            if proc is not None:
                procs.kill(proc)

    def __enter__(self) -> WarmPool:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- the workers' side (every method below runs under or takes self._cond) ---------------

    def _grow(self) -> None:
        """Start workers while the queue holds more than the free ones will take at once."""
        while len(self._live) < self.workers and len(self._queue) > self._free * _WINDOW:
            self._made += 1
            worker = _Worker(self, self._made)
            self._live.add(worker)
            self._free += 1
            worker.thread.start()

    def _take(self, worker: _Worker, room: int, wait: bool) -> list[_Task] | None:
        """Up to ``room`` queued evaluations for ``worker``; with ``wait`` (it has none in
        flight) block until some arrive, or return None when idle too long or closing."""
        with self._cond:
            if wait and not worker.free:
                worker.free = True
                self._free += 1
            deadline = time.monotonic() + self.idle_seconds
            while True:
                if self._closed:
                    return None
                if wait and worker.inflight:
                    return []  # a pumping caller handed it work meanwhile
                while self._queue and self._queue[0].ticket.done:
                    self._queue.popleft()  # its caller already failed
                # a worker with nothing in flight starts only if the serving callers leave a CPU
                if self._queue and (worker.running or _start_running(worker)):
                    break
                if not wait:
                    return []
                if worker.stop:  # more processes are alive than allowed, this one the idlest (_trim)
                    worker.stop = False
                    return None
                # idle since its last work, the pump's included (it serves without waking the thread)
                deadline = max(deadline, worker.served + self.idle_seconds)
                remaining = min(deadline, time.monotonic() + self.idle_seconds) - time.monotonic()
                if remaining <= 0:
                    return None
                # while callers serve, look again after a lease: a pump may have handed this
                # worker work, and submits inside serving() wake no thread
                self._cond.wait(min(remaining, _LEASE_S) if _servers else remaining)
            share = -(-len(self._queue) // max(1, len(self._live)))  # the others get their part
            room = min(room, max(1, share))
            taken: list[_Task] = []
            while self._queue and len(taken) < room:
                task = self._queue.popleft()
                if not task.ticket.done:
                    taken.append(task)
            if taken:
                worker.used, worker.stop = time.monotonic(), False
                if worker.free:
                    worker.free = False
                    self._free -= 1
            return taken

    def _requeue(self, tasks: list[_Task]) -> None:
        """Evaluations a dead process held but never started go first in line again."""
        with self._cond:
            if self._closed:
                error = SimulationError("the warm pool was closed")
                for task in tasks:
                    task.ticket.fail(error)
                return
            self._queue.extendleft(reversed(tasks))
            self._cond.notify_all()

    def _exited(self, worker: _Worker) -> None:
        with self._cond:
            self._live.discard(worker)
            if worker.free:
                self._free -= 1
            if self._closed:
                return
            if self._queue:
                self._grow()
                if not self._live:  # cannot happen (workers >= 1); never strand a caller
                    error = SimulationError("no warm simulator worker could start")
                    for task in self._queue:
                        task.ticket.fail(error)
                    self._queue.clear()


# -- callers that serve the processes themselves ---------------------------------------------

#: How long parked threads wait for the next pump (seconds): a serving caller that stops
#: pumping (a build on first use, a long plan) hands the processes back to their threads after
#: this, not when it leaves :func:`serving`.
_LEASE_S = 0.05
_serving_lock = threading.Lock()
_servers = 0  # threads inside serving()
_lease = 0.0  # time.monotonic() until which parked threads wait for a pump
_local = threading.local()


def _served_for() -> float:
    """Seconds a parked thread may still wait for a pump (<= 0: serve the process itself)."""
    return _lease - time.monotonic() if _servers else 0.0


def pump() -> None:
    """Serve every process whose thread stepped aside, once, from the calling thread: the
    results that arrived are routed to their callers and more queued work goes out. Cheap (a
    non-blocking ``recv`` per process with work in flight): call it between two plans."""
    global _lease
    _lease = time.monotonic() + _LEASE_S
    cap = running_cap()  # a worker with nothing in flight may start on the queue only below it
    for ref in _pool_refs:
        pool = ref()
        if pool is not None and not pool._closed:
            queued = bool(pool._queue)
            for worker in list(pool._live):
                # skipped without its lock: a worker with nothing in flight and nothing unsent
                # when nothing is queued (a batch over many designs leaves most pools idle), or
                # when it may not start (while a caller reads plans on 2 cores, every pump would
                # otherwise take and give back a budget share for the worker left out). Read
                # unlocked: what changes meanwhile is served at the next pump
                if worker.inflight or worker.out or (queued and (worker.running or cap is None or _running < cap)):
                    worker.pump()


@contextlib.contextmanager
def serving() -> Iterator[Callable[[], None]]:
    """While held, the warm pools' threads step aside for this thread's :func:`pump` (yielded).

    For a caller that computes in Python between submits (the reward path reads plans): each
    result would otherwise wake a thread that waits for the GIL this one holds, for a switch
    interval or longer, while its simulator runs out of work. Re-entrant and shared by threads;
    the threads take their processes back when the last holder leaves or pumps no more."""
    global _servers
    outer = getattr(_local, "serving", False)
    with _serving_lock:
        _servers += 1
    _local.serving = True
    try:
        pump()
        yield pump
    finally:
        _local.serving = outer
        with _serving_lock:
            _servers -= 1
            last = _servers == 0
        if last:
            for pool in _pools_alive():
                with pool._cond:
                    pool._cond.notify_all()


# -- processes alive across every pool -------------------------------------------------------

_alive_lock = threading.Lock()
_alive: set[_Worker] = set()  # workers whose process is alive (started, not yet stopped)


def process_cap() -> int:
    """Simulator processes the warm pools keep alive in all: ``$HWTP_WARM_PROCESSES``, else
    :data:`hwtp.env.DEFAULT_WARM_PROCESSES`."""
    raw = env.get(env.WARM_PROCESSES_VAR)
    if raw is None:
        return env.DEFAULT_WARM_PROCESSES
    try:
        cap = int(raw)
    except ValueError:
        cap = 0
    if cap < 1:
        raise ConfigError(f"${env.WARM_PROCESSES_VAR}={raw!r}: expected a whole number of processes, at least 1")
    return cap


# -- processes with work in flight while callers serve ---------------------------------------

_running_lock = threading.Lock()
_running = 0  # workers handed work and not yet drained, in every pool (_start_running, _stop_running)


def running_cap() -> int | None:
    """How many processes may have work in flight at once, in every pool: while callers serve
    (:func:`serving`), the CPUs less one for each serving thread (at least one), else no cap.

    A thread that reads plans between two pumps needs a CPU of its own. Beside as many busy
    processes as CPUs it shares a core with them, and the scheduler gives each a fair share
    (on 2 cores, 2 simulators and the reader: two thirds of a core each; each simulator leads
    a session of its own, so each is a scheduling group of its own as well): the reader then
    hands out work more slowly than the processes run it, and they stand idle between two
    chunks while the cores they would use go to nobody. Capped, the reader keeps a core and
    the processes left out start on the queue once the last caller stops serving
    (ARCHITECTURE.md, "Reading plans on the reward path")."""
    servers = _servers
    return max(1, usable_cpus() - servers) if servers else None


def _start_running(worker: _Worker) -> bool:
    """Count ``worker`` (nothing in flight) as running, unless that would pass :func:`running_cap`."""
    global _running
    with _running_lock:
        cap = running_cap()
        if cap is not None and _running >= cap:
            return False
        _running += 1
        worker.running = True
        return True


def _stop_running(worker: _Worker) -> None:
    global _running
    with _running_lock:
        if worker.running:
            worker.running = False
            _running -= 1


def running() -> int:
    """Processes with work in flight now, in every pool."""
    return _running


def _admit(worker: _Worker) -> None:
    """Count ``worker``'s new process, then :func:`_trim` the others to its pool's cap."""
    with _alive_lock:
        _alive.add(worker)
    _trim(worker.pool.max_alive, spare=worker)


def _trim(cap: int, spare: _Worker | None = None, idle: _Worker | None = None) -> None:
    """Past ``cap`` processes alive, ask the idlest ones of any pool (nothing in flight, least
    recently handed work first; ``idle``, about to wait for work, counts as idle; ``spare``
    never stops) to stop. Busy processes never stop for it, so more live while more are busy at
    once (each set's budget bounds those); the last to go idle then trims them to the cap."""
    with _alive_lock:
        over = len(_alive) - cap
        if over <= 0:
            return
        candidates = sorted(
            (w for w in _alive if w is not spare and not w.stop and not w.inflight and (w.free or w is idle)),
            key=lambda w: w.used,
        )
        victims = candidates[:over]
        for victim in victims:
            victim.stop = True
    for victim in victims:  # each wakes in WarmPool._take, which returns None: its thread stops it
        if victim is not idle:
            with victim.pool._cond:
                victim.pool._cond.notify_all()


# -- the registry ---------------------------------------------------------------------------

_registry_lock = threading.Lock()
_registry: OrderedDict[str, WarmPool] = OrderedDict()
_making: dict[str, threading.Lock] = {}
# every pool made (registered or not), by weak reference: a tuple, which pump() reads between
# two plans in a tenth of the time a WeakSet takes; the dead ones are dropped when a pool is made
_pool_refs: tuple[weakref.ref[WarmPool], ...] = ()
_pools_lock = threading.Lock()
# budget_for: by (key, slots), for as long as a pool holds it (pools keep theirs alive)
_budgets: weakref.WeakValueDictionary[tuple[str, int], Budget] = weakref.WeakValueDictionary()


def _register(pool: WarmPool) -> None:
    global _pool_refs
    with _pools_lock:
        _pool_refs = (*(r for r in _pool_refs if r() is not None), weakref.ref(pool))


def _pools_alive() -> list[WarmPool]:
    """Every pool made that is still referenced (closed ones included)."""
    return [pool for ref in _pool_refs if (pool := ref()) is not None]


def pool_for(key: str, make: Callable[[], WarmPool], max_pools: int = 1024) -> WarmPool:
    """The pool registered under ``key``, made by ``make()`` if there is none (or it was
    closed). Past ``max_pools`` pools the least recently used one is retired: it finishes the
    work it was given and its processes stop. The bound is loose on purpose: a pool without
    processes holds little, and the processes alive are bounded across pools by
    :func:`process_cap` (a bound of 8 pools made every call that touched more, such as a batch
    of 10 designs or 3 sets of 4 builds each, restart every simulator it used)."""
    with _registry_lock:
        pool = _registry.get(key)
        if pool is not None and not pool.closed:
            _registry.move_to_end(key)
            return pool
        making = _making.setdefault(key, threading.Lock())
    with making:  # one make() per key at a time; other keys are not held up by a slow build
        with _registry_lock:
            pool = _registry.get(key)
            if pool is not None and not pool.closed:
                _registry.move_to_end(key)
                return pool
        pool = make()
        evicted = []
        with _registry_lock:
            _registry[key] = pool
            _registry.move_to_end(key)
            while len(_registry) > max(1, max_pools):
                evicted.append(_registry.popitem(last=False)[1])
    for old in evicted:
        old.retire()
    return pool


def budget_for(key: str, slots: int) -> Budget:
    """The :class:`Budget` of ``slots`` processes shared by the pools of ``key`` (one mutant set's
    schemata builds), made on first use; forgotten once no pool holds it."""
    with _registry_lock:
        found = _budgets.get((key, max(1, int(slots))))
        if found is None:
            found = _budgets[(key, max(1, int(slots)))] = Budget(slots)
        return found


def pools() -> dict[str, WarmPool]:
    """The registered pools by key, least recently used first."""
    with _registry_lock:
        return dict(_registry)


def close_all() -> None:
    """Close every pool (registered or not) and forget the registry."""
    with _registry_lock:
        _registry.clear()
        _making.clear()
        _budgets.clear()
    for pool in _pools_alive():
        pool.close()


atexit.register(close_all)
