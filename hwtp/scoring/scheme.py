"""Reward schemes: how a scored plan becomes a number (docs/rewards.md, "Reward schemes").

- ``smu``: GRPO-SMu's levels on the plan's own state (invalid, golden_pass, detect): the default.
- ``kill-fraction``: a plan that passes golden earns golden_pass plus (detect - golden_pass)
  times the share of the design's killable mutants it detects, whatever its own state; every
  plan is run on every killable mutant in the schemata build (one process, the selector per
  evaluation), never a build per mutant.
- ``incremental``: the same share over the killable mutants a reference suite does not already
  kill; a plan that passes golden and kills none of them earns golden_pass - penalty.

Killable mutants are the valid mutants with a witness (class ``killable``): provably
detectable, so never equivalent. Timeouts and errors stay indeterminate under every scheme.
This module owns the formulas and ceilings; :mod:`hwtp.scoring.score` runs the evaluations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwtp.errors import ConfigError

if TYPE_CHECKING:
    from hwtp.mutators.mutantset import MutantSet
    from hwtp.plans.files import PlanInput
    from hwtp.scoring.score import RewardLevels
    from hwtp.sim.runner import EvalResult

SMU = "smu"
KILL_FRACTION = "kill-fraction"
INCREMENTAL = "incremental"
SCHEMES = (SMU, KILL_FRACTION, INCREMENTAL)
#: Penalty of an incremental-scheme plan that passes golden and kills nothing new.
DEFAULT_PENALTY = 0.5
#: Id prefix of a reference plan's evaluations (``ref:PLAN@STATE``): apart from the scored plans.
REFERENCE_PREFIX = "ref:"


@dataclass(frozen=True)
class Reference:
    """The suite an ``incremental`` reward is measured against.

    ``plans``: the suite's plans, simulated on golden and every killable mutant with the scored
    plans (reference plans that are invalid or fail golden kill nothing). ``killed``: the
    killable mutants the suite kills, when already known (the reward functions compute it once
    per mutant set); then ``plans`` are not simulated again.
    """

    source: str
    plans: tuple[PlanInput, ...] = ()
    killed: frozenset[str] | None = None


@dataclass(frozen=True)
class RewardScheme:
    """A reward scheme and its parameters (``--reward-scheme``, ``--reward-penalty``, ``--reference-suite``)."""

    name: str = SMU
    penalty: float = DEFAULT_PENALTY
    reference: Reference | None = None

    def __post_init__(self) -> None:
        problem = check_name(self.name)
        if problem:
            raise ConfigError(f"--reward-scheme: {problem}")
        if not (isinstance(self.penalty, (int, float)) and self.penalty >= 0):
            raise ConfigError(f"--reward-penalty: must be a number at least 0, got {self.penalty!r}")

    @property
    def dense(self) -> bool:
        """Every plan is scored against the design's whole set of killable mutants."""
        return self.name != SMU

    def check(self, levels: RewardLevels) -> None:
        """Refuse a penalty that would put a plan that passes golden below an invalid one."""
        if self.name == INCREMENTAL and self.penalty > levels.golden_pass - levels.invalid:
            raise ConfigError(
                f"--reward-penalty {self.penalty:g}: at most golden_pass - invalid "
                f"({levels.golden_pass - levels.invalid:g}), so a correct test never earns less than an invalid one"
            )

    def as_dict(self) -> dict[str, Any]:
        """What a result or manifest records: the name, and for ``incremental`` the penalty and reference."""
        out: dict[str, Any] = {"name": self.name}
        if self.name == INCREMENTAL:
            out["penalty"] = self.penalty
            out["reference"] = None if self.reference is None else self.reference.source
        return out


def check_name(name: Any) -> str | None:
    """What is wrong with a scheme name (None: nothing)."""
    if name not in SCHEMES:
        return f"unknown reward scheme {name!r} (valid: {', '.join(SCHEMES)})"
    return None


def killable(mutant_set: MutantSet) -> tuple[str, ...]:
    """The ids of the valid mutants a witness proves detectable: what a dense scheme counts."""
    from hwtp.mutators.mutantset import MutantClass

    return tuple(m.id for m in mutant_set.valid if m.klass == MutantClass.KILLABLE)


def kills(plan: str, mutants: Sequence[str], results: Mapping[str, EvalResult]) -> tuple[frozenset[str], Any]:
    """The mutants ``plan`` detects (failed there; the caller knows it passed golden), and the
    first evaluation that did not finish (timeout, error: never a kill), or None."""
    killed = set()
    unfinished = None
    for m in mutants:
        result = results[f"{plan}@{m}"]
        if result.status == "fail":
            killed.add(m)
        elif result.status != "pass" and unfinished is None:
            unfinished = result
    return frozenset(killed), unfinished


def reference_kills(reference: Reference, mutants: Sequence[str], results: Mapping[str, EvalResult]) -> frozenset[str]:
    """The killable mutants the reference suite kills: each of its plans that passed golden, on
    each mutant where it failed (an evaluation that did not finish kills nothing)."""
    if reference.killed is not None:
        return reference.killed
    killed: set[str] = set()
    for p in reference.plans:
        key = REFERENCE_PREFIX + p.id
        golden = results.get(f"{key}@golden")
        if golden is None or golden.status != "pass":
            continue
        killed |= kills(key, mutants, results)[0]
    return frozenset(killed)


def targets(scheme: RewardScheme, mutants: Sequence[str], reference_killed: frozenset[str]) -> tuple[str, ...]:
    """The mutants a plan's kills are counted over: the killable ones, less the reference's (incremental)."""
    if scheme.name == INCREMENTAL:
        return tuple(m for m in mutants if m not in reference_killed)
    return tuple(mutants)


def dense_ceiling(levels: RewardLevels, counted: Sequence[str]) -> float:
    """The best reward of a dense scheme on any state: detect when there is a mutant to count, else golden_pass."""
    return levels.detect if counted else levels.golden_pass


def dense_reward(
    scheme: RewardScheme, levels: RewardLevels, killed: frozenset[str], counted: Sequence[str]
) -> tuple[float, dict[str, Any]]:
    """The reward of a plan that passed golden and killed ``killed``, counted over ``counted``
    (:func:`targets`), and the record of its kills (``detail["kills"]``)."""
    hit = [m for m in counted if m in killed]
    record: dict[str, Any] = {"killed": len(hit), "of": len(counted)}
    if not counted:  # nothing to kill (no killable mutant, or the reference kills them all)
        return levels.golden_pass, record
    if scheme.name == INCREMENTAL and not hit:
        record["penalty"] = scheme.penalty
        return levels.golden_pass - scheme.penalty, record
    share = len(hit) / len(counted)
    return levels.golden_pass + (levels.detect - levels.golden_pass) * share, record


# --------------------------------------------------------------------------- building a scheme


def best_plans(rundir: Path, design: str) -> list[PlanInput]:
    """A design's accumulated best plans in a run folder: its stored plans that detected the
    mutant of their own state (their score stage done)."""
    from hwtp.plans.files import plan_input
    from hwtp.run.store import open_store
    from hwtp.scoring.score import Outcome

    with open_store(rundir, readonly=True) as store:
        detected = {s.plan for s in store.samples(design) if s.outcome == Outcome.DETECTED}
        return [plan_input(row.record, f"{rundir}:{row.plan}") for row in store.plans(design) if row.plan in detected]


def is_run_folder(path: Path) -> bool:
    from hwtp.run.store import DB_NAME

    return (path / DB_NAME).is_file()


def load_reference(path: Path, mutant_set: MutantSet) -> Reference:
    """The reference suite at ``path``: a run folder (the design's best plans there) or any plan
    input of ``hwtp score --plans`` (a plan file, a folder of plans, an ``hwtp plan`` folder)."""
    from hwtp.plans.files import read_plans

    plans = best_plans(path, mutant_set.design.name) if is_run_folder(path) else read_plans([str(path)])
    return Reference(str(path), tuple(plans))


def make_scheme(name: str | None, penalty: float | None = None, reference: Path | None = None) -> RewardScheme:
    """A scheme from options (None: the default); ``reference`` is checked here and read per
    design by :func:`with_reference`."""
    scheme = RewardScheme(name or SMU, DEFAULT_PENALTY if penalty is None else penalty)
    if reference is not None:
        if scheme.name != INCREMENTAL:
            raise ConfigError(f"--reference-suite: only the incremental scheme has a reference, not {scheme.name!r}")
        if not reference.exists():
            raise ConfigError(f"--reference-suite {reference}: no such file or folder")
    return scheme


def with_reference(scheme: RewardScheme, reference: Path | None, mutant_set: MutantSet) -> RewardScheme:
    """``scheme`` with its reference suite for ``mutant_set``'s design (``incremental`` only:
    other schemes are returned as they are; incremental without a suite is refused)."""
    if scheme.name != INCREMENTAL:
        return scheme
    if reference is None:
        raise ConfigError(
            "--reward-scheme incremental: name the reference suite with --reference-suite PATH "
            "(a run folder, whose best plans of the design are the suite, or a plan file or folder)"
        )
    return RewardScheme(scheme.name, scheme.penalty, load_reference(reference, mutant_set))


def recorded_scheme(docs: Sequence[Mapping[str, Any]], wanted: str | None = None) -> dict[str, Any]:
    """The one reward scheme that scored these scores documents (a document without one was
    scored by ``smu``); ``wanted``: the scheme they must have been scored with. A mix of schemes,
    or another scheme than ``wanted``, is refused: rewards of two schemes are not one scale."""
    found: dict[str, dict[str, Any]] = {}
    for doc in docs:
        raw = doc.get("reward_scheme") or {"name": SMU}
        record = dict(raw) if isinstance(raw, Mapping) else {"name": raw}
        found.setdefault(repr(sorted(record.items())), record).setdefault("design", doc.get("design"))
    if len(found) > 1:
        names = ", ".join(f"{r['name']} ({r.get('design')})" for r in found.values())
        raise ConfigError(f"the scores were made with different reward schemes: {names}; score them with one scheme")
    record = next(iter(found.values()), {"name": SMU})
    record.pop("design", None)
    if wanted is not None and record.get("name") != wanted:
        raise ConfigError(
            f"--reward-scheme {wanted}: the scores were made with reward scheme {record.get('name')!r}; "
            f"score again with hwtp score --reward-scheme {wanted}"
        )
    return record
