"""The batched reward core: (ground truth, completion) pairs to rewards, as ``hwtp score`` gives them.

Work is grouped per (design, mutant set): each group's completions become plans (the
response only: :class:`hwtp.plans.fastread.Reader` compiles them in one pass, and what it cannot
decide exactly :func:`hwtp.plans.format.extract_plan` reads), tied to their state, a chunk handed to
the workers while the next is read, and go through the scoring path of ``hwtp score``
(:func:`hwtp.scoring.score.prepare`, the evaluations, :func:`hwtp.scoring.score.assemble`), so a plan gets
the same reward here as from ``hwtp score`` on the same state. Identical completions for one
state are simulated once. An invalid plan earns the invalid level (outcome ``invalid``, the
reason in ``detail``); a timeout or error is indeterminate: reward None, never a number a
trainer would learn from. The reward scheme (:mod:`hwtp.scoring.scheme`) is the configured one; an
incremental scheme's reference kills are simulated once per mutant set and reference.

A :class:`Scorer`, made from a :class:`Settings` value, owns everything scoring keeps (its
mutant-set registry, schemata targets, plan readers, reference kills) and its executor
(:mod:`hwtp.sim.executors`: warm pools here, or Ray actors), through which every simulation
goes. The module-level functions (:func:`score_completions`, the trainer adapters,
``hwtp serve``) use the default scorer, made on first use; :func:`configure`, :func:`reset`
and :func:`settings` change, drop and read it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hwtp import env
from hwtp.errors import ConfigError, PlanError, RewardError
from hwtp.mutators.mutantset import GOLDEN, MutantClass, MutantSet
from hwtp.plans import fastread
from hwtp.plans.files import PlanInput
from hwtp.plans.format import extract_plan, to_data
from hwtp.rewards.completion import example_keys, is_example, response_text
from hwtp.rewards.registry import Registry
from hwtp.rewards.truth import GroundTruth, GroundTruthLike, parse_truth
from hwtp.scoring.scheme import (
    INCREMENTAL,
    Reference,
    RewardScheme,
    check_name,
    dense_ceiling,
    is_run_folder,
    killable,
    load_reference,
    reference_kills,
    targets,
)
from hwtp.scoring.score import (
    INDETERMINATE,
    Prepared,
    RewardLevels,
    SampleResult,
    ScoreConfig,
    assemble,
    ceiling,
    prepare,
)
from hwtp.sim import switching, warm
from hwtp.sim.cpus import usable_cpus
from hwtp.sim.executors.base import EXECUTORS, Executor, Schemata, schemata_targets
from hwtp.sim.executors.choice import make_executor
from hwtp.sim.job import Limits
from hwtp.yamlio import clean_text

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RewardResult:
    """The reward of one completion. ``reward`` is None only when indeterminate (timeout, error)."""

    reward: float | None
    outcome: str
    detail: dict[str, Any]
    design: str
    state: str
    ceiling: float | None = None  # the best reward attainable on this state
    scheme: str = "smu"  # the reward scheme that computed it (hwtp.scoring.scheme)

    @property
    def indeterminate(self) -> bool:
        return self.outcome in INDETERMINATE

    def as_dict(self) -> dict[str, Any]:
        return {
            "reward": self.reward,
            "outcome": self.outcome,
            "detail": self.detail,
            "design": self.design,
            "state": self.state,
            "ceiling": self.ceiling,
            "reward_scheme": self.scheme,
        }


def _environment_workers() -> int:
    text = env.get(env.REWARD_WORKERS_VAR)
    if text is not None:
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(f"{env.REWARD_WORKERS_VAR}={text!r}: expected a whole number of workers") from None
        if value < 1:
            raise ConfigError(f"{env.REWARD_WORKERS_VAR}={text!r}: at least 1 worker")
        return value
    return min(4, usable_cpus())


@dataclass(frozen=True)
class Settings:
    """How rewards are computed: a :class:`Scorer` is made from one (the default scorer's changes
    with :func:`configure`). Fields left None follow the environment: :meth:`resolved` reads it,
    in one place, and a scorer resolves its settings once per call (a variable changed between
    two calls is seen by the second)."""

    states: tuple[Path, ...] | None = None  # None: the folders of $HWTP_STATES
    workers: int | None = None  # None: $HWTP_REWARD_WORKERS, else min(4, CPUs)
    rewards: RewardLevels = field(default_factory=RewardLevels)
    limits: Limits = field(default_factory=Limits)
    simulator: str = "verilator"
    cache_root: Path | None = None
    idle_seconds: float = 300.0
    executor: str | None = None  # local: warm pools here; ray: Ray actors; None: $HWTP_REWARD_EXECUTOR, else local
    ray_address: str | None = None  # None: the Ray job this process runs in, else a new local one
    ray_cpus: float | None = None  # CPUs per Ray actor (None: 1)
    ray_chunk: int | None = None  # evaluations per Ray actor call (None: 64)
    scheme: str | None = None  # None: $HWTP_REWARD_SCHEME, else smu
    penalty: float | None = None  # incremental; None: $HWTP_REWARD_PENALTY, else hwtp.scoring.scheme.DEFAULT_PENALTY
    reference: Path | None = None  # incremental; None: $HWTP_REWARD_REFERENCE, else the mutant set's run folder
    #: Whether the fields left None are still to be read from the environment (False once resolved).
    unresolved: bool = field(default=True, repr=False, compare=False)

    def resolved(self) -> Settings:
        """These settings with every field left None read from the environment: the one place
        the reward settings read it. A bad value is a :class:`~hwtp.errors.ConfigError` naming
        the variable."""
        if not self.unresolved:
            return self
        states = self.states
        if states is None:
            text = env.get(env.STATES_VAR) or ""
            states = tuple(Path(p).expanduser() for p in text.split(os.pathsep) if p.strip())
        executor = self.executor
        if executor is None:
            executor = (env.get(env.REWARD_EXECUTOR_VAR) or "local").strip()
            if executor not in EXECUTORS:
                raise ConfigError(f"{env.REWARD_EXECUTOR_VAR}={executor!r}: expected one of {', '.join(EXECUTORS)}")
        scheme = self.scheme if self.scheme is not None else (env.get(env.REWARD_SCHEME_VAR) or "smu").strip()
        problem = check_name(scheme)
        if problem:
            raise ConfigError(f"{env.REWARD_SCHEME_VAR}={scheme!r}: {problem}")
        penalty = self.penalty
        if penalty is None and env.get(env.REWARD_PENALTY_VAR):
            text = env.get(env.REWARD_PENALTY_VAR) or ""
            try:
                penalty = float(text)
            except ValueError:
                raise ConfigError(f"{env.REWARD_PENALTY_VAR}={text!r}: expected a number") from None
        reference = self.reference
        if reference is None and env.get(env.REWARD_REFERENCE_VAR):
            reference = Path(env.get(env.REWARD_REFERENCE_VAR) or "").expanduser()
        workers = self.workers if self.workers is not None else _environment_workers()
        return replace(
            self, states=states, workers=workers, executor=executor, scheme=scheme, penalty=penalty,
            reference=reference, unresolved=False,
        )

    def folders(self) -> tuple[Path, ...]:
        return self.resolved().states or ()

    def worker_count(self) -> int:
        return self.resolved().workers or 1

    def executor_name(self) -> str:
        """``local`` or ``ray``: as configured, else ``$HWTP_REWARD_EXECUTOR`` (set for the
        trainer's processes when they load the reward functions by path), else local."""
        return self.resolved().executor or "local"

    def reward_scheme(self) -> RewardScheme:
        """The scheme as configured, else from ``$HWTP_REWARD_SCHEME``/``$HWTP_REWARD_PENALTY``, else smu."""
        s = self.resolved()
        name = s.scheme or "smu"
        scheme = RewardScheme(name) if s.penalty is None else RewardScheme(name, s.penalty)
        scheme.check(s.rewards)
        return scheme

    def reference_of(self, mutant_set: MutantSet) -> Path:
        """The incremental scheme's reference suite for ``mutant_set``: as configured, else
        ``$HWTP_REWARD_REFERENCE``, else the run folder the set was found in (its best plans)."""
        reference = self.resolved().reference
        if reference is not None:
            return reference
        root = mutant_set.root
        run = root.parents[2] if root is not None and len(root.parents) > 2 else None
        if run is not None and is_run_folder(run):
            return run
        raise RewardError(
            f"reward scheme incremental: design {mutant_set.design.name!r} was found outside a run folder, so it "
            f"has no accumulated best plans; name a reference suite with configure(reference=...) or "
            f"{env.REWARD_REFERENCE_VAR}"
        )


def _check_changes(workers: int | None, executor: str | None, reward_scheme: str | None, penalty: float | None) -> None:
    if workers is not None and workers < 1:
        raise ConfigError(f"workers={workers}: at least 1")
    if executor is not None and executor not in EXECUTORS:
        raise ConfigError(f"executor={executor!r}: expected one of {', '.join(EXECUTORS)}")
    if reward_scheme is not None and check_name(reward_scheme):
        raise ConfigError(f"reward_scheme={reward_scheme!r}: {check_name(reward_scheme)}")
    if penalty is not None:
        RewardScheme(INCREMENTAL, penalty)  # refused here, not at the first reward


def _simulation(s: Settings) -> tuple[Any, ...]:
    ray = (s.executor, s.ray_address, s.ray_cpus, s.ray_chunk)
    return (s.workers, s.limits, s.simulator, s.cache_root, s.idle_seconds, *ray)


def executor_for(config: Settings) -> Executor:
    """The executor ``config`` names: warm pools here (``config.worker_count()`` processes per
    mutant set, stopped after ``idle_seconds`` idle) or the Ray actors."""
    return make_executor(
        config.executor_name(),
        address=config.ray_address,
        jobs=config.worker_count(),
        cpus=config.ray_cpus,
        chunk=config.ray_chunk,
        warm=True,
        idle_seconds=config.idle_seconds,
    )


class Scorer:
    """Rewards of completions under one :class:`Settings` value.

    A scorer owns what it learns while it scores: the registry of the mutant sets it finds
    (the folders of ``settings``, or the ``mutant_sets`` it is given: then nothing is read from
    disk), each set's schemata targets and plan reader, the incremental scheme's reference
    kills, and its executor (``executor``, else the one the settings name, made on first use
    and closed by :meth:`close`). Thread-safe: ``hwtp serve`` scores from several threads.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        executor: Executor | None = None,
        mutant_sets: Sequence[MutantSet] | None = None,
    ) -> None:
        self._settings = settings or Settings()
        self._executor = executor
        self._owns_executor = executor is None
        self._given = None if mutant_sets is None else {(m.design.name, m.set_hash): m for m in mutant_sets}
        self._lock = threading.Lock()
        self._registries: dict[tuple[Path, ...], Registry] = {}
        self._schemata: dict[tuple[str, str, str], Schemata] = {}  # (set hash, simulator, cache): its targets
        self._readers: dict[tuple[str, int], fastread.Reader] = {}  # (set hash, cycle limit): the design's reader
        self._references: dict[tuple[str, str, float], Reference] = {}  # (set hash, suite, penalty): its kills

    @property
    def settings(self) -> Settings:
        return self._settings

    def __enter__(self) -> Scorer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def reconfigure(self, **changes: Any) -> Settings:
        """The settings with ``changes``; an executor made for the old ones is closed when what
        it simulates with changed (the next call makes one for the new ones)."""
        with self._lock:
            before = self._settings
            self._settings = after = replace(before, **changes, unresolved=True)
            stale = self._owns_executor and _simulation(before) != _simulation(after)
            old = self._executor if stale else None
            if stale:
                self._executor = None
        if old is not None:
            old.close()
        return after

    def close(self) -> None:
        """Close the executor this scorer made (its warm pools, its Ray actors) and forget what it learnt."""
        with self._lock:
            old = self._executor if self._owns_executor else None
            if self._owns_executor:
                self._executor = None
            self._registries.clear()
            self._references.clear()
            self._readers.clear()
            self._schemata.clear()
        if old is not None:
            old.close()

    # ----------------------------------------------------------------------- lookups

    def find_mutant_set(self, truth: GroundTruth, config: Settings | None = None) -> MutantSet:
        """The mutant set a ground truth names; :class:`RewardError` when it is not in the folders
        (of ``config``, default this scorer's settings)."""
        if self._given is not None:
            found = self._given.get((truth.design, truth.mutant_set))
            if found is None:
                known = ", ".join(f"{d} {h[:12]}" for d, h in self._given) or "none"
                raise RewardError(
                    f"mutant set {truth.mutant_set[:12]} of design {truth.design!r} is not one this scorer was "
                    f"given (it holds: {known})"
                )
            return found
        folders = (config or self._settings).folders()
        with self._lock:
            reg = self._registries.get(folders)
            if reg is None:
                reg = self._registries[folders] = Registry(folders)
        return reg.find(truth.design, truth.mutant_set)

    def executor(self) -> Executor:
        """Where this scorer's simulations run (made on first use from the settings)."""
        with self._lock:
            if self._executor is None:
                self._executor = executor_for(self._settings.resolved())
            return self._executor

    def executor_stats(self) -> dict[str, Any]:
        """Where simulations run (``name``) and, once the executor is in use, its counters
        (:meth:`hwtp.sim.executors.ray.RayExecutor.snapshot` for Ray)."""
        current = self._executor
        if current is None:
            return {"name": self._settings.executor_name()}
        return current.describe()

    def schemata_of(self, mutant_set: MutantSet, config: Settings) -> Schemata:
        """The targets of the set's schemata builds (one per part), made once per set."""
        key = (mutant_set.set_hash, config.simulator, str(config.cache_root))
        with self._lock:
            found = self._schemata.get(key)
        if found is None:
            found = schemata_targets(mutant_set, config.simulator, config.cache_root)
            with self._lock:
                found = self._schemata.setdefault(key, found)
        return found

    def reader(self, mutant_set: MutantSet, max_cycles: int) -> fastread.Reader:
        key = (mutant_set.set_hash, max_cycles)
        with self._lock:
            reader = self._readers.get(key)
            if reader is None:
                reader = self._readers[key] = fastread.Reader(mutant_set.design, max_cycles)
            return reader

    def submit(self, mutant_set: MutantSet, evaluations: list[Any], config: Settings) -> Future[dict[str, Any]]:
        """A future of the evaluations' results, each on the schemata build of its selector value."""
        return self.executor().submit(self.schemata_of(mutant_set, config), evaluations, config.limits)

    def scheme_for(self, mutant_set: MutantSet, config: Settings | None = None) -> RewardScheme:
        """The configured scheme for ``mutant_set``; for incremental with its reference suite's
        kills, simulated on the set's first use and kept."""
        config = (config or self._settings).resolved()
        scheme = config.reward_scheme()
        if scheme.name != INCREMENTAL:
            return scheme
        path = config.reference_of(mutant_set)
        key = (mutant_set.set_hash, str(path), scheme.penalty)
        with self._lock:
            known = self._references.get(key)
        if known is None:
            if not path.exists():
                raise RewardError(f"reward scheme incremental: reference suite {path} does not exist")
            suite = load_reference(path, mutant_set)
            probe = ScoreConfig(limits=config.limits, rewards=config.rewards, scheme=replace(scheme, reference=suite))
            prepared = prepare(mutant_set, [], probe)
            results = self.submit(mutant_set, list(prepared.evaluations.values()), config).result()
            killed = reference_kills(suite, prepared.killable, results)
            known = Reference(suite.source, (), killed)
            with self._lock:
                self._references[key] = known
        return replace(scheme, reference=known)

    def ceiling_of(self, truth: GroundTruth) -> float:
        """The best reward attainable on a ground truth's state under the configured scheme."""
        config = self._settings.resolved()
        mutant_set = self.find_mutant_set(truth, config)
        scheme = self.scheme_for(mutant_set, config)
        if not scheme.dense:
            equivalent = frozenset(m.id for m in mutant_set.valid if m.klass == MutantClass.EQUIVALENT)
            return ceiling(truth.state, equivalent, config.rewards)
        killed = scheme.reference.killed if scheme.reference is not None else None
        return dense_ceiling(config.rewards, targets(scheme, killable(mutant_set), killed or frozenset()))

    # ----------------------------------------------------------------------- scoring

    def score_completions(
        self, items: Sequence[tuple[GroundTruthLike, str]], prompts: Sequence[str | None] | None = None
    ) -> list[RewardResult]:
        """Rewards of (ground truth, completion) pairs, in order (see :func:`score_completions`)."""
        if prompts is not None and len(prompts) != len(items):
            raise RewardError(f"{len(prompts)} prompts for {len(items)} completions")
        config = self._settings.resolved()  # the environment read once for the whole call
        groups: dict[tuple[str, str], list[tuple[int, GroundTruth, str, str | None]]] = {}
        for i, (raw, text) in enumerate(items):
            truth = parse_truth(raw)
            prompt = prompts[i] if prompts is not None else None
            groups.setdefault((truth.design, truth.mutant_set), []).append((i, truth, text, prompt))
        sets = {key: self.find_mutant_set(members[0][1], config) for key, members in groups.items()}  # all first
        for key, members in groups.items():  # every ground truth checked before any work
            _check_states(sets[key], [truth for _i, truth, _t, _p in members])
        calls = _Calls(config.rewards)
        # one set after another, never waiting for one set's simulations before reading the next
        # set's plans, and one ramp of chunk sizes for the whole call: a batch of many designs
        # keeps the simulators busy to its end. Between two plans this thread serves the warm
        # simulators itself (hwtp.sim.warm.serving): their threads would each wait for the GIL
        # it holds while their simulators run dry
        with switching.responsive():  # the executor's I/O threads served while plans are read, and after
            with warm.serving() as pump:
                schemes = {
                    key: self._read_group(key, sets[key], members, calls, config, pump)
                    for key, members in groups.items()
                }
            calls.collect(wait=True)
        out: list[RewardResult | None] = [None] * len(items)
        for group, index, truth, key in calls.keys:
            out[index] = _result(calls.samples[group, key], truth, schemes[group])
        return [r for r in out if r is not None]

    def _read_group(
        self,
        group: tuple[str, str],
        mutant_set: MutantSet,
        members: list[tuple[int, GroundTruth, str, str | None]],
        calls: _Calls,
        config: Settings,
        pump: Callable[[], None],
    ) -> str:
        """Read the plans of one mutant set's completions and hand them to the workers, chunk by
        chunk (``calls`` collects the results); the name of the set's reward scheme."""
        scheme = self.scheme_for(mutant_set, config)
        score_config = ScoreConfig(limits=config.limits, rewards=config.rewards, scheme=scheme)
        reader = self.reader(mutant_set, config.limits.max_cycles)
        limit = _CHUNK * len(self.schemata_of(mutant_set, config).targets)
        # read a chunk, hand it to the workers, read the next one while they simulate: the call's
        # first chunk small, so that they start at once, then each twice the last up to _CHUNK
        # (a call keeps the workers busy from its first plans on); chunks already simulated are
        # assembled between two chunks, so that little is left to do once the last result is in
        seen: set[tuple[str, str]] = set()
        fresh: list[PlanInput] = []
        rest = iter(members)
        while True:
            with fastread.quiet():  # one redirection of rapidyaml's messages per chunk
                for index, truth, text, prompt in rest:
                    pump()
                    p = _plan_input(text, truth.state, prompt, reader)
                    key = (p.id, p.state or GOLDEN)
                    if key not in seen:
                        seen.add(key)
                        fresh.append(p)
                    calls.keys.append((group, index, truth, key))
                    if len(fresh) >= min(calls.size, limit):
                        break
            if not fresh:
                break
            prepared = prepare(mutant_set, fresh, score_config)
            evaluations = list(prepared.evaluations.values())
            future = self.submit(mutant_set, evaluations, config) if evaluations else None
            calls.pending.append((group, prepared, future))
            calls.collect(wait=False)
            fresh, calls.size = [], min(2 * calls.size, limit)
        return scheme.name


#: Completions in a call's first chunk, and at most per chunk and schemata build of a set.
_FIRST_CHUNK = 2
_CHUNK = 8


@dataclass
class _Calls:
    """The chunks of one ``score_completions`` call in flight, their samples once assembled, and
    which sample each completion gets ((set, plan id, state))."""

    rewards: RewardLevels
    pending: deque[tuple[tuple[str, str], Prepared, Future[dict[str, Any]] | None]] = field(default_factory=deque)
    samples: dict[tuple[tuple[str, str], tuple[str, str]], SampleResult] = field(default_factory=dict)
    keys: list[tuple[tuple[str, str], int, GroundTruth, tuple[str, str]]] = field(default_factory=list)
    size: int = _FIRST_CHUNK  # completions in the next chunk (the ramp's step)

    def collect(self, wait: bool) -> None:
        """Assemble the chunks whose results are in (in order; with ``wait``, every chunk)."""
        pending = self.pending
        while pending and (wait or pending[0][2] is None or pending[0][2].done()):
            group, prepared, future = pending.popleft()
            results: dict[str, Any] = future.result() if future is not None else {}
            for sample in assemble(prepared, results, self.rewards):
                self.samples[group, (sample.plan, sample.state)] = sample


def _check_states(mutant_set: MutantSet, truths: Sequence[GroundTruth]) -> None:
    """Every ground truth's state is golden or a valid mutant of ``mutant_set``."""
    states = {m.id for m in mutant_set.valid} | {GOLDEN}
    for truth in truths:
        if truth.state not in states:
            raise RewardError(
                f"ground truth state {truth.state!r} is not a state of mutant set {truth.mutant_set[:12]} "
                f"of design {truth.design!r} (golden or a valid mutant id)"
            )


# --------------------------------------------------------------------------- the default scorer

_default_lock = threading.Lock()
_default: Scorer | None = None


def default_scorer() -> Scorer:
    """The scorer of the module-level functions (the trainers' adapters, ``hwtp serve``): made
    on first use from the defaults, which read the environment (:class:`Settings`)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Scorer(Settings())
        return _default


def configure(
    states: Sequence[str | Path] | None = None,
    workers: int | None = None,
    rewards: RewardLevels | None = None,
    limits: Limits | None = None,
    simulator: str | None = None,
    cache_root: str | Path | None = None,
    idle_seconds: float | None = None,
    executor: str | None = None,
    ray_address: str | None = None,
    ray_cpus: float | None = None,
    ray_chunk: int | None = None,
    reward_scheme: str | None = None,
    penalty: float | None = None,
    reference: str | Path | None = None,
) -> Settings:
    """Set where mutant sets are found (``states``: run folders or ``hwtp mutate`` output
    folders; default ``$HWTP_STATES``), simulator processes per set (its builds' pools share them), reward levels
    (default ``hwtp score``'s 0,1,2), evaluation limits and simulator, and where simulations
    run (``executor``: ``local`` or ``ray``, on the cluster at ``ray_address`` or the one this
    process belongs to; ``ray_cpus`` per actor, ``ray_chunk`` evaluations per actor call), and
    the reward scheme (``reward_scheme``: smu, kill-fraction or incremental, default
    ``$HWTP_REWARD_SCHEME`` else smu; ``penalty`` and ``reference`` of incremental).
    Arguments left None keep their value. Returns the settings in force. These are the
    settings of the default scorer (:func:`default_scorer`); a :class:`Scorer` of its own
    takes a :class:`Settings` value instead."""
    _check_changes(workers, executor, reward_scheme, penalty)
    given: dict[str, Any] = {
        "states": None if states is None else tuple(Path(s).expanduser() for s in states),
        "workers": workers,
        "rewards": rewards,
        "limits": limits,
        "simulator": simulator,
        "cache_root": None if cache_root is None else Path(cache_root),
        "idle_seconds": idle_seconds,
        "executor": executor,
        "ray_address": ray_address,
        "ray_cpus": ray_cpus,
        "ray_chunk": ray_chunk,
        "scheme": reward_scheme,
        "penalty": penalty,
        "reference": None if reference is None else Path(reference).expanduser(),
    }
    return default_scorer().reconfigure(**{k: v for k, v in given.items() if v is not None})


def reset() -> None:
    """Back to the defaults ($HWTP_STATES); forget indexed folders and close the warm pools made here."""
    global _default
    with _default_lock:
        old, _default = _default, None
    if old is not None:
        old.close()


def settings() -> Settings:
    return default_scorer().settings


def find_mutant_set(truth: GroundTruth) -> MutantSet:
    """The mutant set a ground truth names (the default scorer's folders)."""
    return default_scorer().find_mutant_set(truth)


def executor_stats() -> dict[str, Any]:
    """Where the default scorer's simulations run (``name``) and, once the Ray executor is in
    use, its counters and the names of the actors it shares."""
    return default_scorer().executor_stats()


def ceiling_of(truth: GroundTruth) -> float:
    """The best reward attainable on a ground truth's state under the default scorer's scheme."""
    return default_scorer().ceiling_of(truth)


# --------------------------------------------------------------------------- scoring


def _plan_input(text: Any, state: str, prompt: str | None, reader: fastread.Reader | None = None) -> PlanInput:
    """The plan of one completion, or an invalid input with the reason: whatever the completion
    holds (not text, not Unicode, a plan that does not parse), it costs only its own reward.
    ``reader``: the fast reader of the design the plan is scored on (:mod:`hwtp.plans.fastread`);
    what it cannot decide, and every completion without one, takes the path below, which
    writes the located messages."""
    if not isinstance(text, str):
        reason = f"completion: expected text, got {type(text).__name__}"
        return PlanInput("x" + hashlib.sha256(reason.encode()).hexdigest()[:16], None, reason, state, "completion")
    response = response_text(text, prompt)
    read = fastread.UNDECIDED
    if reader is not None:
        try:
            read = reader.read(response)
        except Exception:  # never a reward of its own: the path below decides
            _log.debug("hwtp.rewards: the fast plan reader failed; reading the plan again", exc_info=True)
    if isinstance(read, tuple):
        key, ops, cycles = read
        if key not in example_keys(prompt):  # an example plan: the path below says so
            return PlanInput(key, None, None, state, "completion", compiled=(ops, cycles))
    plan_id = "c" + hashlib.sha256(response.encode("utf-8", errors="surrogatepass")).hexdigest()[:16]
    if read == fastread.NO_PLAN:
        return PlanInput(plan_id, None, read, state, "completion")
    try:
        plan = extract_plan(response, source="completion")
    except PlanError as exc:
        return PlanInput(plan_id, None, clean_text(str(exc)), state, "completion")
    except (ValueError, TypeError, RecursionError) as exc:  # never one item's fault to fail a batch
        _log.warning("hwtp.rewards: a completion could not be read (%s: %s); scored invalid", type(exc).__name__, exc)
        return PlanInput(plan_id, None, clean_text(f"completion: unreadable: {exc}"), state, "completion")
    if is_example(plan, prompt):
        return PlanInput(plan_id, None, "completion: the plan is the prompt's format example, not an answer", state)
    # the plan's id is its tests' content: completions that differ only in prose simulate once
    return PlanInput(fastread.plan_key(to_data(plan).get("tests")), plan, None, state, "completion")


def _result(sample: SampleResult, truth: GroundTruth, scheme: str = "smu") -> RewardResult:
    outcome = sample.outcome.value
    detail = dict(sample.detail or {})
    reward: float | None = sample.reward
    if outcome in INDETERMINATE:
        reward = None
        detail["indeterminate"] = True
    return RewardResult(reward, outcome, detail, truth.design, truth.state, sample.ceiling, scheme)


def score_completions(
    items: Sequence[tuple[GroundTruthLike, str]], prompts: Sequence[str | None] | None = None
) -> list[RewardResult]:
    """Rewards of (ground truth, completion) pairs, in order.

    ``completion`` is the response text (special tokens at its end are ignored); when it may
    start with its prompt, pass the prompts (one per item) so that the prompt is cut. A
    completion that cannot be read (not text, not Unicode such as a lone surrogate, no plan)
    costs only its own reward: outcome ``invalid``, the invalid level, the reason in ``detail``.
    A ground truth that is malformed or names a mutant set not in the configured folders (or
    whose hash differs) raises :class:`~hwtp.errors.RewardError`: a dataset or configuration
    fault, never turned into a reward.
    """
    return default_scorer().score_completions(items, prompts)
