"""Seeded constrained-random stimulus, and plans whose expectations come from golden.

The stimulus respects the design: inputs get values within their width (with a bias towards
corner values: 0, all ones, one-hot, the sign bit), the clock and reset ports are left to
the harness, and sequential tests advance the clock one cycle per drive and sample all
outputs after each edge. Filling the samples with golden's outputs turns a stimulus into a
plan that passes on golden by construction: the built-in offline policy, and the witnesses
of killable mutants.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from hwtp.plans.format import Plan, Step, TestCase
from hwtp.plans.values import Value
from hwtp.rtl.design import Design, Port


@dataclass(frozen=True)
class StimulusConfig:
    """Shape of random tests."""

    tests: int = 4  # tests per plan
    cycles: int = 12  # clock cycles (sequential) or input vectors (combinational) per test
    hold: float = 0.3  # chance an input keeps its previous value in a cycle
    corner: float = 0.3  # chance a driven value is a corner value
    reset_chance: float = 0.05  # chance of a mid-test reset step per cycle (designs with reset)


def _corner_values(port: Port) -> list[int]:
    top = (1 << port.width) - 1
    values = {0, top, 1, 1 << (port.width - 1), top >> 1}
    return sorted(v for v in values if 0 <= v <= top)


def _value(port: Port, rng: random.Random, config: StimulusConfig) -> int:
    if rng.random() < config.corner:
        return rng.choice(_corner_values(port))
    return rng.getrandbits(port.width)


def random_test(design: Design, rng: random.Random, name: str, config: StimulusConfig) -> TestCase:
    """One random test: drives and ``sample`` steps (outputs recorded, not checked)."""
    inputs = [p for p in design.inputs if p.name not in design.control_ports]
    current: dict[str, int] = {}
    steps: list[Step] = []
    for _ in range(config.cycles):
        drive = {}
        for port in inputs:
            if port.name in current and rng.random() < config.hold:
                continue
            drive[port.name] = _value(port, rng, config)
        current.update(drive)
        if drive:
            steps.append(Step("drive", tuple((n, Value(v)) for n, v in drive.items())))
        if design.reset and rng.random() < config.reset_chance:
            steps.append(Step("reset", count=1))
        if design.clock:
            steps.append(Step("wait", count=1))
        steps.append(Step("sample"))
    return TestCase(name, tuple(steps), "constrained-random stimulus")


def random_stimulus(design: Design, seed: int, config: StimulusConfig | None = None, prefix: str = "rand") -> Plan:
    """A plan-shaped stimulus (with ``sample`` steps) of ``config.tests`` random tests."""
    config = config or StimulusConfig()
    rng = random.Random(seed)
    tests = tuple(random_test(design, rng, f"{prefix}_{i}", config) for i in range(config.tests))
    return Plan(tests, source=f"stimulus(seed={seed})")


def fill_expectations(
    stimulus: Plan,
    design: Design,
    traces: list[list[Any]],
    description: str = "expected outputs from the golden design",
) -> Plan:
    """Turn every ``sample`` step into an ``expect`` of golden's recorded outputs.

    ``traces[i]`` is the harness trace of test ``i`` on golden: ``[step, cycle, values]``
    per sample. Outputs golden left unknown (x) become don't-care.
    """
    outputs = design.outputs
    tests = []
    for test, trace in zip(stimulus.tests, traces, strict=True):
        by_step = {int(step): values for step, _cycle, values in trace}
        steps = []
        for index, step in enumerate(test.steps, start=1):
            if step.kind != "sample":
                steps.append(step)
                continue
            values = by_step[index]
            expect = tuple((p.name, Value(v)) for p, v in zip(outputs, values, strict=True) if isinstance(v, int))
            if expect:
                steps.append(Step("expect", expect))
            elif design.clock is None:
                steps.append(Step("wait", count=1))  # keep the settle point (see hwtp.mutators.witness)
        tests.append(TestCase(test.name, tuple(steps), description))
    return Plan(tuple(tests), stimulus.reasoning, stimulus.source)
