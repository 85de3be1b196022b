"""The process supervisor: every child process of hwtp is started, watched and killed here.

Every simulator, build step and lint runs under :mod:`hwtp.sim.reaper` in a new session
(``start_new_session=True``; no ``preexec_fn``, which is unsafe in a threaded process), so
it leads a process group that holds everything it starts. The group dies with hwtp however
hwtp ends: on a timeout or an interrupt hwtp kills the group; on ``kill -9`` the reaper's
parent-death signal does. That signal follows the *thread* that started the process: a
process that outlives one call (a warm simulator) is started by a thread that lives as long
as it does.

- :func:`supervised` starts a process and, however the block ends, kills its group if it
  still runs, reaps it and forgets it; :func:`wait` waits for it with a timeout;
  :func:`run` is :func:`subprocess.run` on top of them; :func:`kill` ends a group early.
- :func:`stop_all` (when the main thread is interrupted, or a thread of
  :func:`map_threads` fails) kills every live group and refuses new processes, so worker
  threads wind down at once and no new simulator starts (:func:`stop_now` does it from the
  signal handler of Ctrl-C and SIGTERM, before anything unwinds); :func:`check` raises
  :class:`Interrupted` in a thread once that happened.

Temporary folders carry hwtp's process id; those of dead hwtp processes are removed the next
time one is made.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from hwtp.errors import ToolchainError

T = TypeVar("T")
R = TypeVar("R")

REAPER = Path(__file__).with_name("reaper.py")
_TEMP_PREFIX = "hwtp-"

_lock = threading.Lock()
_live: set[subprocess.Popen[Any]] = set()
_stop = threading.Event()
_swept: set[str] = set()


class Interrupted(Exception):
    """hwtp is stopping: no new child process is started."""


def wrap(argv: Sequence[str]) -> list[str]:
    """``argv`` run under the reaper (its process group dies with hwtp)."""
    return [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), *map(str, argv)]


def spawn(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """Start ``argv`` as the leader of a new process group; refused once hwtp is stopping.
    The caller ends it with :func:`kill` (or uses :func:`supervised`)."""
    with _lock:
        check()
        try:
            proc: subprocess.Popen[Any] = subprocess.Popen(wrap(argv), start_new_session=True, **kwargs)
        except OSError as exc:
            raise ToolchainError(f"cannot start {argv[0]}: {exc.strerror}") from exc
        _live.add(proc)
    return proc


@contextlib.contextmanager
def supervised(argv: Sequence[str], **kwargs: Any) -> Iterator[subprocess.Popen[Any]]:
    """``with supervised(argv, ...) as proc:`` starts ``argv`` (:func:`spawn`); however the
    block ends (done, a timeout, an exception, an interrupt) the group is killed if it still
    runs, the process reaped and forgotten, and the pipes it was given closed."""
    proc = spawn(argv, **kwargs)
    try:
        yield proc
    finally:
        kill(proc)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):  # a timeout leaves them open
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def wait(proc: subprocess.Popen[Any], timeout: float) -> bool:
    """Wait up to ``timeout`` s for ``proc`` to exit: True when it has, False when it still
    runs. Raises :class:`Interrupted` when hwtp is stopping (its group was killed)."""
    try:
        proc.wait(timeout=timeout)
        finished = True
    except subprocess.TimeoutExpired:
        finished = False
    check()
    return finished


def check() -> None:
    """Raise :class:`Interrupted` once hwtp is stopping (a worker thread's way out)."""
    if _stop.is_set():
        raise Interrupted("hwtp is stopping")


def kill(proc: subprocess.Popen[Any]) -> None:
    """Kill ``proc`` and its whole group unless it has exited, reap it and forget it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # the leader is not reaped yet: the group is ours
    proc.wait()
    with _lock:
        _live.discard(proc)


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_cpu(pid: int) -> tuple[float, list[int]] | None:
    """(CPU ticks of ``pid``: its own user and system time and its reaped children's, from
    ``/proc/PID/stat``; its live children), or None when it is gone or there is no ``/proc``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # after the command name, which may hold spaces
    ticks = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    children: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            children += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return ticks, children


def cpu_seconds(proc: subprocess.Popen[Any]) -> float | None:
    """CPU seconds (user and system) ``proc`` and every process below it have used so far: the
    live ones' own and those of the children they have reaped (Linux ``/proc``). None where
    there is no ``/proc`` (the callers then count wall-clock time)."""
    first = _stat_cpu(proc.pid)
    if first is None:
        return None
    ticks, todo = first
    seen = {proc.pid}
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        found = _stat_cpu(pid)
        if found is not None:
            ticks += found[0]
            todo += found[1]
    return ticks / _TICKS


#: The wall-clock backstop: this many times the CPU limit, plus the slack below.
BACKSTOP_FACTOR = 10.0
BACKSTOP_SLACK_S = 30.0


def backstop(limit_s: float) -> float:
    """Wall-clock seconds after which a process with a CPU limit of ``limit_s`` is stopped
    whatever CPU it used: it is stuck, or the machine gives it almost no CPU."""
    return BACKSTOP_FACTOR * limit_s + BACKSTOP_SLACK_S


class Overrun(str, Enum):
    """Which limit stopped a process."""

    CPU = "cpu"  # its CPU seconds: the verdict's own limit
    WALL = "wall"  # the wall-clock backstop: stuck, or starved by other work


class CpuClock:
    """CPU seconds a process has used since a mark (wall-clock seconds without ``/proc``), and
    the wall-clock seconds since it. Once the process has gone its last reading stands (a
    reading is at most one poll old)."""

    def __init__(self, proc: subprocess.Popen[Any]) -> None:
        self.proc = proc
        self.wall_only = cpu_seconds(proc) is None and proc.poll() is None
        self.last = 0.0
        self.mark()
        self.start = self.cpu0

    def _cpu(self) -> float:
        if self.wall_only:
            return time.monotonic()
        used = cpu_seconds(self.proc)
        if used is not None:
            self.last = used
        return self.last

    def mark(self) -> None:
        self.cpu0, self.wall0 = self._cpu(), time.monotonic()

    def cpu(self) -> float:
        return self._cpu() - self.cpu0

    def total(self) -> float:
        """CPU seconds since the clock was made."""
        return self._cpu() - self.start

    def wall(self) -> float:
        return time.monotonic() - self.wall0

    def over(self, limit_s: float) -> Overrun | None:
        """Which limit the process has passed since the mark, if any."""
        if self.cpu() > limit_s:
            return Overrun.CPU
        return Overrun.WALL if self.wall() > backstop(limit_s) else None


def run(argv: Sequence[str], timeout: float | None = None, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """Like :func:`subprocess.run` (no ``check``), but the whole group is killed on a timeout
    or an interrupt. Raises :class:`subprocess.TimeoutExpired` after killing it."""
    if kwargs.pop("capture_output", False):
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    with supervised(argv, **kwargs) as proc:
        out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def stop_all() -> None:
    """Refuse new processes and kill every live group (hwtp is being interrupted)."""
    with _lock:
        _stop.set()
        live = list(_live)
    for proc in live:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)


def stop_now() -> None:
    """:func:`stop_all` for a signal handler: without the lock (the interrupted main thread may
    hold it), so it may miss a process being started at that instant; :func:`stop_all`, called
    again as the interrupt unwinds, kills that one. Killing at the signal, not after the
    unwinding, is what stops hwtp at once: no ``finally`` waits for a simulator that still runs."""
    _stop.set()
    for proc in tuple(_live):
        if proc.returncode is None:  # not reaped: its group is still ours
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)


def reset() -> None:
    """Allow new processes again (a new command starts)."""
    _stop.clear()


def map_threads(fn: Callable[[T], R], items: Iterable[T], workers: int) -> list[R]:
    """``[fn(x) for x in items]`` on ``workers`` threads; if anything fails or the main
    thread is interrupted, every child process is stopped before the threads are joined."""
    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        futures = [pool.submit(fn, x) for x in items]
        return [f.result() for f in futures]
    except BaseException:
        stop_all()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owned(path: Path) -> bool:
    try:
        return path.stat().st_uid == os.getuid()
    except OSError:
        return False


def sweep(folder: Path, prefix: str) -> None:
    """Remove ``{prefix}{pid}-*`` folders in ``folder`` left by hwtp processes that are gone."""
    key = f"{folder}\0{prefix}"
    if key in _swept:
        return
    _swept.add(key)
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            name = entry.name
            if not name.startswith(prefix) or not entry.is_dir() or entry.is_symlink():
                continue
            pid = name[len(prefix) :].split("-", 1)[0]
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)) and _owned(entry):
                shutil.rmtree(entry, ignore_errors=True)


def tempdir(kind: str, parent: Path | None = None) -> tempfile.TemporaryDirectory[str]:
    """A temporary folder ``hwtp-KIND-PID-*`` (removed on exit, on an interrupt and on SIGTERM;
    after a ``kill -9``, by the next hwtp that makes one in the same place)."""
    prefix = f"{_TEMP_PREFIX}{kind}-"
    where = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    sweep(where, prefix)
    return tempfile.TemporaryDirectory(prefix=f"{prefix}{os.getpid()}-", dir=parent)
