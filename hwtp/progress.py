"""Live progress of long work (``hwtp run``, ``score``, ``mutate``, ``ci``), always on stderr.

On a terminal a tqdm bar (count, rate, time left); otherwise, for CI logs and pipes, plain
whole lines: one each time another tenth of the work is done or 30 s have passed, and one at
the end. stdout is never written (JSON goes there).

A :class:`Progress` is the callback the library loops accept: ``progress(n)`` adds ``n`` done
(thread-safe: simulator-watch threads call it); :meth:`Progress.to` sets the count outright.
:class:`Tasks` shows counted tasks one after another, reported as ``(label, done, total)``
(``hwtp run``'s stages). A loop whose caller passes no callback (the witness search inside
``hwtp mutate``) asks :func:`counter` for one: it reports to the :class:`Tasks` a command
installed with :func:`reporting`, or does nothing.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import IO

from tqdm import tqdm

PLAIN_SECONDS = 30.0  # at most this long between plain lines
PLAIN_STEPS = 10  # and one line per tenth of the work

Report = Callable[[str, int, int], None]  # (label, done, total)
_REPORT: ContextVar[Report | None] = ContextVar("hwtp_progress", default=None)


def _duration(seconds: float) -> str:
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    return f"{minutes} min {rest:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


class Progress:
    """``total`` units of work called ``label``; see the module docstring."""

    def __init__(self, total: int, label: str, enabled: bool = True, stream: IO[str] | None = None) -> None:
        self.total = max(0, total)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and self.total > 0
        self.tty = self.enabled and self.stream.isatty()
        self.done = 0
        self.start = time.monotonic()
        self.lock = threading.Lock()
        self.last_line = self.start
        self.last_step = 0
        self.bar = (
            tqdm(total=self.total, desc=label, file=self.stream, unit="eval", dynamic_ncols=True, leave=True)
            if self.tty
            else None
        )

    def __call__(self, n: int = 1) -> None:
        with self.lock:
            self._set(self.done + n)

    def to(self, done: int) -> None:
        with self.lock:
            self._set(done)

    def _set(self, done: int) -> None:
        done = min(max(done, 0), self.total)
        step, self.done = done - self.done, done
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(step)
            return
        now = time.monotonic()
        tenth = done * PLAIN_STEPS // self.total
        if done < self.total and (tenth > self.last_step or now - self.last_line >= PLAIN_SECONDS):
            self.last_step, self.last_line = tenth, now
            self._line(now)

    def _line(self, now: float) -> None:
        elapsed = now - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        text = f"{self.label}: {self.done}/{self.total} ({self.done / self.total:.0%}) {rate:.1f}/s"
        if self.done < self.total:
            text += f", {_duration((self.total - self.done) / rate)} left" if rate > 0 else ", time left unknown"
        else:
            text += f", {_duration(elapsed)}"
        print(text, file=self.stream, flush=True)

    def close(self) -> None:
        with self.lock:
            if self.bar is not None:
                self.bar.close()
                self.bar = None
            elif self.enabled and self.done:
                self._line(time.monotonic())
            self.enabled = False


@contextmanager
def progress(total: int, label: str, enabled: bool = True) -> Iterator[Progress]:
    """A :class:`Progress` closed (its last line written) when the block ends."""
    bar = Progress(total, label, enabled)
    try:
        yield bar
    finally:
        bar.close()


class Tasks:
    """Counted tasks one after another, each shown as a :class:`Progress`; a :data:`Report`."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.current: Progress | None = None
        self.key: tuple[str, int] | None = None
        self.lock = threading.Lock()

    def __call__(self, label: str, done: int, total: int) -> None:
        with self.lock:
            if self.current is None or self.key != (label, total):
                self._close()
                self.current, self.key = Progress(total, label, self.enabled), (label, total)
            self.current.to(done)

    def close(self) -> None:
        with self.lock:
            self._close()

    def _close(self) -> None:
        if self.current is not None:
            self.current.close()
        self.current, self.key = None, None


@contextmanager
def reporting(report: Report) -> Iterator[None]:
    """Within the block, :func:`counter` reports to ``report``."""
    token = _REPORT.set(report)
    try:
        yield
    finally:
        _REPORT.reset(token)


def counter(label: str, total: int) -> Callable[[int], None]:
    """A ``progress(n)`` callback for ``total`` units called ``label``, reporting to the
    :func:`reporting` block around the caller; without one it does nothing."""
    report = _REPORT.get()
    if report is None:
        return lambda n: None
    done = 0
    lock = threading.Lock()
    report(label, 0, total)  # the clock of the rate starts now

    def tick(n: int) -> None:
        nonlocal done
        with lock:
            done += n
            report(label, done, total)

    return tick
