"""One run of the user's cocotb tests: a simulator process, watched, and its results file read.

``hwtp ci`` starts one process per state (golden or a mutant, chosen by the plusarg
``+hwtp_mutant=<n>``), with the user's test modules and top module instead of hwtp's harness.
cocotb does not fail the process when a test fails, so the outcome comes from the results
file (``COCOTB_RESULTS_FILE``, JUnit XML): no file, or no test in it, is an ``error``; a
process over the timeout is killed with everything it started (``timeout``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from xml.etree import ElementTree

from hwtp.ci_config import CiConfig
from hwtp.errors import ToolchainError
from hwtp.mutators.schemata import PLUSARG
from hwtp.sim import procs
from hwtp.sim.buildcache import Build
from hwtp.sim.runner import log_tail

log = logging.getLogger("hwtp.ci")
_LOG_TAIL_LINES = 25


@dataclass(frozen=True)
class TestOutcome:
    """One cocotb test in one simulator run, as its results file reports it."""

    __test__ = False

    name: str
    module: str
    status: Literal["passed", "failed", "skipped"]
    message: str = ""
    detail: str = ""             # the traceback cocotb recorded


@dataclass(frozen=True)
class Run:
    """One simulator process: every test of the testbench on one state."""

    status: Literal["pass", "fail", "timeout", "error"]
    tests: tuple[TestOutcome, ...]
    seconds: float
    reason: str | None = None    # timeout/error: why, with the log tail

    @property
    def failed(self) -> tuple[TestOutcome, ...]:
        return tuple(t for t in self.tests if t.status == "failed")


def parse_results(path: Path) -> tuple[TestOutcome, ...]:
    """The tests of a cocotb results file (JUnit XML); raises ValueError when unreadable."""
    try:
        root = ElementTree.parse(path).getroot()  # noqa: S314  (written by cocotb in our own run)
    except (OSError, ElementTree.ParseError) as exc:
        raise ValueError(f"cannot read the results file {path.name}: {exc}") from exc
    out = []
    for case in root.iter("testcase"):
        status: Literal["passed", "failed", "skipped"] = "passed"
        message, detail = "", ""
        for child in case:
            if child.tag in ("failure", "error"):
                status = "failed"
            elif child.tag == "skipped" and status == "passed":
                status = "skipped"
            else:
                continue
            message, detail = child.get("message", ""), (child.text or "").strip()
        out.append(TestOutcome(case.get("name", "?"), case.get("classname", ""), status, message, detail))
    return tuple(out)


def _environment(build: Build, config: CiConfig, results: Path) -> dict[str, str]:
    """The simulator process's environment: the user's tests and top instead of hwtp's harness."""
    environ = build.backend.environment(config.top)
    environ.pop("COCOTB_TRUST_INERTIAL_WRITES", None)  # run the tests as their own flow does
    environ["COCOTB_TEST_MODULES"] = ",".join(config.test_modules)
    environ["COCOTB_TOPLEVEL"] = config.top
    paths = [*(str(p) for p in config.test_paths), environ.get("PYTHONPATH", "")]
    environ["PYTHONPATH"] = os.pathsep.join(paths)
    environ["COCOTB_RESULTS_FILE"] = str(results)
    environ["COCOTB_RANDOM_SEED"] = str(config.random_seed)
    # cocotb rewrites asserts with pytest; loading every installed pytest plugin costs ~0.3 s a run.
    environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    if config.test_filter:
        environ["COCOTB_TEST_FILTER"] = config.test_filter
    environ.update(dict(config.test_env))
    return environ


class Processes:
    """The simulator processes running now, so an interrupted run can stop them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: set[subprocess.Popen[bytes]] = set()
        self.stopped = False

    def start(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        with self._lock:
            if self.stopped:
                raise InterruptedError("stopped")
            log.debug("$ %s", shlex.join(argv))
            try:
                proc = procs.spawn(argv, **kwargs)  # its own group, which dies with hwtp
            except OSError as exc:
                raise ToolchainError(f"cannot start the simulator {argv[0]}: {exc.strerror}") from exc
            self._live.add(proc)
            return proc

    def finish(self, proc: subprocess.Popen[bytes], kill: bool) -> None:
        if kill:
            _kill(proc)
        procs.done(proc)
        with self._lock:
            self._live.discard(proc)

    def stop_all(self) -> None:
        with self._lock:
            self.stopped = True
            procs = list(self._live)
        for proc in procs:
            _kill(proc)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill a simulator and whatever it started (it leads its own process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run_tests(build: Build, config: CiConfig, mutant: int, workdir: Path, timeout_s: float,
              processes: Processes | None = None) -> Run:
    """Run the user's tests on state ``mutant`` (0 = golden) in a fresh simulator process."""
    processes = processes or Processes()
    workdir = workdir.resolve()  # the simulator runs in workdir: every path it gets is absolute
    workdir.mkdir(parents=True, exist_ok=True)
    results, log_path = workdir / "results.xml", workdir / "sim.log"
    argv = build.backend.command(build.path, config.top, [f"+{PLUSARG}={mutant}"])
    start = time.perf_counter()
    with log_path.open("w", encoding="utf-8") as out:
        proc = processes.start(argv, cwd=workdir, env=_environment(build, config, results), stdout=out,
                               stderr=subprocess.STDOUT)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            processes.finish(proc, kill=True)
            seconds = time.perf_counter() - start
            return Run("timeout", (), seconds, f"stopped after the {timeout_s:g} s timeout")
        except BaseException:
            processes.finish(proc, kill=True)
            raise
        processes.finish(proc, kill=False)
    seconds = time.perf_counter() - start
    if not results.is_file():
        why = f"no results file (exit code {proc.returncode})"
        return Run("error", (), seconds, f"{why}; log tail:\n{log_tail(log_path, _LOG_TAIL_LINES)}")
    try:
        tests = parse_results(results)
    except ValueError as exc:
        return Run("error", (), seconds, f"{exc}; log tail:\n{log_tail(log_path, _LOG_TAIL_LINES)}")
    if not tests:
        return Run("error", (), seconds, f"no cocotb test ran; log tail:\n{log_tail(log_path, _LOG_TAIL_LINES)}")
    status: Literal["pass", "fail"] = "fail" if any(t.status == "failed" for t in tests) else "pass"
    return Run(status, tests, seconds)
