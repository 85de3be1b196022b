"""Inside the simulator: what each user test did with the selected mutant (runs under cocotb).

``hwtp ci`` wraps every user test (a copy with the same name, module, stage and options, so
cocotb seeds and orders it as the original) in :meth:`Observer.wrap`: while the test runs, the
wrapper follows the design's output ports and the activation probes of the selected mutant
(:mod:`hwtp.mutators.probes`), then appends one JSON line per test to the job's ``out`` file:

- ``activated``: a probe of the mutant fired during the test (``activated_ns``: the first time,
  since the test's start); null when the build has no probe for it.
- ``propagated``: an output port's value differed from golden's in the same test (same time
  since the test's start); ``propagated_ns`` and ``signal`` name the first difference. Golden's
  run records each test's output changes (``record``: a folder, one file per test); a mutant's
  run compares as it goes and stops following once they differ. Values are compared once per
  time step (the last value of the step; a glitch back to the old value is no change), over the
  time both runs lasted; null when golden's record of the test is missing or was cut at
  :data:`hwtp.sim.outputs.LIMIT` changes before a difference showed.

The job (``$HWTP_CI_OBSERVE``, JSON) holds ``outputs`` (port names), ``out``, ``mutant`` (the
selected state of a process per mutant) and ``record`` or ``golden`` (the folder of golden's
records). Run as the cocotb test module (a process per mutant), it registers the wrapped copies
of the user's tests; :mod:`hwtp.ci.sharedtests` wraps its copies itself.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any

from cocotb._decorators import Test, TestGenerator
from cocotb.simtime import convert

from hwtp import env
from hwtp.sim.harness import TestWatch, _Signal, probe_signals
from hwtp.sim.outputs import Compare


def user_tests(modules: list[str], pattern: str | None) -> list[Test]:
    """The user's tests as cocotb discovers them (module order, then definition order, by stage)."""
    found: list[Test] = []
    for name in modules:
        for obj in vars(import_module(name)).values():
            if isinstance(obj, Test):
                found.append(obj)
            elif isinstance(obj, TestGenerator):
                found.extend(obj.generate_tests())
    found.sort(key=lambda t: t.stage)  # stable, as the regression manager sorts
    if pattern:
        wanted = re.compile(pattern)
        found = [t for t in found if wanted.search(t.fullname)]
    if not found:
        raise RuntimeError(f"no cocotb test found in {', '.join(modules)}")
    return found


def record_name(fullname: str) -> str:
    """The file golden's record of test ``fullname`` is in (inside the record folder)."""
    return hashlib.sha256(fullname.encode()).hexdigest()[:24] + ".json"


class _Watch:
    """One user test's observation (:class:`hwtp.sim.harness.TestWatch`) and its JSON line."""

    def __init__(self, observer: Observer, dut: Any, state: tuple[int, int], fullname: str) -> None:
        self.observer = observer
        self.position, self.mutant = state
        self.fullname = fullname
        outputs = {name: _Signal(getattr(dut, name)) for name in observer.outputs}
        start = {name: sig.binstr() for name, sig in outputs.items()}
        compare: Compare | None = None
        if observer.record is not None:
            compare = Compare(None, start)
        elif observer.golden is not None:
            compare = Compare(observer.golden_record(fullname), start)
        probes = observer.probes(dut).get(self.mutant, []) if self.mutant else []
        self.watch = TestWatch(outputs, compare, probes)

    def end(self) -> None:
        watch = self.watch
        now = watch.stop()
        row: dict[str, Any] = {
            "position": self.position,
            "mutant": self.mutant,
            "test": self.fullname,
            "activated": None,
            "activated_ns": None,
            "propagated": None,
            "propagated_ns": None,
            "signal": None,
        }
        if watch.broken:
            row["broken"] = watch.broken
            self.observer.write(row)
            return
        if watch.probed:
            row["activated"] = watch.activated is not None
            row["activated_ns"] = _ns(watch.activated)
        compare = watch.compare
        if compare is not None:
            compare.end(now)
            if self.observer.record is not None:
                self.observer.save(self.fullname, compare, now)
            else:
                row["propagated"] = compare.propagated
                if compare.first is not None:
                    row["propagated_ns"] = _ns(compare.first[0])
                    row["signal"] = compare.first[1]
        self.observer.write(row)


def _ns(steps: int | None) -> float | None:
    if steps is None:
        return None
    return round(convert(steps, "step", to="ns"), 6)


class Observer:
    """Wraps user tests so that each one's activation and propagation is written down."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.outputs: list[str] = list(job.get("outputs", []))
        self.record: Path | None = Path(job["record"]) if job.get("record") else None
        self.golden: Path | None = Path(job["golden"]) if job.get("golden") else None
        self.out = open(job["out"], "a", encoding="utf-8")  # noqa: SIM115 (open for the whole run)
        self._probes: dict[int, list[tuple[_Signal, bool]]] | None = None
        if self.record is not None:
            self.record.mkdir(parents=True, exist_ok=True)

    def probes(self, dut: Any) -> dict[int, list[tuple[_Signal, bool]]]:
        if self._probes is None:
            self._probes = probe_signals(dut)
        return self._probes

    def golden_record(self, fullname: str) -> dict[str, Any] | None:
        assert self.golden is not None
        try:
            data: dict[str, Any] = json.loads((self.golden / record_name(fullname)).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None
        return data if data.get("test") == fullname else None

    def save(self, fullname: str, compare: Compare, end: int) -> None:
        assert self.record is not None
        path = self.record / record_name(fullname)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"test": fullname, **compare.record(end)}), encoding="utf-8")
        os.replace(tmp, path)

    def start(self, dut: Any, state: tuple[int, int], fullname: str) -> _Watch | str:
        """Start observing a test; why not, when that fails (the test runs all the same)."""
        try:
            return _Watch(self, dut, state, fullname)
        except Exception as exc:  # the observer must never fail the user's test
            return f"{type(exc).__name__}: {exc}"

    def end(self, watch: _Watch | str, state: tuple[int, int], fullname: str) -> None:
        """Write a test's observation (an empty one, saying why, when observing it failed)."""
        try:
            if isinstance(watch, _Watch):
                watch.end()
                return
        except Exception as exc:  # the observer must never fail the user's test
            watch = f"{type(exc).__name__}: {exc}"
        self.write({"position": state[0], "mutant": state[1], "test": fullname, "broken": watch})

    def write(self, row: dict[str, Any]) -> None:
        self.out.write(json.dumps(row) + "\n")
        self.out.flush()

    def wrap(self, test: Test, state: Callable[[], tuple[int, int]]) -> Test:
        """A copy of ``test`` that is observed while it runs; ``state`` tells the position of the
        state then running in the process's list of states, and its mutant."""
        twin = copy.copy(test)
        func = test.func
        fullname = test.fullname
        observer = self

        async def observed(dut: Any, *args: Any, **kwargs: Any) -> None:
            watch = observer.start(dut, state(), fullname)
            try:
                await func(dut, *args, **kwargs)
            finally:
                observer.end(watch, state(), fullname)

        observed.__qualname__ = getattr(func, "__qualname__", fullname)
        observed.__doc__ = func.__doc__
        twin.func = observed
        return twin


def job() -> dict[str, Any] | None:
    """The observation job of this simulator process, if ``hwtp ci`` asked for one."""
    path = env.get(env.CI_OBSERVE_VAR)
    if not path:
        return None
    with open(path, encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def _register() -> dict[str, Test]:
    """A process per mutant: the user's tests, each wrapped (cocotb finds them in this module)."""
    spec = job()
    assert spec is not None
    observer = Observer(spec)
    mutant = int(spec.get("mutant", 0))
    tests = user_tests(list(spec["modules"]), spec.get("filter"))
    return {f"_hwtp_{i:06d}": observer.wrap(t, lambda: (0, mutant)) for i, t in enumerate(tests)}


# a process per mutant runs this module as its tests (a shared process runs hwtp.ci.sharedtests)
if env.get(env.CI_OBSERVE_VAR) and not env.get(env.CI_SHARED_VAR):
    globals().update(_register())
