"""``hwtp ci``: mutation-test an existing cocotb testbench, and gate CI on its score.

The design's mutants (:func:`hwtp.mutators.engine.mutate`) are compiled once, as mutant schemata, with
the user's own top module. The user's cocotb tests then run unchanged: first on golden
(``+hwtp_mutant=0``; if they fail there, nothing else is run), then once per mutant: many
mutants per simulator process when that is sound (:mod:`hwtp.ci.shared` checks it), else each
in its own process, ``jobs`` processes at a time. A mutant is *killed* when any test fails,
*survived* when all pass; a run over the timeout is stopped and the mutant is *timeout*, one that
crashes or writes no results is *error*: both are indeterminate, neither killed nor survived.
``timeouts_as`` chooses how timeouts count (errors are always left out)::

    excluded (default): score = killed / (valid - equivalent - not_elaborated - indeterminate)
    killed:             score = (killed + timeout) / (valid - equivalent - not_elaborated - error)
    survived:           score = killed / (valid - equivalent - not_elaborated - error)

*equivalent* mutants are proved so (by construction, or by the Yosys miter of
:mod:`hwtp.mutators.formal` with ``formal`` on); *not_elaborated* ones sit in code the configured
parameters never elaborate (:mod:`hwtp.ci.elaborated`): neither is run.

``shard=(i, n)`` runs the i-th of n deterministic slices of the valid mutants (every n-th,
from the i-th); :mod:`hwtp.ci.shards` merges the slices' JSON reports into the unsharded one.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

from hwtp.ci import baseline
from hwtp.ci.config import CiConfig
from hwtp.ci.diagnosis import Watch
from hwtp.ci.elaborated import elaboration
from hwtp.ci.runs import Run, TestOutcome, TestStatus, run_tests
from hwtp.ci.shared import power_on_job, run_mutants, run_once
from hwtp.errors import EXIT_INPUT, DesignError, HwtpError, ToolchainError
from hwtp.mutators import engine, mutantset
from hwtp.mutators.formal import yosys as formal_yosys
from hwtp.mutators.formal.classify import FormalConfig
from hwtp.mutators.formal.classify import check as formal_check
from hwtp.mutators.formal.miter import Bounds
from hwtp.mutators.mutantset import MutantClass, MutantStatus
from hwtp.mutators.probes import Coverage
from hwtp.rtl.design import Design, clock_candidates, edge_signals
from hwtp.scoring.reach import Diagnosis, Observation, Reached, Summary, explain, fields, summarize
from hwtp.sim import procs
from hwtp.sim.backends import get_backend
from hwtp.sim.buildcache import Build, ensure_generated
from hwtp.sim.runner import EvalStatus

#: Timeout of the golden run when none is configured (the mutants' default derives from it).
GOLDEN_TIMEOUT_S = 300.0
#: A mutant's default limit: this many times golden's own run (the whole test run, process start
#: included), and never under the floor (a loaded machine slows a short run down the most).
TIMEOUT_FACTOR = 3.0
TIMEOUT_FLOOR_S = 15.0
_TIMEOUT_RULE = f"{TIMEOUT_FACTOR:g} x golden's run, at least {TIMEOUT_FLOOR_S:g} s; --timeout to change"
_TIMEOUTS_COUNT = {"excluded": "apart from survivors and out of the score", "killed": "as killed",
                   "survived": "as survived"}


def mutant_timeout(golden_seconds: float) -> float:
    """The per-mutant wall-clock limit when none is configured, from golden's own run time."""
    return round(max(TIMEOUT_FLOOR_S, TIMEOUT_FACTOR * golden_seconds), 1)


class TestbenchError(HwtpError):
    """The user's tests do not pass on the unmutated design (or do not run at all)."""

    __test__ = False
    exit_code = EXIT_INPUT


class Status(str, Enum):
    """What one mutant's run gave."""

    KILLED = "killed"
    SURVIVED = "survived"
    TIMEOUT = "timeout"  # indeterminate: the run was stopped after the timeout
    ERROR = "error"  # indeterminate: the simulator crashed or wrote no results
    EQUIVALENT = "equivalent"  # proved equivalent by hwtp mutate: not run, not counted
    NOT_ELABORATED = "not_elaborated"  # in code the configured parameters never elaborate: not run, not counted


INDETERMINATE = frozenset({Status.TIMEOUT, Status.ERROR})
#: Not run and out of the score: nothing a test could ever tell from golden.
UNSCORED = frozenset({Status.EQUIVALENT, Status.NOT_ELABORATED})
#: A mutant's status from its run's: the tests fail on it (killed) or pass (survived).
_FROM_RUN = {EvalStatus.FAIL: Status.KILLED, EvalStatus.PASS: Status.SURVIVED, EvalStatus.TIMEOUT: Status.TIMEOUT,
             EvalStatus.ERROR: Status.ERROR}


@dataclass(frozen=True)
class MutantResult:
    """One mutant, its source change and what the testbench did with it."""

    id: str
    operator: str
    file: str
    line: int
    col: int
    original: str
    replacement: str
    status: Status
    seconds: float = 0.0
    killed_by: tuple[str, ...] = ()  # failing tests (module.name)
    reason: str | None = None  # killed: the first failure; timeout/error: why
    golden_line: str = ""  # the source line, stripped
    mutant_line: str = ""  # the same line in the mutant
    diff: str = ""  # unified diff against golden
    key: str = ""  # stable identity for the survivor baseline (hwtp.ci.baseline.identity)
    observations: tuple[Observation, ...] = ()  # per test: activated, propagated, detected
    probe: str | None = None  # how activation is measured: value, reached, partial, none (None: not diagnosed)
    unprobed: str | None = None  # why activation is not (fully) measured for this mutant

    @property
    def one_line_diff(self) -> str:
        return f"{self.golden_line}  ->  {self.mutant_line}"

    @property
    def summary(self) -> Summary | None:
        """Activated / propagated / detected over its tests; None when it was not observed."""
        if not self.observations:
            return None
        return summarize(self.observations, self.status == Status.KILLED)

    @property
    def reached(self) -> Reached | None:
        """How far the tests took it (None: not run, or not observed)."""
        summary = self.summary
        if summary is None:
            return Reached.DETECTED if self.status == Status.KILLED else None
        return summary.reached

    @property
    def diagnosis(self) -> Diagnosis | None:
        """A survivor's diagnosis (None for other mutants); unknown when it was not observed."""
        if self.status != Status.SURVIVED:
            return None
        summary = self.summary
        return summary.diagnosis if summary is not None else Diagnosis.UNKNOWN

    @property
    def why(self) -> str:
        """A survivor's diagnosis in one sentence, with the first time and signal where known."""
        return explain(self.summary, self.probe, self.unprobed)

    def _diagnosis_dict(self) -> dict[str, Any]:
        reached, diagnosis = self.reached, self.diagnosis
        return {
            **fields(self.summary, self.status == Status.KILLED, self.observations),
            "reached": reached.value if reached else None,
            "diagnosis": diagnosis.value if diagnosis else None,
            "why": self.why if diagnosis else None,
            "probe": self.probe,
            "unprobed": self.unprobed,
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "operator": self.operator,
            "file": self.file,
            "line": self.line,
            "col": self.col,
            "original": self.original,
            "replacement": self.replacement,
            "status": self.status.value,
            "seconds": round(self.seconds, 3),
            "killed_by": list(self.killed_by),
            "reason": self.reason,
            "diff": self.diff,
            "golden_line": self.golden_line,
            "mutant_line": self.mutant_line,
            "key": self.key,
            **self._diagnosis_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MutantResult:
        return cls(d["id"], d["operator"], d["file"], int(d["line"]), int(d["col"]), d["original"],
                   d["replacement"], Status(d["status"]), float(d["seconds"]), tuple(d["killed_by"]),
                   d["reason"], d["golden_line"], d["mutant_line"], d["diff"], d["key"],
                   tuple(Observation.from_dict(o) for o in d.get("tests", [])), d.get("probe"), d.get("unprobed"))


@dataclass(frozen=True)
class CiReport:
    """Everything ``hwtp ci`` found; the reports (:mod:`hwtp.ci.reports`) render it."""

    design: str
    top: str
    root: Path  # the folder mutant files are relative to
    mutants: tuple[MutantResult, ...]
    golden: Run
    rejected: tuple[tuple[str, str], ...] = ()  # (mutant id, reason)
    min_score: float | None = None
    since: str | None = None
    seed: int = 0
    build_seconds: float = 0.0
    build_cached: bool = False
    timeout_s: float = 0.0
    seconds: float = 0.0
    test_modules: tuple[str, ...] = field(default=())
    timeouts_as: str = "excluded"  # how a timeout counts: excluded, killed or survived
    shard: tuple[int, int] | None = None  # (i, n): this report holds the i-th of n slices
    order: tuple[str, ...] = ()  # a shard's report: the ids of every valid mutant, in order
    baseline: baseline.Check | None = None  # the survivors against --baseline

    def count(self, status: Status) -> int:
        return sum(1 for m in self.mutants if m.status == status)

    @property
    def counts(self) -> dict[str, int]:
        killed, survived = self.count(Status.KILLED), self.count(Status.SURVIVED)
        timeout, error = self.count(Status.TIMEOUT), self.count(Status.ERROR)
        indeterminate = timeout + error
        scored = killed + survived + (timeout if self.timeouts_as != "excluded" else 0)
        return {
            "valid": len(self.mutants),
            "killed": killed,
            "survived": survived,
            "equivalent": self.count(Status.EQUIVALENT),
            "not_elaborated": self.count(Status.NOT_ELABORATED),
            "timeout": self.count(Status.TIMEOUT),
            "error": self.count(Status.ERROR),
            "indeterminate": indeterminate,
            "scored": scored,
            "rejected": len(self.rejected),
        }

    @property
    def detected(self) -> int:
        """The score's numerator: killed, plus timeouts when they count as killed."""
        return self.count(Status.KILLED) + (self.count(Status.TIMEOUT) if self.timeouts_as == "killed" else 0)

    @property
    def score(self) -> float | None:
        """The formula's value (see the module docstring); None when no mutant could be scored."""
        c = self.counts
        return self.detected / c["scored"] if c["scored"] else None

    @property
    def gate_passed(self) -> bool:
        """False when a survivor is new to the baseline; else true without a ``min_score``, else
        when the score reaches it.

        With no scorable mutant it passes only when none ran (all timing out is not a pass).
        """
        if self.baseline is not None and self.baseline.new:
            return False
        if self.min_score is None:
            return True
        c = self.counts
        if not c["scored"]:
            return c["indeterminate"] == 0
        return self.detected >= self.min_score * c["scored"] - 1e-9

    @property
    def survivors(self) -> tuple[MutantResult, ...]:
        return tuple(m for m in self.mutants if m.status == Status.SURVIVED)

    @property
    def formula(self) -> str:
        c = self.counts
        unscored = (f"valid {c['valid']} - equivalent {c['equivalent']}"
                    f" - not_elaborated {c.get('not_elaborated', 0)}")
        if self.timeouts_as == "excluded":
            return f"killed {c['killed']} / ({unscored} - indeterminate {c['indeterminate']})"
        top = f"(killed {c['killed']} + timeout {c['timeout']})" if self.timeouts_as == "killed" else \
            f"killed {c['killed']}"
        return f"{top} / ({unscored} - error {c['error']})"

    def as_dict(self) -> dict[str, Any]:
        out = {
            "design": self.design,
            "top": self.top,
            "score": self.score,
            "min_score": self.min_score,
            "gate_passed": self.gate_passed,
            "counts": self.counts,
            "formula": self.formula,
            "since": self.since,
            "seed": self.seed,
            "test_modules": list(self.test_modules),
            "golden": {
                "seconds": round(self.golden.seconds, 3),
                "tests": [f"{t.module}.{t.name}" for t in self.golden.tests],
            },
            "build": {"seconds": round(self.build_seconds, 3), "cached": self.build_cached},
            "timeout_s": self.timeout_s,
            "seconds": round(self.seconds, 3),
            "mutants": [m.as_dict() for m in self.mutants],
            "rejected": [{"id": i, "reason": r} for i, r in self.rejected],
            "timeouts_as": self.timeouts_as,
            "baseline": self.baseline.as_dict() if self.baseline else None,
        }
        if self.shard is not None:
            out["shard"] = {"index": self.shard[0], "count": self.shard[1], "order": list(self.order)}
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any], root: Path) -> CiReport:
        """A report from its JSON (``hwtp ci merge``); ``root``: where mutant files are relative to."""
        tests = tuple(TestOutcome(name.rpartition(".")[2], name.rpartition(".")[0], TestStatus.PASSED)
                      for name in d["golden"]["tests"])
        shard = d.get("shard")
        return cls(
            design=d["design"], top=d["top"], root=root,
            mutants=tuple(MutantResult.from_dict(m) for m in d["mutants"]),
            golden=Run(EvalStatus.PASS, tests, float(d["golden"]["seconds"])),
            rejected=tuple((r["id"], r["reason"]) for r in d["rejected"]),
            min_score=d["min_score"], since=d["since"], seed=int(d["seed"]),
            build_seconds=float(d["build"]["seconds"]), build_cached=bool(d["build"]["cached"]),
            timeout_s=float(d["timeout_s"]), seconds=float(d["seconds"]), test_modules=tuple(d["test_modules"]),
            timeouts_as=d.get("timeouts_as", "excluded"),
            shard=(int(shard["index"]), int(shard["count"])) if shard else None,
            order=tuple(shard["order"]) if shard else (),
            baseline=baseline.Check.from_dict(d["baseline"]) if d.get("baseline") else None,
        )


def _golden_problem(run: Run, config: CiConfig) -> str:
    if run.status == EvalStatus.TIMEOUT:
        return (
            f"the tests did not finish on the golden design within {run.seconds:.0f} s "
            f"(raise `timeout` in {config.source} or --timeout)"
        )
    if run.status == EvalStatus.ERROR:
        return (
            f"the tests did not run on the golden design (check tests.modules and tests.paths in "
            f"{config.source}): {run.reason}"
        )
    lines = [
        f"the tests fail on the golden design, before any mutation; fix them (or the design) first. "
        f"{len(run.failed)} of {len(run.tests)} failed:"
    ]
    for t in run.failed:
        lines.append(f"  {t.module}.{t.name}: {t.message}")
        lines.extend(f"    {ln}" for ln in t.detail.splitlines()[-8:])
    return "\n".join(lines)


def _proof_reason(proof: dict[str, Any] | None) -> str:
    """Why an equivalent mutant is not scored: its construction, or the formal proof's method."""
    if proof is None:
        return "equivalent by construction (hwtp mutate)"
    depth = f" (depth {proof['depth']})" if proof.get("depth") else ""
    return f"proved equivalent by Yosys: {proof.get('method', 'formal')}{depth}"


def _mutant_result(mutant_set: mutantset.MutantSet, m: mutantset.Mutant, run: Run | None,
                   coverage: Coverage | None = None, unreached: str | None = None) -> MutantResult:
    golden_text = mutant_set.design.source(m.file).text.splitlines()
    mutated = next(s for s in mutant_set.sources_of(m) if s.path == m.file).text.splitlines()
    g = golden_text[m.line - 1].strip() if m.line <= len(golden_text) else ""
    n = mutated[m.line - 1].strip() if m.line <= len(mutated) else ""
    killed_by: tuple[str, ...] = ()
    reason: str | None = _proof_reason(m.proof)
    status, seconds = Status.EQUIVALENT, 0.0
    if unreached is not None:
        status, reason = Status.NOT_ELABORATED, unreached
    elif run is not None:
        status = _FROM_RUN[run.status]
        killed_by = tuple(f"{t.module}.{t.name}" for t in run.failed)
        reason, seconds = run.reason, run.seconds
        if run.failed:
            reason = f"{killed_by[0]}: {run.failed[0].message}"
    return MutantResult(
        m.id,
        m.operator,
        m.file,
        m.line,
        m.col,
        m.original,
        m.replacement,
        status,
        seconds,
        killed_by,
        reason,
        g,
        n,
        mutant_set.diff(m),
        baseline.identity(m.file, m.operator, m.original, m.replacement, golden_text, m.line, m.col),
        run.observed if run is not None else (),
        coverage.kind if coverage else None,
        coverage.why if coverage else None,
    )


def _build(mutant_set: mutantset.MutantSet, config: CiConfig, cache_root: Path | None,
           note: Callable[[str], None] | None) -> tuple[list[tuple[Build, frozenset[int]]], dict[int, Coverage] | None]:
    """The schemata builds the tests run on (:func:`hwtp.mutators.mutantset.schemata_parts`; each with the
    selector values it holds, the first one runs golden): with activation probes when the run is
    diagnosed (:mod:`hwtp.mutators.probes`), and how each mutant's activation is measured; the
    plain schemata (and None) when not diagnosed or when the probed sources do not build (said
    through ``note``)."""
    backend = get_backend(config.simulator)
    design = mutant_set.design

    def built(parts: tuple[mutantset.SchemataPart, ...]) -> list[tuple[Build, frozenset[int]]]:
        builds = procs.map_threads(lambda p: ensure_generated(backend, p.sources, design.sources, config.top,
                                                              config.build, root=cache_root), list(parts), config.jobs)
        return [(b, p.indices) for b, p in zip(builds, parts, strict=True)]

    if config.diagnose:
        probed = mutantset.schemata_parts(mutant_set, with_probes=True)
        try:
            return built(probed), {i: c for p in probed for i, c in p.coverage.items()}
        except (DesignError, ToolchainError) as exc:
            if note:
                note(f"the schemata with activation probes did not build, so survivors are not diagnosed: {exc}")
    return built(mutantset.schemata_parts(mutant_set)), None


def _not_elaborated(mutant_set: mutantset.MutantSet, design: Design, config: CiConfig,
                    valid: list[mutantset.Mutant]) -> dict[str, str]:
    """The mutants whose every site lies in code the configured parameters do not elaborate,
    with the reason (:mod:`hwtp.ci.elaborated`)."""
    sites = [s for m in valid for s in m.sites]
    if not sites:
        return {}
    reached = elaboration(design.sources, config.top, config.build)
    given = ", ".join(f"{k}={v}" for k, v in config.build.parameters) or "their defaults"
    reason = f"not elaborated with the configured parameters ({given}): no test can reach it"
    return {m.id: reason for m in valid if m.sites and not any(reached.elaborated(s.file, s.start) for s in m.sites)}


def _prove_survivors(results: tuple[MutantResult, ...], mutant_set: mutantset.MutantSet, config: CiConfig,
                     note: Callable[[str], None] | None) -> tuple[MutantResult, ...]:
    """Survivors that the Yosys miter (:mod:`hwtp.mutators.formal`) proves equivalent to golden become
    ``equivalent``: no test could kill them, so they are out of the score and never "weak
    stimulus". Only survivors are checked (a killed mutant is no equivalent). ``formal``: off;
    auto (when Yosys is installed); on (Yosys required)."""
    survivors = {m.id for m in results if m.status == Status.SURVIVED}
    if config.formal == "off" or not survivors:
        return results
    if formal_yosys.find() is None:
        if config.formal == "on":
            formal_yosys.require()
        if note:
            note("survivors not checked for equivalence: Yosys is not installed (apt-get install yosys)")
        return results
    design = mutant_set.design
    clocks = clock_candidates(design.ports, edge_signals(design.sources), design.reset)
    if len(clocks) > 1 or (design.clock is None and clocks):
        if note:
            skipped = (f"several clocks ({', '.join(clocks)}; the checker models one)" if len(clocks) > 1
                       else f"the design is clocked but design.clock is not set in {config.source}")
            note(f"survivors not checked for equivalence: {skipped}")
        return results
    targets = [m for m in mutant_set.valid if m.id in survivors]
    # the project's own testbench samples when it likes: no edge-protocol proofs
    verdicts = formal_check(mutant_set, targets, FormalConfig(
        Bounds(depth=config.formal_depth, timeout_s=config.formal_timeout), jobs=config.jobs, build=config.build,
        plan_protocol=False, simulator=config.simulator))
    proved = {mid: v for mid, v in verdicts.items() if v.klass == MutantClass.EQUIVALENT}
    if note:
        why = Counter(str(v.proof.get("reason") or v.klass.value) for mid, v in verdicts.items() if mid not in proved)
        most = f"; most common reason the others were not: {why.most_common(1)[0][0]}" if why else ""
        note(f"{len(proved)} of {len(survivors)} survivors proved equivalent by Yosys (out of the score){most}")
    out = []
    for r in results:
        verdict = proved.get(r.id)
        if verdict is not None:
            r = replace(r, status=Status.EQUIVALENT, observations=(), reason=_proof_reason(verdict.proof))
        out.append(r)
    return tuple(out)


def run_ci(
    config: CiConfig,
    progress: Callable[[MutantResult], None] | None = None,
    on_mutants: Callable[[int], None] | None = None,
    workdir: Path | None = None,
    cache_root: Path | None = None,
    shard: tuple[int, int] | None = None,
    verify: bool = False,
    note: Callable[[str], None] | None = None,
    advance: Callable[[int], None] | None = None,
) -> CiReport:
    """Mutate, build once, run the tests on golden then on every valid mutant; return the report.

    Raises :class:`TestbenchError` when the tests fail (or do not run) on golden.
    ``on_mutants`` is told how many mutants will run; ``progress`` gets each result as it comes;
    ``cache_root`` overrides the build cache folder; ``shard`` = (i, n) runs the i-th of n slices;
    ``verify`` checks the shared process against a process per mutant again (:mod:`hwtp.ci.shared`);
    ``note`` is told how the mutants ran; ``advance`` how many more states a shared process finished
    (progress before its results are checked and told through ``progress``).
    """
    start = time.perf_counter()
    design = config.load_design()
    mutation = engine.MutationConfig(
        n=config.n,
        operators=config.operators,
        seed=config.seed,
        since=config.since,
        jobs=config.jobs,
        witness_cycles=0,
        simulator=config.simulator,
        build=config.build,
    )
    mutant_set = engine.mutate(design, mutation)
    builds, coverage = _build(mutant_set, config, cache_root, note)
    build = builds[0][0]
    valid = list(mutant_set.valid)
    if shard is not None:
        valid = valid[shard[0] - 1 :: shard[1]]
    unreached = _not_elaborated(mutant_set, design, config, valid)
    to_run = [m for m in valid if m.klass != MutantClass.EQUIVALENT and m.id not in unreached]
    with procs.tempdir("ci", workdir) as tmp:
        watch: Watch | None = None
        if coverage is not None:
            outputs = tuple(p.name for p in design.outputs)
            watch = Watch(outputs, record=Path(tmp) / "golden" / "record")
        golden = run_tests(build, config, 0, Path(tmp) / "golden", config.timeout_s or GOLDEN_TIMEOUT_S, watch)
        if watch is not None:
            incomplete = frozenset(i for i, c in (coverage or {}).items() if not c.complete)
            watch = Watch(watch.outputs, golden=watch.record, uncovered=incomplete)
        if golden.status != EvalStatus.PASS:
            raise TestbenchError(_golden_problem(golden, config))
        timeout_s = config.timeout_s or mutant_timeout(golden.seconds)
        if note:
            note(f"{len(to_run)} mutants to run, each stopped after {timeout_s:.0f} s "
                 f"({'timeout in ' + config.source if config.timeout_s else _TIMEOUT_RULE}); a stopped mutant is "
                 f"a timeout, counted {_TIMEOUTS_COUNT[config.timeouts_as]} (--timeouts-as)")
        if on_mutants:
            on_mutants(len(to_run))
        by_index = {m.index: m for m in to_run}

        probes = coverage or {}

        def told(index: int, run: Run) -> None:
            if progress:
                progress(_mutant_result(mutant_set, by_index[index], run, probes.get(index)))

        # Ctrl-C or a failure: the runners start nothing more and stop what runs
        sites = [(s.file, s.start) for m in to_run for s in m.sites]
        owners = [m.index for m in to_run for _ in m.sites]
        solo = {owners[i] for i in run_once(design.sources, config.build, sites)}
        runs: dict[int, Run] = {}
        notes: list[str] = []
        for part_build, indices in builds:  # each mutant in the build that holds it
            mine = [m.index for m in to_run if m.index in indices]
            if not mine:
                continue
            outcome = run_mutants(part_build, config, mine, golden, Path(tmp), timeout_s,
                                  power_on=power_on_job(design, config.build), verify=verify, progress=told,
                                  watch=watch, solo=solo, advance=advance,
                                  labels={m.index: f"{m.id} ({m.file}:{m.line})" for m in to_run if m.index in indices})
            runs.update(outcome.runs)
            notes += [outcome.note] if outcome.note not in notes else []
        if note and notes:
            note("; ".join(notes))
    results = tuple(_mutant_result(mutant_set, m, runs.get(m.index), probes.get(m.index), unreached.get(m.id))
                    for m in valid)
    results = _prove_survivors(results, mutant_set, config, note)
    rejected = tuple((m.id, m.reason or "rejected") for m in mutant_set.mutants if m.status != MutantStatus.VALID)
    return CiReport(
        design=design.name,
        top=config.top,
        root=design.root,
        mutants=results,
        golden=golden,
        rejected=rejected,
        min_score=config.min_score,
        since=config.since,
        seed=config.seed,
        build_seconds=build.seconds,
        build_cached=build.cached,
        timeout_s=timeout_s,
        seconds=time.perf_counter() - start,
        test_modules=config.test_modules,
        timeouts_as=config.timeouts_as,
        shard=shard,
        order=tuple(m.id for m in mutant_set.valid) if shard else (),
    )
