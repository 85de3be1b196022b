"""The batched reward core: (ground truth, completion) pairs to rewards, as ``hwtp score`` gives them.

Work is grouped per (design, mutant set): each group's completions become plans (the
response only: :class:`hwtp.planread.Reader` compiles them in one pass, and what it cannot
decide exactly :func:`hwtp.plan.extract_plan` reads), tied to their state, a chunk handed to
the workers while the next is read, and go through the scoring path of ``hwtp score``
(:func:`hwtp.score.prepare`, the evaluations, :func:`hwtp.score.assemble`), so a plan gets
the same reward here as from ``hwtp score`` on the same state. Identical completions for one
state are simulated once. An invalid plan earns the invalid level (outcome ``invalid``, the
reason in ``detail``); a timeout or error is indeterminate: reward None, never a number a
trainer would learn from. The reward scheme (:mod:`hwtp.scheme`) is the configured one; an
incremental scheme's reference kills are simulated once per mutant set and reference.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hwtp import env, planread
from hwtp.errors import ConfigError, PlanError, RewardError
from hwtp.executors.base import EXECUTORS, Schemata, schemata_targets
from hwtp.executors.choice import make_executor
from hwtp.mutantset import GOLDEN, MutantClass, MutantSet
from hwtp.plan import extract_plan, to_data
from hwtp.planset import PlanInput
from hwtp.rewards.completion import example_keys, is_example, response_text
from hwtp.rewards.registry import Registry
from hwtp.rewards.truth import GroundTruth, GroundTruthLike, parse_truth
from hwtp.scheme import (
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
from hwtp.score import (
    INDETERMINATE,
    Prepared,
    RewardLevels,
    SampleResult,
    ScoreConfig,
    assemble,
    ceiling,
    prepare,
)
from hwtp.sim import warm
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
    scheme: str = "smu"  # the reward scheme that computed it (hwtp.scheme)

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


def _default_workers() -> int:
    text = env.get(env.REWARD_WORKERS_VAR)
    if text is not None:
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(f"{env.REWARD_WORKERS_VAR}={text!r}: expected a whole number of workers") from None
        if value < 1:
            raise ConfigError(f"{env.REWARD_WORKERS_VAR}={text!r}: at least 1 worker")
        return value
    return max(1, min(4, os.cpu_count() or 1))


@dataclass(frozen=True)
class Settings:
    """How rewards are computed; change with :func:`configure`."""

    states: tuple[Path, ...] | None = None  # None: the folders of $HWTP_STATES, read at each call
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
    penalty: float | None = None  # incremental; None: $HWTP_REWARD_PENALTY, else hwtp.scheme.DEFAULT_PENALTY
    reference: Path | None = None  # incremental; None: $HWTP_REWARD_REFERENCE, else the mutant set's run folder

    def folders(self) -> tuple[Path, ...]:
        if self.states is not None:
            return self.states
        text = env.get(env.STATES_VAR) or ""
        return tuple(Path(p).expanduser() for p in text.split(os.pathsep) if p.strip())

    def worker_count(self) -> int:
        return self.workers if self.workers is not None else _default_workers()

    def executor_name(self) -> str:
        """``local`` or ``ray``: as configured, else ``$HWTP_REWARD_EXECUTOR`` (set for the
        trainer's processes when they load the reward functions by path), else local."""
        if self.executor is not None:
            return self.executor
        text = (env.get(env.REWARD_EXECUTOR_VAR) or "local").strip()
        if text not in EXECUTORS:
            raise ConfigError(f"{env.REWARD_EXECUTOR_VAR}={text!r}: expected one of {', '.join(EXECUTORS)}")
        return text

    def reward_scheme(self) -> RewardScheme:
        """The scheme as configured, else from ``$HWTP_REWARD_SCHEME``/``$HWTP_REWARD_PENALTY``, else smu."""
        name = self.scheme if self.scheme is not None else (env.get(env.REWARD_SCHEME_VAR) or "smu").strip()
        problem = check_name(name)
        if problem:
            raise ConfigError(f"{env.REWARD_SCHEME_VAR}={name!r}: {problem}")
        penalty = self.penalty
        if penalty is None and env.get(env.REWARD_PENALTY_VAR):
            text = env.get(env.REWARD_PENALTY_VAR) or ""
            try:
                penalty = float(text)
            except ValueError:
                raise ConfigError(f"{env.REWARD_PENALTY_VAR}={text!r}: expected a number") from None
        scheme = RewardScheme(name) if penalty is None else RewardScheme(name, penalty)
        scheme.check(self.rewards)
        return scheme

    def reference_of(self, mutant_set: MutantSet) -> Path:
        """The incremental scheme's reference suite for ``mutant_set``: as configured, else
        ``$HWTP_REWARD_REFERENCE``, else the run folder the set was found in (its best plans)."""
        if self.reference is not None:
            return self.reference
        text = env.get(env.REWARD_REFERENCE_VAR)
        if text:
            return Path(text).expanduser()
        root = mutant_set.root
        run = root.parents[2] if root is not None and len(root.parents) > 2 else None
        if run is not None and is_run_folder(run):
            return run
        raise RewardError(
            f"reward scheme incremental: design {mutant_set.design.name!r} was found outside a run folder, so it "
            f"has no accumulated best plans; name a reference suite with configure(reference=...) or "
            f"{env.REWARD_REFERENCE_VAR}"
        )


_lock = threading.Lock()
_settings = Settings()
_registries: dict[tuple[Path, ...], Registry] = {}


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
    Arguments left None keep their value. Returns the settings in force."""
    global _settings
    if workers is not None and workers < 1:
        raise ConfigError(f"workers={workers}: at least 1")
    if executor is not None and executor not in EXECUTORS:
        raise ConfigError(f"executor={executor!r}: expected one of {', '.join(EXECUTORS)}")
    if reward_scheme is not None and check_name(reward_scheme):
        raise ConfigError(f"reward_scheme={reward_scheme!r}: {check_name(reward_scheme)}")
    if penalty is not None:
        RewardScheme(INCREMENTAL, penalty)  # refused here, not at the first reward
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
    changes = {k: v for k, v in given.items() if v is not None}
    with _lock:
        before = _settings
        _settings = replace(_settings, **changes)
        after = _settings
    if _simulation(before) != _simulation(after):
        _close_pools()  # the next call makes pools with the new settings
    return after


def _simulation(s: Settings) -> tuple[Any, ...]:
    ray = (s.executor, s.ray_address, s.ray_cpus, s.ray_chunk)
    return (s.workers, s.limits, s.simulator, s.cache_root, s.idle_seconds, *ray)


def _close_pools() -> None:
    global _remote
    with _lock:
        keys = list(_pool_keys)
        _pool_keys.clear()
        remote, _remote = _remote, None
    if remote is not None:
        remote.close()
    live = warm.pools()
    for key in keys:
        pool = live.get(key)
        if pool is not None:
            pool.close()


def reset() -> None:
    """Back to the defaults ($HWTP_STATES); forget indexed folders and close the warm pools made here."""
    global _settings
    with _lock:
        _settings = Settings()
        _registries.clear()
        _references.clear()
        _readers.clear()
        _schemata.clear()
    _close_pools()


def settings() -> Settings:
    return _settings


def _registry(folders: tuple[Path, ...]) -> Registry:
    with _lock:
        reg = _registries.get(folders)
        if reg is None:
            reg = _registries[folders] = Registry(folders)
        return reg


def find_mutant_set(truth: GroundTruth) -> MutantSet:
    """The mutant set a ground truth names; :class:`RewardError` when it is not in the folders."""
    return _registry(_settings.folders()).find(truth.design, truth.mutant_set)


# --------------------------------------------------------------------------- evaluations

_pool_keys: set[str] = set()  # the warm pools made here (hwtp.sim.warm.pool_for keys)
_schemata: dict[tuple[str, str, str], Schemata] = {}  # (set hash, simulator, cache): its schemata builds' targets
_remote: Any = None  # hwtp.executors.ray.RayExecutor (imported with ray), made on first use with executor="ray"


def _schemata_of(mutant_set: MutantSet, set_digest: str, config: Settings) -> Schemata:
    """The targets of the set's schemata builds (one per part), made once per set."""
    key = (set_digest, config.simulator, str(config.cache_root))
    with _lock:
        found = _schemata.get(key)
    if found is None:
        found = schemata_targets(mutant_set, config.simulator, config.cache_root)
        with _lock:
            found = _schemata.setdefault(key, found)
    return found


def _joined(futures: list[Future[dict[str, Any]]]) -> Future[dict[str, Any]]:
    """One future of the merged results of ``futures`` (one per schemata build)."""
    if len(futures) == 1:
        return futures[0]
    out: Future[dict[str, Any]] = Future()
    left = [len(futures)]

    def done(_: Future[dict[str, Any]]) -> None:
        with _lock:
            left[0] -= 1
            last = left[0] == 0
        if not last:
            return
        try:
            merged: dict[str, Any] = {}
            for f in futures:
                merged.update(f.result())
            out.set_result(merged)
        except BaseException as exc:  # handed to the caller through the future
            out.set_exception(exc)

    for f in futures:
        f.add_done_callback(done)
    return out


def _ray_submit(mutant_set: MutantSet, set_digest: str, evaluations: list[Any], config: Settings) -> Any:
    """A future of the evaluations' results from the Ray actors (their warm pools), each
    evaluation on the schemata build of its selector value."""
    global _remote
    schemata = _schemata_of(mutant_set, set_digest, config)
    with _lock:
        if _remote is None:
            _remote = make_executor("ray", address=config.ray_address, cpus=config.ray_cpus, chunk=config.ray_chunk)
        remote = _remote
    futures = [remote.submit(schemata.targets[i], group, config.limits) for i, group in schemata.split(evaluations)]
    return _joined(futures)


def executor_stats() -> dict[str, Any]:
    """Where simulations run (``name``) and, once the Ray executor is in use, its counters and
    the names of the actors it shares (:meth:`hwtp.executors.ray.RayExecutor.snapshot`)."""
    remote = _remote
    if remote is None:
        return {"name": _settings.executor_name()}
    return {"name": remote.name, **remote.snapshot()}


def _pool(mutant_set: MutantSet, set_digest: str, part: int = 0) -> warm.WarmPool:
    """The warm pool of schemata build ``part`` of ``mutant_set`` (``set_digest``: its hash,
    already checked against the ground truth, so it is not computed again per call)."""
    config = _settings
    schemata = _schemata_of(mutant_set, set_digest, config)
    key = f"{mutant_set.design.name}:{set_digest}" + (f":{part + 1}" if part else "")

    def make() -> warm.WarmPool:
        return warm.WarmPool(
            schemata.targets[part].build(),
            mutant_set.design,
            workers=config.worker_count(),
            limits=config.limits,
            idle_seconds=config.idle_seconds,
            budget=warm.budget_for(f"{mutant_set.design.name}:{set_digest}", config.worker_count()),
        )

    with _lock:
        _pool_keys.add(key)
    return warm.pool_for(key, make, max_pools=max(8, len(schemata.targets)))


def _local_submit(mutant_set: MutantSet, set_digest: str, evaluations: list[Any]) -> Any:
    """A future of the evaluations' results from the set's warm pools, each evaluation in the
    pool of the schemata build of its selector value."""
    schemata = _schemata_of(mutant_set, set_digest, _settings)
    return _joined([_pool(mutant_set, set_digest, i).submit(group) for i, group in schemata.split(evaluations)])


# --------------------------------------------------------------------------- scoring

#: Completions compiled per pool submission in a batch.
_CHUNK = 16


def _plan_input(text: Any, state: str, prompt: str | None, reader: planread.Reader | None = None) -> PlanInput:
    """The plan of one completion, or an invalid input with the reason: whatever the completion
    holds (not text, not Unicode, a plan that does not parse), it costs only its own reward.
    ``reader``: the fast reader of the design the plan is scored on (:mod:`hwtp.planread`);
    what it cannot decide, and every completion without one, takes the path below, which
    writes the located messages."""
    if not isinstance(text, str):
        reason = f"completion: expected text, got {type(text).__name__}"
        return PlanInput("x" + hashlib.sha256(reason.encode()).hexdigest()[:16], None, reason, state, "completion")
    response = response_text(text, prompt)
    read = planread.UNDECIDED
    if reader is not None:
        try:
            read = reader.read(response)
        except Exception:  # never a reward of its own: the path below decides
            _log.debug("hwtp.rewards: the fast plan reader failed; reading the plan again", exc_info=True)
    if isinstance(read, tuple):
        tests, ops, cycles = read
        key = planread.plan_key(tests)
        if key not in example_keys(prompt):  # an example plan: the path below says so
            return PlanInput(key, None, None, state, "completion", compiled=(ops, cycles))
    plan_id = "c" + hashlib.sha256(response.encode("utf-8", errors="surrogatepass")).hexdigest()[:16]
    if read == planread.NO_PLAN:
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
    return PlanInput(planread.plan_key(to_data(plan).get("tests")), plan, None, state, "completion")


_readers: dict[tuple[str, int], planread.Reader] = {}  # (set hash, cycle limit): the design's reader


def _reader(mutant_set: MutantSet, digest: str, max_cycles: int) -> planread.Reader:
    key = (digest, max_cycles)
    with _lock:
        reader = _readers.get(key)
        if reader is None:
            reader = _readers[key] = planread.Reader(mutant_set.design, max_cycles)
        return reader


_references: dict[tuple[str, str, float], Reference] = {}  # (set hash, suite, penalty): its kills, simulated once


def scheme_for(mutant_set: MutantSet, digest: str, config: Settings | None = None) -> RewardScheme:
    """The configured scheme for ``mutant_set`` (``digest``: its hash); for incremental with its
    reference suite's kills, simulated on the set's first use and kept."""
    config = config or _settings
    scheme = config.reward_scheme()
    if scheme.name != INCREMENTAL:
        return scheme
    path = config.reference_of(mutant_set)
    key = (digest, str(path), scheme.penalty)
    with _lock:
        known = _references.get(key)
    if known is None:
        if not path.exists():
            raise RewardError(f"reward scheme incremental: reference suite {path} does not exist")
        suite = load_reference(path, mutant_set)
        probe = ScoreConfig(limits=config.limits, rewards=config.rewards, scheme=replace(scheme, reference=suite))
        prepared = prepare(mutant_set, [], probe)
        results = _submit(mutant_set, digest, list(prepared.evaluations.values()), config).result()
        killed = reference_kills(suite, prepared.killable, results)
        known = Reference(suite.source, (), killed)
        with _lock:
            _references[key] = known
    return replace(scheme, reference=known)


def _submit(mutant_set: MutantSet, digest: str, evaluations: list[Any], config: Settings) -> Any:
    """A future of the evaluations' results: the set's warm pool here, or the Ray actors."""
    if config.executor_name() == "ray":
        return _ray_submit(mutant_set, digest, evaluations, config)
    return _local_submit(mutant_set, digest, evaluations)


def ceiling_of(truth: GroundTruth) -> float:
    """The best reward attainable on a ground truth's state under the configured scheme."""
    mutant_set = find_mutant_set(truth)
    config = _settings
    scheme = scheme_for(mutant_set, truth.mutant_set, config)
    if not scheme.dense:
        equivalent = frozenset(m.id for m in mutant_set.valid if m.klass == MutantClass.EQUIVALENT)
        return ceiling(truth.state, equivalent, config.rewards)
    killed = scheme.reference.killed if scheme.reference is not None else None
    return dense_ceiling(config.rewards, targets(scheme, killable(mutant_set), killed or frozenset()))


def _result(sample: SampleResult, truth: GroundTruth, scheme: str = "smu") -> RewardResult:
    outcome = sample.outcome.value
    detail = dict(sample.detail or {})
    reward: float | None = sample.reward
    if outcome in INDETERMINATE:
        reward = None
        detail["indeterminate"] = True
    return RewardResult(reward, outcome, detail, truth.design, truth.state, sample.ceiling, scheme)


def _score_group(
    mutant_set: MutantSet, members: list[tuple[int, GroundTruth, str, str | None]], out: list[RewardResult | None]
) -> None:
    states = {m.id for m in mutant_set.valid} | {GOLDEN}
    for _index, truth, _text, _prompt in members:  # every ground truth checked before any work
        if truth.state not in states:
            raise RewardError(
                f"ground truth state {truth.state!r} is not a state of mutant set {truth.mutant_set[:12]} "
                f"of design {truth.design!r} (golden or a valid mutant id)"
            )
    config = _settings
    digest = members[0][1].mutant_set
    scheme = scheme_for(mutant_set, digest, config)
    score_config = ScoreConfig(limits=config.limits, rewards=config.rewards, scheme=scheme)
    reader = _reader(mutant_set, digest, config.limits.max_cycles)
    pending: list[tuple[Prepared, Any]] = []  # (chunk, a future of its results, or None)

    def submit(chunk: list[PlanInput]) -> None:
        prepared = prepare(mutant_set, chunk, score_config)
        evaluations = list(prepared.evaluations.values())
        pending.append((prepared, _submit(mutant_set, digest, evaluations, config) if evaluations else None))

    # read a chunk, hand it to the workers, read the next one while they simulate (the first
    # chunk is half as large, so that they start sooner)
    seen: set[tuple[str, str]] = set()
    keys: list[tuple[int, GroundTruth, tuple[str, str]]] = []
    fresh: list[PlanInput] = []
    for index, truth, text, prompt in members:
        p = _plan_input(text, truth.state, prompt, reader)
        key = (p.id, p.state or GOLDEN)
        if key not in seen:
            seen.add(key)
            fresh.append(p)
        keys.append((index, truth, key))
        if len(fresh) >= (_CHUNK if pending else _CHUNK // 2):
            submit(fresh)
            fresh = []
    if fresh:
        submit(fresh)
    samples = {}
    for prepared, future in pending:
        results: dict[str, Any] = future.result() if future is not None else {}
        samples.update({(s.plan, s.state): s for s in assemble(prepared, results, config.rewards)})
    for index, truth, key in keys:
        out[index] = _result(samples[key], truth, scheme.name)


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
    if prompts is not None and len(prompts) != len(items):
        raise RewardError(f"{len(prompts)} prompts for {len(items)} completions")
    groups: dict[tuple[str, str], list[tuple[int, GroundTruth, str, str | None]]] = {}
    for i, (raw, text) in enumerate(items):
        truth = parse_truth(raw)
        prompt = prompts[i] if prompts is not None else None
        groups.setdefault((truth.design, truth.mutant_set), []).append((i, truth, text, prompt))
    sets = {key: find_mutant_set(members[0][1]) for key, members in groups.items()}  # all found before any work
    out: list[RewardResult | None] = [None] * len(items)
    for key, members in groups.items():
        _score_group(sets[key], members, out)
    return [r for r in out if r is not None]
