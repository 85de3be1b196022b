"""``hwtp score``: plans x states in the schemata build, batched, giving rewards.

A sample is a (state, plan) pair. Each plan is evaluated once on golden, and once on each
state it is scored on; the golden evaluation is shared by all its samples. Outcomes follow
Rewards (docs/explanation/rewards-and-advantages.md):
``invalid`` and ``golden_fail`` earn the invalid level, ``passed`` the
golden-pass level, ``detected`` the detect level; a ``timeout`` or ``error`` is
indeterminate (never a kill). Under a dense reward scheme (:mod:`hwtp.scoring.scheme`) each plan is
also run on every killable mutant and its reward is the share it kills.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

from hwtp.errors import PlanError, ScoreError
from hwtp.mutators.mutantset import GOLDEN, MutantClass, MutantSet
from hwtp.plans.files import PlanInput
from hwtp.plans.format import validate
from hwtp.scoring.reach import Observation, fields, summarize
from hwtp.scoring.scheme import (
    REFERENCE_PREFIX,
    RewardScheme,
    dense_ceiling,
    dense_reward,
    kills,
    reference_kills,
    targets,
)
from hwtp.scoring.scheme import killable as killable_ids
from hwtp.sim.executors.base import Executor, schemata_target, schemata_targets
from hwtp.sim.executors.local import LocalExecutor, run_batched
from hwtp.sim.job import CompiledTests, Evaluation, Limits, compile_plan, plan_cycles
from hwtp.sim.outputs import first_difference
from hwtp.sim.runner import Counters, EvalResult


class Outcome(str, Enum):
    """A sample's outcome (str-valued: the scores JSON and the run store hold the value)."""

    INVALID = "invalid"
    GOLDEN_FAIL = "golden_fail"
    PASSED = "passed"
    DETECTED = "detected"
    TIMEOUT = "timeout"
    ERROR = "error"


#: Outcomes that prove nothing (the simulation did not finish): never a reward a trainer uses.
INDETERMINATE = frozenset({Outcome.TIMEOUT, Outcome.ERROR})


@dataclass(frozen=True)
class RewardLevels:
    """Reward of each outcome level (docs/explanation/rewards-and-advantages.md)."""

    invalid: float = 0.0
    golden_pass: float = 1.0
    detect: float = 2.0

    def as_dict(self) -> dict[str, float]:
        return {"invalid": self.invalid, "golden_pass": self.golden_pass, "detect": self.detect}


@dataclass(frozen=True)
class ScoreConfig:
    """How ``hwtp score`` runs."""

    states: tuple[str, ...] | None = None  # None: all valid mutants + golden
    full_matrix: bool = False  # score tied plans on every state too
    jobs: int = 1
    isolated: bool = False  # one simulator process per evaluation
    limits: Limits = field(default_factory=Limits)
    rewards: RewardLevels = field(default_factory=RewardLevels)
    simulator: str = "verilator"
    cache_root: Path | None = None
    diagnose: bool = False  # activated / propagated / detected per sample (a build with probes)
    scheme: RewardScheme = field(default_factory=RewardScheme)  # how outcomes become rewards (hwtp.scoring.scheme)


@dataclass(frozen=True)
class SampleResult:
    plan: str
    state: str
    outcome: Outcome
    reward: float
    detail: dict[str, Any] | None = None
    ceiling: float | None = None  # the best reward attainable on this state
    stages: dict[str, Any] | None = None  # diagnose: activated / propagated / detected (docs/formats.md)

    def as_dict(self) -> dict[str, Any]:
        out = {
            "plan": self.plan,
            "state": self.state,
            "outcome": self.outcome.value,
            "reward": self.reward,
            "ceiling": self.ceiling,
            "detail": self.detail,
        }
        if self.stages is not None:
            out.update(self.stages)
        return out


@dataclass(frozen=True)
class Scores:
    design: str
    rewards: RewardLevels
    results: tuple[SampleResult, ...]
    states: tuple[str, ...]
    plans: tuple[str, ...]
    evaluations: int
    seconds: float
    build_seconds: float
    build_cached: bool
    mutant_set: str = ""
    scheme: RewardScheme = field(default_factory=RewardScheme)

    def as_dict(self) -> dict[str, Any]:
        return {
            "design": self.design,
            "mutant_set": self.mutant_set,
            "rewards": self.rewards.as_dict(),
            "reward_scheme": self.scheme.as_dict(),
            "results": [r.as_dict() for r in self.results],
            "stats": {
                "evaluations": self.evaluations,
                "seconds": round(self.seconds, 3),
                "golden_pass_rate": self.golden_pass_rate,
                "detection_rate": self.detection_rate,
            },
        }

    @property
    def golden_pass_rate(self) -> float:
        return golden_pass_rate(self.results)

    @property
    def detection_rate(self) -> float:
        return detection_rate(self.results)


def passed_golden(result: SampleResult) -> bool:
    """The sample's plan passed on golden: it passed or detected, or its mutant run timed out
    or failed after golden had passed (``detail["golden"] == "pass"``)."""
    return result.outcome in (Outcome.PASSED, Outcome.DETECTED) or (
        result.outcome in INDETERMINATE and bool(result.detail and result.detail.get("golden") == "pass")
    )


def rates(designs: Iterable[Iterable[SampleResult]]) -> tuple[float, float]:
    """(golden pass rate, detection rate) over the samples of one or more designs.

    The golden pass rate is the share of plans that pass on golden, a plan counted once however
    many states it is scored on; plan ids (``golden-s00``) repeat in every design, so plans are
    counted per design, never pooled across designs. The detection rate is the share of
    (mutant state, plan) samples where the plan detects the bug.
    """
    plans = passed = mutant = detected = 0
    for results in designs:
        by_plan: dict[str, bool] = {}
        for r in results:
            by_plan[r.plan] = by_plan.get(r.plan, False) or passed_golden(r)
            if r.state != GOLDEN:
                mutant += 1
                detected += r.outcome == Outcome.DETECTED
        plans += len(by_plan)
        passed += sum(by_plan.values())
    return (passed / plans if plans else 0.0), (detected / mutant if mutant else 0.0)


def golden_pass_rate(results: Iterable[SampleResult]) -> float:
    """Share of one design's plans that pass on golden (see :func:`rates`)."""
    return rates([results])[0]


def detection_rate(results: Iterable[SampleResult]) -> float:
    """Share of one design's (mutant state, plan) samples where the plan detects the bug."""
    return rates([results])[1]


def samples(
    plans: Sequence[PlanInput], states: list[tuple[str, int]], full_matrix: bool
) -> list[tuple[PlanInput, str]]:
    """(plan, state) pairs: tied plans on their state, plain plans on all."""
    names = [s for s, _ in states]
    out = []
    for p in plans:
        if p.state is not None and not full_matrix:
            out.append((p, p.state))
        else:
            out.extend((p, s) for s in names)
    return out


def _outcome(
    golden: EvalResult, state: EvalResult | None, levels: RewardLevels
) -> tuple[Outcome, float, dict[str, Any] | None]:
    if golden.status in ("timeout", "error"):
        return Outcome(golden.status), levels.invalid, {"on": GOLDEN, "reason": golden.reason}
    if golden.status == "fail":
        return Outcome.GOLDEN_FAIL, levels.invalid, golden.first
    if state is None or state.status == "pass":
        return Outcome.PASSED, levels.golden_pass, None
    if state.status == "fail":
        return Outcome.DETECTED, levels.detect, state.first
    return Outcome(state.status), levels.golden_pass, {"golden": "pass", "reason": state.reason}


@dataclass(frozen=True)
class Prepared:
    """What scoring needs to run: the samples, each plan compiled (or its error), the evaluations."""

    pairs: tuple[tuple[PlanInput, str], ...]
    errors: dict[str, str]
    evaluations: dict[str, Evaluation]
    states: tuple[str, ...]
    equivalent: frozenset[str] = frozenset()  # states proved equivalent: passing is their best
    scheme: RewardScheme = field(default_factory=RewardScheme)
    killable: tuple[str, ...] = ()  # dense schemes: the mutants every plan is run on (hwtp.scoring.scheme.killable)


def ceiling(state: str, equivalent: frozenset[str] | set[str], rewards: RewardLevels) -> float:
    """The best reward a plan can get on ``state``: the pass level on golden and on a mutant
    proved equivalent (no plan can detect it), the detect level on any other mutant."""
    return rewards.golden_pass if state == GOLDEN or state in equivalent else rewards.detect


def check_identity(plans: Sequence[PlanInput], mutant_set: MutantSet) -> None:
    """Refuse plans that ``hwtp plan`` wrote for another design or another mutant set: their
    state names (``golden``, ``m0001``) mean other RTL there."""
    name, hash_ = mutant_set.design.name, None
    for p in plans:
        meta = p.meta or {}
        if meta.get("design") and meta["design"] != name:
            raise ScoreError(
                f"{p.source or p.id}: plan {p.id} was written for design {meta['design']!r}, "
                f"but the mutant set is of design {name!r}"
            )
        if meta.get("mutant_set"):
            hash_ = hash_ or mutant_set.set_hash
            if meta["mutant_set"] != hash_:
                raise ScoreError(
                    f"{p.source or p.id}: plan {p.id} was written for mutant set {meta['mutant_set'][:12]} "
                    f"of {name}, not this one ({hash_[:12]}); plan again for this mutant set"
                )


def compile_input(p: PlanInput, design: Any, max_cycles: int) -> tuple[CompiledTests, int] | str:
    """A plan input's harness ops and cycles on ``design``, or why it cannot run (its reading
    error, or what :func:`hwtp.plans.format.validate` refuses). Ops compiled when it was read (the
    reward path's :class:`hwtp.plans.fastread.Reader`) are taken as they are."""
    if p.compiled is not None:
        return p.compiled
    try:
        if p.plan is None:
            raise PlanError(p.error or "no plan")
        validate(p.plan, design, max_cycles)
        return compile_plan(p.plan, design), plan_cycles(p.plan, design)
    except PlanError as exc:
        return str(exc)


def prepare(mutant_set: MutantSet, plans: Sequence[PlanInput], config: ScoreConfig) -> Prepared:
    """Validate and compile every plan; list the evaluations (each golden one shared)."""
    design = mutant_set.design
    scheme = config.scheme
    scheme.check(config.rewards)
    check_identity(plans, mutant_set)
    states = mutant_set.select(config.states)
    index = {GOLDEN: 0} | dict(states) | {m.id: m.index for m in mutant_set.valid}
    pairs = samples(plans, states, config.full_matrix)
    compiled: dict[str, tuple[Any, int]] = {}
    errors: dict[str, str] = {}
    mutants = killable_ids(mutant_set) if scheme.dense else ()
    reference = scheme.reference
    simulated = reference.plans if reference is not None and reference.killed is None else ()
    for p in [*plans, *(replace(r, id=REFERENCE_PREFIX + r.id) for r in simulated)]:
        ready = compile_input(p, design, config.limits.max_cycles)
        if isinstance(ready, str):
            errors[p.id] = ready
        else:
            compiled[p.id] = ready
    wanted: dict[str, Evaluation] = {}
    for p, state in pairs:
        if p.id in errors:
            continue
        if state not in index:
            raise ScoreError(f"plan {p.id} was written for state {state!r}, which this mutant set does not have")
        ops, cycles = compiled[p.id]
        for s in (GOLDEN, state, *mutants):
            key = f"{p.id}@{s}"
            wanted.setdefault(key, Evaluation(key, ops, index[s], cycles=cycles, observe=config.diagnose))
    for r in simulated:  # the reference suite's kills, in the same processes as the plans'
        key = REFERENCE_PREFIX + r.id
        if key in compiled:
            ops, cycles = compiled[key]
            for s in (GOLDEN, *mutants):
                wanted.setdefault(f"{key}@{s}", Evaluation(f"{key}@{s}", ops, index[s], cycles=cycles))
    equivalent = frozenset(m.id for m in mutant_set.valid if m.klass == MutantClass.EQUIVALENT)
    return Prepared(tuple(pairs), errors, wanted, tuple(s for s, _ in states), equivalent, scheme, mutants)


def stages(golden: EvalResult, mutant: EvalResult, detected: bool, incomplete: bool) -> dict[str, Any] | None:
    """Activated / propagated / detected of a plan on a mutant, from the observed evaluations of
    ``hwtp score --diagnose`` (None when they were not observed): each test's outputs compared
    with golden's same test, its activation probes; ``incomplete``: the probes do not cover all
    of the mutant's code (a probe that did not fire then says nothing)."""
    theirs = {t.get("name"): t.get("observed") for t in golden.tests}
    observations = []
    for test in mutant.tests:
        seen, base = test.get("observed"), theirs.get(test.get("name"))
        if not seen:
            continue
        activated = seen.get("activated")
        propagated, first = first_difference(base["outputs"], seen["outputs"]) if base else (None, None)
        step_ns = float(seen.get("step_ns", 0.0))
        observations.append(
            Observation(
                str(test.get("name")),
                None if activated is False and incomplete else activated,
                seen.get("activated_ns") if activated else None,
                propagated,
                first[0] * step_ns if first else None,
                first[1] if first else None,
                not test.get("passed", True),
            )
        )
    if not observations:
        return None
    summary = summarize(observations, detected)
    out = fields(summary, detected, observations)
    out["reached"] = summary.reached.value
    out["diagnosis"] = None if detected else summary.diagnosis.value
    return out


def assemble(
    prepared: Prepared, results: dict[str, EvalResult], rewards: RewardLevels, incomplete: frozenset[str] = frozenset()
) -> list[SampleResult]:
    """Samples' outcomes and rewards from the evaluation results (and, for observed evaluations,
    each sample's stages; ``incomplete``: mutants whose code the probes do not fully cover).
    Under a dense scheme the outcome is still the plan's on its own state; the reward and the
    ceiling are the scheme's (:func:`dense_sample`)."""
    scheme = prepared.scheme
    counted: tuple[str, ...] = ()
    if scheme.dense:
        reference = scheme.reference
        done = frozenset() if reference is None else reference_kills(reference, prepared.killable, results)
        counted = targets(scheme, prepared.killable, done)
    out = []
    for p, state in prepared.pairs:
        top = dense_ceiling(rewards, counted) if scheme.dense else ceiling(state, prepared.equivalent, rewards)
        if p.id in prepared.errors:
            reason = {"reason": prepared.errors[p.id]}
            out.append(SampleResult(p.id, state, Outcome.INVALID, rewards.invalid, reason, top))
            continue
        golden = results[f"{p.id}@{GOLDEN}"]
        other = None if state == GOLDEN else results[f"{p.id}@{state}"]
        outcome, reward, detail = _outcome(golden, other, rewards)
        if scheme.dense and golden.status == "pass":
            outcome, reward, detail = dense_sample(p.id, outcome, detail, prepared, results, rewards, counted)
        seen = None
        if other is not None and outcome in (Outcome.PASSED, Outcome.DETECTED):
            seen = stages(golden, other, outcome == Outcome.DETECTED, state in incomplete)
        out.append(SampleResult(p.id, state, outcome, reward, detail, top, seen))
    return out


def dense_sample(
    plan: str,
    outcome: Outcome,
    detail: dict[str, Any] | None,
    prepared: Prepared,
    results: dict[str, EvalResult],
    rewards: RewardLevels,
    counted: Sequence[str],
) -> tuple[Outcome, float, dict[str, Any] | None]:
    """A dense scheme's sample of a plan that passed golden: its reward from its kills over
    ``counted``, the record in ``detail["kills"]``; indeterminate when an evaluation on a
    killable mutant did not finish (the reward recorded counts it as not killed)."""
    killed, unfinished = kills(plan, prepared.killable, results)
    reward, record = dense_reward(prepared.scheme, rewards, killed, counted)
    if unfinished is not None and outcome not in INDETERMINATE:
        outcome = Outcome(unfinished.status)
        mutant = unfinished.id.rpartition("@")[2]
        detail = {"golden": "pass", "on": mutant, "reason": unfinished.reason}
    return outcome, reward, {**(detail or {}), "kills": record}


def schemata_build(
    mutant_set: MutantSet, simulator: str = "verilator", cache_root: Path | None = None, probes: bool = False
) -> Any:
    """The (cached) schemata build of a mutant set whose schemata is one build (``probes``: with
    activation probes, a build of its own); :func:`schemata_targets` for any set."""
    return schemata_target(mutant_set, simulator, cache_root, probes).build()


def score(
    mutant_set: MutantSet,
    plans: Sequence[PlanInput],
    config: ScoreConfig,
    progress: Callable[[int], None] | None = None,
    counters: Counters | None = None,
    executor: Executor | None = None,
) -> Scores:
    """Score ``plans`` on the states of ``mutant_set`` (on ``executor``; default: this machine,
    ``config.jobs`` processes, or one per evaluation with ``config.isolated``)."""
    prepared = prepare(mutant_set, plans, config)
    evaluations = list(prepared.evaluations.values())
    schemata = schemata_targets(mutant_set, config.simulator, config.cache_root, config.diagnose)
    executor = executor or LocalExecutor(config.jobs, config.isolated)
    builds = executor.build(schemata)  # an executor that builds on its workers' nodes reports none here
    start = time.perf_counter()
    results = executor.run(schemata, evaluations, config.limits, progress=progress, counters=counters)
    seconds = time.perf_counter() - start
    incomplete: frozenset[str] = frozenset()
    if config.diagnose:
        coverage = {i: c for part in schemata.parts for i, c in part.coverage.items()}
        incomplete = frozenset(
            m.id for m in mutant_set.valid if m.index not in coverage or not coverage[m.index].complete
        )
    out = assemble(prepared, results, config.rewards, incomplete)
    return Scores(
        mutant_set.design.name,
        config.rewards,
        tuple(out),
        prepared.states,
        tuple(p.id for p in plans),
        len(prepared.evaluations),
        seconds,
        builds.seconds,
        builds.cached,
        mutant_set.set_hash,
        config.scheme,
    )


def run_evaluations(
    build: Any,
    design: Any,
    evaluations: list[Evaluation],
    config: ScoreConfig,
    progress: Callable[[int], None] | None = None,
    counters: Counters | None = None,
    on_result: Callable[[EvalResult], None] | None = None,
    workdir: Path | None = None,
) -> dict[str, EvalResult]:
    """Run evaluations batched over ``config.jobs`` processes, or one process each (isolated)."""
    return run_batched(
        build, design, evaluations, config.limits, config.jobs, config.isolated, progress, counters, on_result, workdir
    )
