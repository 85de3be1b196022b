"""Run one test plan on one design (``hwtp sim``): build (cached), simulate, report per test."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwtp.plans.format import Plan, validate
from hwtp.rtl.design import Design
from hwtp.sim.backends import DEFAULT_BACKEND
from hwtp.sim.executors.base import Executor, design_schemata
from hwtp.sim.executors.local import LocalExecutor
from hwtp.sim.job import Evaluation, Limits, compile_plan, plan_cycles


@dataclass(frozen=True)
class SimReport:
    """The outcome of ``hwtp sim``: per test, pass or its first mismatch."""

    design: str
    plan: str
    status: str  # pass, fail, timeout, error
    tests: tuple[dict[str, Any], ...]
    first: dict[str, Any] | None
    reason: str | None
    build_cached: bool
    build_seconds: float
    sim_seconds: float
    fault: str | None = None  # why a timeout/error happened: "hang", "design" (hwtp.sim.runner)

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def as_dict(self) -> dict[str, Any]:
        return {
            "design": self.design,
            "plan": self.plan,
            "status": self.status,
            "passed": self.passed,
            "tests": list(self.tests),
            "first_mismatch": self.first,
            "reason": self.reason,
            "build": {"cached": self.build_cached, "seconds": round(self.build_seconds, 3)},
            "sim_seconds": round(self.sim_seconds, 3),
        }


def describe_mismatch(first: dict[str, Any]) -> str:
    """A harness's first mismatch as a person reads it: step, cycle, and the values as Verilog
    writes them (the harness shows them so: ``8'h1f``, ``4'b10x1``)."""
    return (
        f"step {first.get('step')}, cycle {first.get('cycle')}: "
        f"{first.get('port')} expected {first.get('expected')}, got {first.get('got')}"
    )


def simulate(
    design: Design,
    plan: Plan,
    *,
    simulator: str = DEFAULT_BACKEND,
    limits: Limits | None = None,
    cache_root: Path | None = None,
    executor: Executor | None = None,
) -> SimReport:
    """Validate ``plan`` against ``design``, build the design and run every test of the plan
    (on ``executor``; default: a process on this machine)."""
    limits = limits or Limits()
    validate(plan, design, limits.max_cycles)
    executor = executor or LocalExecutor()
    schemata = design_schemata(design, simulator, cache_root)
    build = executor.build(schemata)
    evaluation = Evaluation("sim", compile_plan(plan, design), stop_on_fail=False, cycles=plan_cycles(plan, design))
    start = time.perf_counter()
    result = executor.run(schemata, [evaluation], limits)[evaluation.id]
    tests = result.tests
    if result.status in ("timeout", "error") and len(tests) < len(plan.tests):
        done = {t["name"] for t in tests}
        tests = tests + tuple(
            {"name": t.name, "passed": None, "mismatch": None} for t in plan.tests if t.name not in done
        )
    return SimReport(
        design=design.name,
        plan=plan.source,
        status=result.status,
        tests=tests,
        first=result.first,
        reason=result.reason,
        build_cached=build.cached,
        build_seconds=build.seconds,
        sim_seconds=time.perf_counter() - start,
        fault=result.fault,
    )
