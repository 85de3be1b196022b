"""The cocotb test module of a shared ``hwtp ci`` simulator process: the user's tests, once per state.

Runs inside the simulator (``COCOTB_TEST_MODULES=hwtp.ci.sharedtests``). At import it reads its
job (``$HWTP_CI_SHARED``: the states in order, the user's test modules, their filter, two output
paths), imports the user's test modules and registers, for every state in turn, a power-on test
(:func:`_power_on`) followed by a copy of each user test. Copies keep the original's name, module
and options: cocotb seeds a test's random generators from its full name, so a copy draws the
numbers the original draws in a process of its own. cocotb's regression manager runs them, and
isolates each user test as it always does (the tasks a test started, clocks included, are
cancelled when it ends; its simulation-time timeout holds).

The power-on test sets the mutant selector and writes back every signal's value from t=0 (the
snapshot of :func:`hwtp.sim.harness._collect_state`, taken by the first one). Some cannot be
written (Verilator's top-level output registers, which the job lists as ``check``): when one
still differs, it holds the design's
reset for its cycles (the job names clock and reset) and writes the rest back again; the signals
that still differ are named in the progress line, and the host runs that state again in a
process of its own (its results here are not used). Then it appends a
progress line (the state's position and the wall time) and writes the results so far (cocotb's
JUnit, to a side file; it groups test cases by module, so the host regroups them by state with
the list of user tests this module writes first), so that the host can hold each state to its wall-clock timeout by
stopping the process and resuming with the states left. A last marker test ends the run.
"""

from __future__ import annotations

import copy
import json
import os
import time
from typing import Any

from cocotb import regression
from cocotb._decorators import Test
from cocotb.triggers import Timer

from hwtp import env
from hwtp.ci import observe
from hwtp.sim.harness import _collect_state, _Signal

#: Name of the power-on test that starts each state (its position in the job is its argument).
POWER_ON = "hwtp_power_on"
#: Name of the marker test after the last state.
END = "hwtp_end"


class _State:
    """The snapshot of every signal at t=0 and the mutant selectors, taken once."""

    def __init__(self, reset: dict[str, Any] | None, check: list[str]) -> None:
        self.snapshot: list[tuple[_Signal, str]] | None = None
        self.selectors: list[_Signal] = []
        self.reset = reset
        self.check = set(check)  # registers the simulator may not let us write: checked after restoring
        self.dut: Any = None

    def take(self, dut: Any) -> None:
        self.dut = dut
        state, selectors = _collect_state(dut, set(), ports=True)
        self.selectors = [_Signal(h) for h in selectors]
        self.snapshot = [(sig, sig.binstr()) for sig in map(_Signal, state)]

    def _write_back(self) -> None:
        for signal, text in self.snapshot or ():
            signal.restore(text)

    async def _pulse(self) -> None:
        """Hold the design's reset over a few clock cycles (the state of registers the simulator
        cannot write, such as Verilator's top-level output registers, comes back this way)."""
        assert self.reset is not None
        clk = _Signal(getattr(self.dut, self.reset["clock"]))
        rst = _Signal(getattr(self.dut, self.reset["port"]))
        rst.write(int(self.reset["active"]))
        for _ in range(int(self.reset["cycles"])):
            clk.write(0)
            await Timer(1, "step")
            clk.write(1)
            await Timer(1, "step")
        clk.write(0)
        await Timer(1, "step")

    def select(self, mutant: int) -> None:
        if mutant and not self.selectors:
            raise ValueError(f"mutant {mutant} requested but the build has no mutant selector")
        for sel in self.selectors:
            sel.write(mutant)

    async def restore(self, mutant: int) -> list[str]:
        """Power-on state for ``mutant``; the signals that still differ from it (none: sound)."""
        self.select(mutant)
        self._write_back()
        if self.reset is not None and self._differ():
            await Timer(1, "step")
            if self._differ():
                await self._pulse()
                self._write_back()
        await Timer(1, "step")
        return self._differ()

    def _differ(self) -> list[str]:
        return [sig.path for sig, text in self.snapshot or ()
                if sig.path.rpartition(".")[2] in self.check and sig.binstr() != text]


def _job() -> dict[str, Any]:
    path = env.get(env.CI_SHARED_VAR)
    if not path:
        raise RuntimeError(f"${env.CI_SHARED_VAR} must be set by hwtp ci")
    with open(path, encoding="utf-8") as fh:
        job: dict[str, Any] = json.load(fh)
    return job


def _write_partial(path: str) -> None:
    """cocotb's JUnit of the tests finished so far (atomically replaced)."""
    manager = getattr(regression, "_manager_inst", None)
    if manager is None:
        return
    tmp = f"{path}.tmp"
    manager.xunit.write(tmp)
    os.replace(tmp, path)


def _marker(name: str, func: Any, args: tuple[Any, ...], stage: int) -> Test:
    return Test(func=func, args=args, kwargs={}, name=name, module=__name__, doc=None, timeout=None,
                expect_fail=False, expect_error=(), skip=False, stage=stage)


def _register() -> dict[str, Test]:
    job = _job()
    states: list[int] = [int(s) for s in job["states"]]
    user = observe.user_tests(list(job["modules"]), job.get("filter"))
    with open(job["tests"], "w", encoding="utf-8") as fh:  # what each state runs, for the host
        json.dump([[t.module, t.name] for t in user], fh)
    state = _State(job.get("reset"), list(job.get("check", [])))
    progress = open(job["progress"], "a", encoding="utf-8")  # noqa: SIM115 (open for the whole run)
    watching = observe.job()
    observer = observe.Observer(watching) if watching else None
    selected = (0, 0)  # (position, mutant) of the state whose tests run now

    async def power_on(dut: Any, position: int) -> None:
        nonlocal selected
        differ: list[str] = []
        if state.snapshot is None:  # the first test starts at t=0: power-on values, nothing to restore
            state.take(dut)
            state.select(states[position])
        elif position < len(states):
            differ = await state.restore(states[position])
        selected = (position, states[position] if position < len(states) else 0)
        _write_partial(job["partial"])
        progress.write(json.dumps({"position": position, "wall": time.time(), "differ": differ}) + "\n")
        progress.flush()

    tests: dict[str, Test] = {}
    stage = 0
    for position in range(len(states) + 1):
        name = POWER_ON if position < len(states) else END
        tests[f"_hwtp_{stage:06d}"] = _marker(name, power_on, (position,), stage)
        stage += 1
        if position == len(states):
            break
        for test in user:
            twin = observer.wrap(test, lambda: selected) if observer else copy.copy(test)
            twin.stage = stage
            tests[f"_hwtp_{stage:06d}"] = twin
            stage += 1
    return tests


if env.get(env.CI_SHARED_VAR):  # in the simulator process (the host imports it for its names only)
    globals().update(_register())
