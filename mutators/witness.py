"""Killability: search for witnesses with seeded random stimulus in the schemata build.

Each round simulates one random stimulus on golden and on every mutant still without a
witness, all in one simulator process (the selector switches mutants). The first sample
where a mutant's outputs differ from golden's gives its witness: the stimulus up to that
point with golden's outputs expected there, a plan that passes on golden and fails on the
mutant. Mutants never told apart within the budget stay ``unknown``.

Every evaluation has a short wall-clock budget (``eval_s``; a stimulus simulates in
milliseconds): a mutant whose evaluation exceeds it does not terminate (a loop whose exit
was mutated away) and is not simulated again. The whole search has a time budget
(``total_s``); mutants not searched by then stay ``unknown``. Both are limits the executor
honours (:class:`hwtp.sim.job.Limits` ``total_s`` and ``drop_hung``), so the search runs on any
executor; each evaluation runs in the schemata build that holds its mutant (golden: the first).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from hwtp.errors import DesignError
from hwtp.mutators.stimulus import StimulusConfig, random_stimulus
from hwtp.plans.format import Plan, Step, TestCase
from hwtp.plans.values import Value
from hwtp.progress import counter
from hwtp.rtl.design import Design
from hwtp.sim.executors.base import Executor, Schemata
from hwtp.sim.executors.local import LocalExecutor
from hwtp.sim.job import Evaluation, Limits, compile_plan, plan_cycles
from hwtp.sim.runner import EvalResult


@dataclass(frozen=True)
class WitnessConfig:
    """Budget and shape of the witness search."""

    cycles: int = 2000  # simulated cycles per mutant before giving up (--witness-cycles)
    seed: int = 0
    stimulus: StimulusConfig = field(default_factory=lambda: StimulusConfig(tests=4, cycles=16))
    jobs: int = 1
    eval_s: float = 3.0  # wall-clock seconds per evaluation; over it a mutant is non-terminating
    total_s: float = 300.0  # wall-clock seconds for the whole search (the build not counted)
    startup_s: float = 60.0  # CPU s for a simulator process to become ready (hwtp.sim.runner)


@dataclass(frozen=True)
class Search:
    """What the witness search found: witness plans, non-terminating mutants (id -> reason)
    and how many mutants the time budget left unsearched."""

    witnesses: dict[str, Plan]
    hung: dict[str, str]
    unsearched: int = 0


def _round_cost(design: Design, stimulus: StimulusConfig) -> int:
    """Budget one round uses: clock cycles, or input vectors for a combinational design."""
    sample = random_stimulus(design, 0, stimulus)
    vectors = sum(1 for t in sample.tests for s in t.steps if s.kind == "sample")
    return max(1, plan_cycles(sample, design), vectors)


def _first_difference(golden: list[Any], mutant: list[Any]) -> int | None:
    """Index of the first sample whose outputs differ (golden known there), else None."""
    for i, (g, m) in enumerate(zip(golden, mutant, strict=False)):
        if any(isinstance(gv, int) and gv != mv for gv, mv in zip(g[2], m[2], strict=True)):
            return i
    return None


def _witness(design: Design, stimulus: Plan, test_index: int, sample: list[Any], mutant_id: str) -> Plan:
    """The stimulus test up to ``sample``'s step, expecting golden's outputs there."""
    test = stimulus.tests[test_index]
    step_index = int(sample[0])
    # A sample also let inputs settle: on a combinational design, where logic may hold state
    # (a mutant can turn an assignment into a latch), it becomes a `wait: 1` so the plan
    # evaluates the same sequence of input vectors.
    settle = Step("wait", count=1)
    kept = [s if s.kind != "sample" else settle for s in test.steps[: step_index - 1]]
    if design.clock is not None:
        kept = [s for s in kept if s is not settle]
    expect = tuple((p.name, Value(v)) for p, v in zip(design.outputs, sample[2], strict=True) if isinstance(v, int))
    steps = (*kept, Step("expect", expect))
    description = f"witness for {mutant_id}: outputs at cycle {sample[1]} differ from the golden design"
    return Plan((TestCase(f"witness_{mutant_id}", steps, description),), source=f"witness {mutant_id}")


def find_witnesses(
    schemata: Schemata,
    mutants: list[tuple[str, int]],
    config: WitnessConfig,
    executor: Executor | None = None,
) -> Search:
    """Witness plans and non-terminating mutants; ``mutants`` pairs ids with selector values.
    Simulated on ``executor`` (default: ``config.jobs`` processes on this machine), its builds
    made first (not counted in ``config.total_s``).

    Two batched phases, each one executor call: a short first pass (most mutants die at
    once), then the rest of the budget in one go for the survivors. Process start-up, not
    simulation, is what costs: one process per round would dominate.
    """
    executor = executor or LocalExecutor(config.jobs)
    executor.build(schemata)
    design = schemata.targets[0].design
    deadline = time.monotonic() + config.total_s
    rounds = max(1, config.cycles // _round_cost(design, config.stimulus))
    remaining = dict(mutants)
    found: dict[str, Plan] = {}
    hung: dict[str, str] = {}
    golden_ok, golden_problem = False, None
    for first, last in ((0, min(2, rounds)), (min(2, rounds), rounds)):
        if not remaining or first >= last or time.monotonic() > deadline:
            continue
        stimuli = {r: random_stimulus(design, config.seed * 100_003 + r, config.stimulus, prefix=f"r{r}")
                   for r in range(first, last)}
        evaluations = []
        for r, stimulus in stimuli.items():
            compiled, cycles = compile_plan(stimulus, design), plan_cycles(stimulus, design)
            evaluations.append(Evaluation(f"{r}:golden", compiled, 0, stop_on_fail=False, cycles=cycles))
            evaluations += [Evaluation(f"{r}:{mid}", compiled, k, stop_on_fail=False, cycles=cycles)
                            for mid, k in remaining.items()]
        limits = Limits(wall_s=config.eval_s, total_s=max(0.0, deadline - time.monotonic()), drop_hung=True)
        tick = counter(f"witness search, rounds {first + 1}-{last}", len(evaluations))
        results = executor.run(schemata, evaluations, limits, progress=tick)
        for mid in list(remaining):
            reason = next((results[f"{r}:{mid}"].reason for r in stimuli
                           if results[f"{r}:{mid}"].fault == "hang"), None)
            if reason is not None:
                hung[mid] = reason
                del remaining[mid]
        for r, stimulus in stimuli.items():
            golden = results[f"{r}:golden"]
            if golden.status != "pass":
                if golden.fault in ("design", "hang"):
                    golden_problem = golden_problem or golden.reason
                continue  # golden itself misbehaved on this stimulus: it proves nothing
            golden_ok = True
            for mid in list(remaining):
                plan = _compare(design, stimulus, golden, results[f"{r}:{mid}"], mid)
                if plan is not None:
                    found[mid] = plan
                    del remaining[mid]
        if golden_problem and not golden_ok:
            break  # golden cannot be simulated: searching on is pointless
    if golden_problem and not golden_ok:
        raise DesignError(
            f"{design.name}: the design stopped the simulator on every random stimulus tried: {golden_problem}"
        )
    unsearched = len(remaining) if time.monotonic() > deadline else 0
    return Search(found, hung, unsearched)


def replay(
    schemata: Schemata,
    stimuli: dict[str, tuple[Plan, int]],
    config: WitnessConfig,
    executor: Executor | None = None,
) -> dict[str, Plan]:
    """Witnesses from given stimuli (mutant id -> (stimulus, selector value)), e.g. formal
    counterexamples: each runs on golden and on its mutant in one executor call, and gives a
    witness (golden's outputs expected where they first differ) only when the simulator sees
    the difference too."""
    if not stimuli:
        return {}
    executor = executor or LocalExecutor(config.jobs)
    design = schemata.targets[0].design
    evaluations = []
    for mid, (stimulus, index) in stimuli.items():
        compiled, cycles = compile_plan(stimulus, design), plan_cycles(stimulus, design)
        evaluations.append(Evaluation(f"{mid}:golden", compiled, 0, stop_on_fail=False, cycles=cycles))
        evaluations.append(Evaluation(f"{mid}:mutant", compiled, index, stop_on_fail=False, cycles=cycles))
    limits = Limits(wall_s=config.eval_s, startup_s=config.startup_s, drop_hung=True)
    results = executor.run(schemata, evaluations, limits)
    found = {}
    for mid, (stimulus, _) in stimuli.items():
        golden = results[f"{mid}:golden"]
        plan = _compare(design, stimulus, golden, results[f"{mid}:mutant"], mid) if golden.status == "pass" else None
        if plan is not None:
            found[mid] = plan
    return found


def _compare(design: Design, stimulus: Plan, golden: EvalResult, mutant: EvalResult, mid: str) -> Plan | None:
    if mutant.status != "pass":
        return None  # a timeout or crash proves nothing
    for i, (g, m) in enumerate(zip(golden.tests, mutant.tests, strict=False)):
        where = _first_difference(g.get("trace", []), m.get("trace", []))
        if where is not None:
            return _witness(design, stimulus, i, g["trace"][where], mid)
    return None
