"""The cocotb test module that executes compiled test plans inside the simulator.

It runs in the simulator process (``COCOTB_TEST_MODULES=hwtp.sim.harness``). The host writes
a job file (``$HWTP_JOB``, format in :mod:`hwtp.sim.job`, whose version the harness checks
first: the design's clock/reset, ports, limits and a list of evaluations, each a mutant
index and compiled tests); the harness runs every evaluation in
order and appends one JSON line per evaluation to ``$HWTP_RESULTS``, flushed at once, so a
crash loses nothing already done. A first line ``{"ready": true}`` tells the host that
start-up is over and the evaluations' wall-clock budgets start.

Warm mode (``$HWTP_WARM``, set by :mod:`hwtp.sim.warm`): the job file holds no evaluations;
the harness connects to the host's Unix socket at that path, says ready, then takes
evaluations (the job file's entries, one JSON line each) from the socket and writes each
result line back to it, until the host closes it. Every evaluation runs through the same
code as in batch mode, from power-on, so its result line is the same.

Timing (docs/plan-format.md is the contract): the steps and their timing are
:class:`hwtp.sim.plan_steps.PlanTiming`, which ``hwtp export-tests`` also copies into exported
tests. The clock starts once, at t=0; every test starts from power-on: the mutant selector is
set, the snapshot of every register taken at t=0 is written back, then
``PlanTiming.begin`` (inputs to 0, reset inactive, the design's reset).
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from typing import Any

import cocotb
from cocotb.handle import ArrayObject, HierarchyObject, ValueObjectBase
from cocotb.simtime import convert, get_sim_time
from cocotb.types import LogicArray

from hwtp import env
from hwtp.sim.job import check_job_format
from hwtp.sim.outputs import Compare
from hwtp.sim.plan_steps import PlanTiming, bits_match

_DEPOSIT = 0  # cocotb's GPI set action for a plain (non-forcing) write


class _Abort(Exception):
    """An evaluation ran out of its wall-clock budget."""


class _Signal:
    """Fast access to one signal: binary strings and ints straight through cocotb's GPI
    object, instead of a LogicArray per access (the harness's hot path: a read or write is
    ~1 µs this way, ~20 µs through ``handle.value``). Falls back to the public API if the
    GPI object is not there."""

    __slots__ = ("handle", "path", "raw", "width")

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.path = handle._path
        self.raw = getattr(handle, "_handle", None)
        self.width = len(self.binstr())

    def binstr(self) -> str:
        return self.raw.get_signal_val_binstr() if self.raw is not None else str(self.handle.value)

    def read(self) -> tuple[int | None, str]:
        text = self.binstr()
        try:
            return int(text, 2), ""
        except ValueError:  # x or z bits (four-state simulators)
            return None, text

    def write(self, value: int) -> None:
        if self.raw is None:
            self.handle.value = value
        elif self.width <= 32:
            self.raw.set_signal_val_int(_DEPOSIT, value)
        else:
            self.raw.set_signal_val_binstr(_DEPOSIT, format(value, f"0{self.width}b"))

    def restore(self, text: str) -> None:
        if self.raw is None:
            self.handle.value = LogicArray(text)
        else:
            self.raw.set_signal_val_binstr(_DEPOSIT, text)


#: Name of the mutant-selector register in schemata builds (hwtp.mutators.schemata.SELECTOR).
SELECTOR = "hwtp_mutant_sel"


def _collect_state(root: HierarchyObject, skip: set[str], ports: bool = False) -> tuple[list[Any], list[Any]]:
    """Every writable logic handle under ``root`` except inputs; and the mutant selectors.

    ``ports``: also ``root``'s own signals (``hwtp ci`` runs the user's top, no wrapper)."""
    found: list[Any] = []
    selectors: list[Any] = []

    def walk(handle: Any, depth: int) -> None:
        for child in handle:
            if child._path in skip:
                continue
            if depth == 0 and not ports and not isinstance(child, HierarchyObject):
                continue  # the wrapper's own ports: inputs are driven, outputs are wires
            if isinstance(child, ValueObjectBase) and not isinstance(child, ArrayObject):
                if child._name == SELECTOR:
                    selectors.append(child)
                elif not child.is_const:  # parameters and localparams cannot be written
                    found.append(child)
            elif depth < 64:
                try:
                    walk(child, depth + 1)
                except TypeError:  # not iterable
                    continue

    walk(root, 0)
    return found, selectors


#: Probe signals of schemata built with activation probes (hwtp.mutators.probes.PREFIX): ``hwtp_act_<k>``
#: (a register written when mutant k's probe fires) or ``hwtp_act_<k>_c<n>`` (a wire, 1 while it holds).
_PROBE = re.compile(r"hwtp_act_(\d+)(_c\d+)?")


def probe_signals(root: HierarchyObject) -> dict[int, list[tuple[_Signal, bool]]]:
    """Every activation probe under ``root`` by mutant: (signal, is a wire that is 1 while active)."""
    found: dict[int, list[tuple[_Signal, bool]]] = {}

    def walk(handle: Any, depth: int) -> None:
        for child in handle:
            if isinstance(child, ValueObjectBase) and not isinstance(child, ArrayObject):
                match = _PROBE.fullmatch(child._name)
                if match:
                    found.setdefault(int(match.group(1)), []).append((_Signal(child), match.group(2) is not None))
            elif isinstance(child, HierarchyObject) and depth < 64:
                try:
                    walk(child, depth + 1)
                except TypeError:
                    continue

    walk(root, 0)
    return found


class TestWatch:
    """One test, watched while it runs (``hwtp ci``'s diagnosis, :mod:`hwtp.ci.observe`, and
    ``hwtp score --diagnose``): the output ports' changes go into ``compare``
    (:mod:`hwtp.sim.outputs`: recorded, or checked against golden's as they come; following
    stops at the first difference) and ``activated`` is the first step, since the test's start,
    at which a probe of the selected mutant fired (0 when a probe wire was already high). It
    never fails the test it watches: an error while watching is kept in ``broken``."""

    def __init__(self, outputs: dict[str, _Signal], compare: Compare | None,
                 probes: list[tuple[_Signal, bool]]) -> None:
        self.start = get_sim_time("step")
        self.compare = compare
        self.probed = bool(probes)
        self.broken = ""
        self.activated: int | None = 0 if any(wire and sig.binstr() == "1" for sig, wire in probes) else None
        self.tasks = [cocotb.start_soon(self._follow(name, sig)) for name, sig in outputs.items()] if compare else []
        if self.activated is None:
            self.tasks += [cocotb.start_soon(self._probe(sig, wire)) for sig, wire in probes]

    def now(self) -> int:
        return get_sim_time("step") - self.start

    async def _follow(self, name: str, sig: _Signal) -> None:
        compare = self.compare
        assert compare is not None
        try:
            while compare.first is None and not compare.full:
                await sig.handle.value_change
                compare.change(self.now(), name, sig.binstr())
        except Exception as exc:  # the watch must never fail the test it watches
            self.broken = f"{type(exc).__name__}: {exc}"

    async def _probe(self, sig: _Signal, wire: bool) -> None:
        try:
            while self.activated is None:
                await sig.handle.value_change
                if not wire or sig.binstr() == "1":
                    self.activated = self.now()
        except Exception as exc:  # the watch must never fail the test it watches
            self.broken = f"{type(exc).__name__}: {exc}"

    def stop(self) -> int:
        """Stop watching; the test's length in steps."""
        now = self.now()
        for task in self.tasks:
            if not task.done():
                task.cancel()
        return now


def _observed(watch: TestWatch) -> dict[str, Any]:
    """What ``hwtp score --diagnose`` reports of one watched test: the activation and the
    outputs' record, compared with golden's on the host."""
    end = watch.stop()
    if watch.broken:
        raise RuntimeError(f"observing the outputs failed: {watch.broken}")
    assert watch.compare is not None
    watch.compare.end(end)
    step_ns = convert(1, "step", to="ns")
    return {
        "activated": None if not watch.probed else watch.activated is not None,
        "activated_ns": None if watch.activated is None else watch.activated * step_ns,
        "step_ns": step_ns,
        "outputs": watch.compare.record(end),
    }


class Harness(PlanTiming):
    """Runs the evaluations of one job against ``dut``."""

    def __init__(self, dut: Any, job: dict[str, Any]) -> None:
        clock, reset = job.get("clock"), job.get("reset")
        spec = (reset["port"], int(reset["active"]), int(reset["cycles"])) if reset else None
        super().__init__(int(clock["period_ps"]) if clock else 0, spec, [name for name, _w in job["inputs"]])
        self.dut = dut
        self.job = job
        self.clock = clock
        self.inputs = {name: _Signal(getattr(dut, name)) for name, _w in job["inputs"]}
        self.outputs = {name: _Signal(getattr(dut, name)) for name, _w, _s in job["outputs"]}
        self.signed = {name: w for name, w, signed in job["outputs"] if signed}
        self.selectors: list[Any] = []
        self.probes: dict[int, list[tuple[_Signal, bool]]] | None = None
        limits = job.get("limits", {})
        self.wall_s = float(limits.get("wall_s", 60.0))

    def write(self, name: str, value: int) -> None:
        self.inputs[name].write(value)

    async def start(self) -> None:
        skip = {h.path for h in self.inputs.values()}
        state, selectors = _collect_state(self.dut, skip)
        self.selectors = [_Signal(h) for h in selectors]
        self.snapshot = [(sig, sig.binstr()) for sig in map(_Signal, state)]
        if self.clock:
            await self.start_clock(getattr(self.dut, self.clock["port"]))

    async def power_on(self, mutant: int) -> None:
        if mutant and not self.selectors:
            raise ValueError(f"mutant {mutant} requested but the build has no {SELECTOR} register")
        for sel in self.selectors:
            sel.write(mutant)
        for signal, text in self.snapshot:
            signal.restore(text)
        await self.begin()

    def observe(self, mutant: int) -> TestWatch:
        """Start observing a test on ``mutant``: its outputs (recorded) and its activation probes."""
        if self.probes is None:
            self.probes = probe_signals(self.dut)
        start = {name: sig.binstr() for name, sig in self.outputs.items()}
        return TestWatch(self.outputs, Compare(None, start), self.probes.get(mutant, []) if mutant else [])

    def read(self, name: str) -> tuple[int | None, str]:
        return self.outputs[name].read()

    async def run_test(self, test: dict[str, Any], deadline: float, trace: list[Any]) -> dict[str, Any] | None:
        """Run one test; return its first mismatch, or None when it passes.

        ``s`` (sample) ops append ``[step, cycle, [output values...]]`` to ``trace``.
        """
        for step, (op, arg) in enumerate(test["ops"], 1):
            if time.perf_counter() > deadline:
                raise _Abort
            if op == "d":
                self.drive(*arg)
            elif op == "w":
                await self.wait(arg)
            elif op == "e":
                await self.settle()
                for name, value, mask, shown in arg:
                    got, text = self.read(name)
                    # the int comparison is bits_match's rule for 0/1 bits, fast; x/z bits go through it
                    if not ((got & mask) == value if got is not None else bits_match(text, value, mask)):
                        return {
                            "test": test["name"],
                            "step": step,
                            "port": name,
                            "expected": shown,
                            "got": self._shown(name, got, text),
                            "cycle": self.cycle,
                        }
            elif op == "r":
                await self.reset(arg)
            elif op == "s":
                await self.settle()
                trace.append([step, self.cycle, [self._sample(name) for name in self.outputs]])
        return None

    def _sample(self, name: str) -> int | str:
        got, text = self.read(name)
        return text if got is None else got

    def _shown(self, name: str, got: int | None, text: str) -> int | str:
        if got is None:
            return text
        width = self.signed.get(name)
        if width and got >> (width - 1):
            return got - (1 << width)
        return got

    async def run(self, evaluation: dict[str, Any]) -> dict[str, Any]:
        deadline = time.perf_counter() + self.wall_s
        tests: list[dict[str, Any]] = []
        first = None
        cycles = 0
        mutant = int(evaluation.get("mutant", 0))
        try:
            for test in evaluation["tests"]:
                await self.power_on(mutant)
                watch = self.observe(mutant) if evaluation.get("observe") else None
                trace: list[Any] = []
                try:
                    mismatch = await self.run_test(test, deadline, trace)
                finally:  # its tasks end with the test, also when the evaluation is aborted
                    observed = _observed(watch) if watch is not None else None
                cycles += self.cycle
                entry = {"name": test["name"], "passed": mismatch is None, "mismatch": mismatch}
                if trace:
                    entry["trace"] = trace
                if observed is not None:
                    entry["observed"] = observed
                tests.append(entry)
                if mismatch is not None:
                    first = first or mismatch
                    if evaluation.get("stop_on_fail", True):
                        break
        except _Abort:
            return {
                "id": evaluation["id"],
                "status": "timeout",
                "tests": tests,
                "first": first,
                "cycles": cycles,
                "reason": f"evaluation exceeded {self.wall_s:g} s",
                "fault": "hang",
            }
        except Exception as exc:  # an evaluation must never take the others down
            return {
                "id": evaluation["id"],
                "status": "error",
                "tests": tests,
                "first": first,
                "cycles": cycles,
                "reason": f"{type(exc).__name__}: {exc}",
            }
        status = "fail" if first else "pass"
        return {"id": evaluation["id"], "status": status, "tests": tests, "first": first, "cycles": cycles}


async def _evaluate(harness: Harness, evaluation: dict[str, Any]) -> str:
    """Run one evaluation; its result line (batch and warm mode write the same bytes)."""
    start = time.perf_counter()
    result = await harness.run(evaluation)
    result["seconds"] = round(time.perf_counter() - start, 6)
    return json.dumps(result, separators=(",", ":")) + "\n"


async def _serve(harness: Harness, address: str) -> None:
    """Warm mode: evaluations arrive one JSON line each over the host's Unix socket and each
    result line goes back on it as soon as it exists. The read blocks the simulator, whose
    time stands still meanwhile; end of input (or ``{"stop": true}``) ends the test."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(address)
    with sock, sock.makefile("rb") as lines:
        await harness.start()
        sock.sendall((json.dumps({"ready": True, "pid": os.getpid()}) + "\n").encode())
        for line in lines:
            if not line.strip():
                continue
            evaluation = json.loads(line)
            if evaluation.get("stop"):
                break
            sock.sendall((await _evaluate(harness, evaluation)).encode())


@cocotb.test()
async def hwtp_run_job(dut: Any) -> None:
    """Run every evaluation of the job file and stream the results (or, in warm mode, every
    evaluation the host sends)."""
    job_path = env.get(env.JOB_VAR)
    results_path = env.get(env.RESULTS_VAR)
    warm = env.get(env.WARM_VAR)
    if not job_path or not (results_path or warm):
        raise RuntimeError(f"${env.JOB_VAR} and ${env.RESULTS_VAR} (or ${env.WARM_VAR}) must be set by the host")
    with open(job_path, encoding="utf-8") as fh:
        job = json.load(fh)
    check_job_format(job)  # before anything runs: a job of another hwtp is refused, not misread
    harness = Harness(dut, job)
    if warm:
        await _serve(harness, warm)
        return
    assert results_path is not None
    await harness.start()
    with open(results_path, "a", encoding="utf-8") as out:
        # start-up is over: from here on the host counts each evaluation's own budget
        out.write(json.dumps({"ready": True}) + "\n")
        out.flush()
        for evaluation in job["evaluations"]:
            out.write(await _evaluate(harness, evaluation))
            out.flush()
        os.fsync(out.fileno())
