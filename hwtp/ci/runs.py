"""One run of the user's cocotb tests: a simulator process, watched, and its results file read.

``hwtp ci`` starts one process per state (golden or a mutant, chosen by the plusarg
``+hwtp_mutant=<n>``), with the user's test modules and top module instead of hwtp's harness.
cocotb does not fail the process when a test fails, so the outcome comes from the results
file (``COCOTB_RESULTS_FILE``, JUnit XML): no file, or no test in it, is an ``error``; a
process over the timeout is killed with everything it started (``timeout``). The run's status
is the runner's :class:`~hwtp.sim.runner.EvalStatus` (the same four outcomes of one run).
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import time
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from xml.etree import ElementTree

from hwtp import env
from hwtp.ci import diagnosis
from hwtp.ci.config import CiConfig
from hwtp.mutators.schemata import PLUSARG
from hwtp.scoring.reach import Observation
from hwtp.sim import procs
from hwtp.sim.buildcache import Build
from hwtp.sim.runner import EvalStatus, log_tail

log = logging.getLogger("hwtp.ci.mutation")
_LOG_TAIL_LINES = 25


class TestStatus(str, Enum):
    """One cocotb test's result, as its results file says it."""

    __test__ = False

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class TestOutcome:
    """One cocotb test in one simulator run, as its results file reports it."""

    __test__ = False

    name: str
    module: str
    status: TestStatus
    message: str = ""
    detail: str = ""             # the traceback cocotb recorded


@dataclass(frozen=True)
class Run:
    """One simulator process: every test of the testbench on one state."""

    status: EvalStatus
    tests: tuple[TestOutcome, ...]
    seconds: float
    reason: str | None = None    # timeout/error: why, with the log tail
    observed: tuple[Observation, ...] = ()  # per test, when the run was observed

    @property
    def failed(self) -> tuple[TestOutcome, ...]:
        return tuple(t for t in self.tests if t.status == TestStatus.FAILED)

    def with_observations(self, rows: list[Observation]) -> Run:
        """This run with what the observer saw of its tests (each marked detected when it failed)."""
        failed = {f"{t.module}.{t.name}" for t in self.failed}
        return replace(self, observed=tuple(replace(o, detected=o.test in failed) for o in rows))


def parse_results(path: Path) -> tuple[TestOutcome, ...]:
    """The tests of a cocotb results file (JUnit XML); raises ValueError when unreadable."""
    try:
        root = ElementTree.parse(path).getroot()  # noqa: S314  (written by cocotb in our own run)
    except (OSError, ElementTree.ParseError) as exc:
        raise ValueError(f"cannot read the results file {path.name}: {exc}") from exc
    out = []
    for case in root.iter("testcase"):
        status = TestStatus.PASSED
        message, detail = "", ""
        for child in case:
            if child.tag in ("failure", "error"):
                status = TestStatus.FAILED
            elif child.tag == "skipped" and status == TestStatus.PASSED:
                status = TestStatus.SKIPPED
            else:
                continue
            message, detail = child.get("message", ""), (child.text or "").strip()
        out.append(TestOutcome(case.get("name", "?"), case.get("classname", ""), status, message, detail))
    return tuple(out)


def environment(build: Build, config: CiConfig, results: Path) -> dict[str, str]:
    """The simulator process's environment: the user's tests and top instead of hwtp's harness."""
    environ = build.backend.environment(config.top, harness=False)
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


def working_folder(config: CiConfig, own: Path) -> Path:
    """Where the simulator process runs: ``tests.dir`` (made when missing), else ``own``, the
    run's private folder. Results and logs always go to the private folder."""
    if config.test_dir is None:
        return own
    config.test_dir.mkdir(parents=True, exist_ok=True)
    return config.test_dir


def run_tests(build: Build, config: CiConfig, mutant: int, workdir: Path, timeout_s: float,
              watch: diagnosis.Watch | None = None) -> Run:
    """Run the user's tests on state ``mutant`` (0 = golden) in a fresh simulator process,
    started, watched and killed by :mod:`hwtp.sim.procs` (so an interrupt stops it too).

    ``watch``: observe each test (:mod:`hwtp.ci.observe`); the run then carries its observations."""
    workdir = workdir.resolve()  # the simulator may run elsewhere (tests.dir): every path it gets is absolute
    workdir.mkdir(parents=True, exist_ok=True)
    results, log_path = workdir / "results.xml", workdir / "sim.log"
    argv = build.backend.command(build.path, config.top, [f"+{PLUSARG}={mutant}"])
    log.debug("$ %s", shlex.join(argv))
    environ = environment(build, config, results)
    if watch is not None:  # the user's tests, each wrapped by the observer
        environ["COCOTB_TEST_MODULES"] = diagnosis.OBSERVER_MODULE
        environ[env.CI_OBSERVE_VAR] = str(watch.job(workdir, mutant, config.test_modules, config.test_filter))
    start = time.perf_counter()
    with log_path.open("w", encoding="utf-8") as out, procs.supervised(
        argv, cwd=working_folder(config, workdir), env=environ, stdout=out, stderr=subprocess.STDOUT
    ) as proc:
        finished = procs.wait(proc, timeout_s)
    seconds = time.perf_counter() - start
    if not finished:
        return Run(EvalStatus.TIMEOUT, (), seconds, f"stopped after the {timeout_s:g} s timeout")
    tail = log_tail(log_path, _LOG_TAIL_LINES)
    if not results.is_file():
        return Run(EvalStatus.ERROR, (), seconds, f"no results file (exit code {proc.returncode}); log tail:\n{tail}")
    try:
        tests = parse_results(results)
    except ValueError as exc:
        return Run(EvalStatus.ERROR, (), seconds, f"{exc}; log tail:\n{tail}")
    run = run_of(tests, seconds, tail)
    if watch is not None:
        run = run.with_observations(diagnosis.read(workdir, watch).get(0, []))
    return run


def run_of(tests: tuple[TestOutcome, ...], seconds: float, tail: str) -> Run:
    """The run whose tests are ``tests``: error when none ran, fail when one failed, else pass."""
    if not tests:
        return Run(EvalStatus.ERROR, (), seconds, f"no cocotb test ran; log tail:\n{tail}")
    failed = any(t.status == TestStatus.FAILED for t in tests)
    return Run(EvalStatus.FAIL if failed else EvalStatus.PASS, tests, seconds)
