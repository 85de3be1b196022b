"""Formal classification: each mutant ``equivalent`` (proved), ``killable`` (a counterexample
the simulator confirmed, kept as its witness) or ``unknown`` (with the reason).

One Yosys invocation prepares the design (read, elaborate, the selector wires, what the
checker cannot model), one more checks every mutant (:mod:`hwtp.mutators.formal.miter`); a mutant
that outlives its time limit or stops Yosys is ``unknown`` and the rest go on in a fresh
invocation. Every counterexample is replayed in the simulator, all in one job on the set's
schemata build, before it counts: a model that the simulator does not reproduce proves
nothing about the plans hwtp scores.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hwtp.mutators.formal import edges, miter, reading, trace, yosys
from hwtp.mutators.formal.trace import Outcome
from hwtp.mutators.mutantset import Mutant, MutantClass, MutantSet
from hwtp.mutators.witness import WitnessConfig, replay
from hwtp.plans.format import Plan
from hwtp.rtl.design import Design, SourceFile
from hwtp.sim import procs
from hwtp.sim.backends import DEFAULT_BACKEND, NO_OPTIONS, BuildOptions
from hwtp.sim.executors.base import schemata_targets

log = logging.getLogger("hwtp.mutators.formal")


@dataclass(frozen=True)
class FormalConfig:
    """Bounds of the checker and of the simulator replay."""

    bounds: miter.Bounds = field(default_factory=miter.Bounds)
    jobs: int = 1
    # wall-clock s per replay evaluation: a backstop (a counterexample of a few dozen cycles
    # simulates in milliseconds), so a loaded machine does not turn a replay into "not reproduced"
    eval_s: float = 30.0
    build: BuildOptions = NO_OPTIONS
    pdr: bool = True  # ABC pdr on clocked mutants left with a bounded proof only (when ABC is installed)
    # clock-edge proofs that hold only under hwtp's drive/sample protocol (plans sample at P/4 of
    # the low phase): off for `hwtp ci`, where the user's own testbench may sample at any time
    plan_protocol: bool = True
    # the backend that scores the mutants: a mutant Verilator elaborates to golden's very tree
    # is equivalent under its reading (hwtp.mutators.formal.reading), for Verilator only
    simulator: str = DEFAULT_BACKEND


@dataclass(frozen=True)
class Verdict:
    """One mutant's formal class, the proof record (method, depth, seconds, tool; reason when
    unknown) and, when killable, the confirmed witness."""

    klass: MutantClass
    proof: dict[str, Any]
    witness: Plan | None = None


def _unknown(reason: str, **proof: Any) -> Verdict:
    return Verdict(MutantClass.UNKNOWN, {"method": "none", **proof, "reason": reason})


#: Operators whose schemata guard mixes blocking and non-blocking assignments to one variable.
_ADDS = "assignment.blocking_to_nonblocking"
_SWAPS = frozenset({_ADDS, "assignment.nonblocking_to_blocking"})


def check(mutant_set: MutantSet, mutants: Sequence[Mutant], config: FormalConfig) -> dict[str, Verdict]:
    """Verdicts for ``mutants`` (valid members of ``mutant_set``), by id.

    Yosys' verdicts first; a mutant they leave unknown is equivalent when the simulator reads
    it as golden (:mod:`hwtp.mutators.formal.reading`). A blocking/non-blocking swap is looked at that
    way first: inside a combinational block it is no change at all for Verilator, and its
    standalone checks are the slowest."""
    if not mutants:
        return {}
    exe = yosys.require()
    tool = yosys.version(exe)
    readings = _Readings(mutant_set, config.build)
    swaps = [m for m in mutants if any(s.operator in _SWAPS for s in m.sites)]
    early = _read_as_golden(readings, swaps, config)
    out = {**_check(exe, tool, mutant_set, [m for m in mutants if m.id not in early], config), **early}
    out.update(_not_under_the_simulators_reading(readings, mutants, out))
    tried = {m.id for m in swaps}
    left = [m for m in mutants if out[m.id].klass == MutantClass.UNKNOWN and m.id not in tried]
    out.update(_read_as_golden(readings, left, config, out))
    return out


class _Readings:
    """Verilator's readings of golden and of mutants, each read once."""

    def __init__(self, mutant_set: MutantSet, build: BuildOptions) -> None:
        self.mutant_set, self.build = mutant_set, build
        design = mutant_set.design
        self.golden = reading.read(design, design.sources, build)
        self._mutants: dict[str, reading.Reading] = {}

    def of(self, mutant: Mutant) -> reading.Reading:
        if mutant.id not in self._mutants:
            sources = self.mutant_set.sources_of(mutant)
            self._mutants[mutant.id] = reading.read(self.mutant_set.design, sources, self.build)
        return self._mutants[mutant.id]


def _not_under_the_simulators_reading(
    readings: _Readings, mutants: Sequence[Mutant], out: dict[str, Verdict]
) -> dict[str, Verdict]:
    """Yosys' equivalence proofs that do not hold under the simulator's reading, as unknowns:
    where golden, or a blocking-to-non-blocking swap, puts ``<=`` in a level-sensitive
    process (:mod:`hwtp.mutators.formal.reading`). Where Verilator writes no tree for golden this
    cannot be looked at (logged)."""
    if readings.golden.model is None:
        log.warning("Verilator wrote no tree of %s: Yosys' proofs taken as they are", readings.mutant_set.design.name)
        return {}
    changed = {}
    for m in mutants:
        verdict = out[m.id]
        if verdict.klass != MutantClass.EQUIVALENT or str(verdict.proof.get("method")).startswith("verilator-"):
            continue
        adds = any(s.operator == _ADDS for s in m.sites)
        if readings.golden.level_nonblocking or (adds and readings.of(m).level_nonblocking):
            changed[m.id] = _unknown(
                f"Yosys proved it ({verdict.proof.get('method')}), but a non-blocking assignment in a "
                "level-sensitive block is read one way by Yosys and another by the simulator "
                "(Verilator keeps `<=` in a block with a sensitivity list: its reads see the old value)",
                **{k: v for k, v in verdict.proof.items() if k != "method"},
            )
    return changed


def _check(
    exe: str, tool: str, mutant_set: MutantSet, mutants: Sequence[Mutant], config: FormalConfig
) -> dict[str, Verdict]:
    """Yosys' verdicts for ``mutants``, by id."""
    out: dict[str, Verdict] = {}
    if not mutants:
        return out
    checkable = []
    for m in mutants:
        reason = miter.unsupported(m)
        if reason:
            out[m.id] = _unknown(reason, tool=tool)
        else:
            checkable.append(m)
    out.update(_edge_proofs(exe, tool, mutant_set, [m for m in mutants if m.id in out], config))
    if not checkable:
        return out
    # a blocking/non-blocking swap under the selector mixes `=` and `<=` to one variable in
    # one block, which Yosys' proc does not model as the simulator runs it: in the shared
    # schemata it hid real differences of the other mutants of its block (a deleted `cnt <= 0`
    # of debouncer, refuted by simulation, bounded-proved with it and refuted without it).
    # Such mutants go from their standalone sources, and never into the shared schemata.
    swapped = [m for m in checkable if any(s.operator in _SWAPS for s in m.sites)]
    checkable = [m for m in checkable if m not in swapped]
    design = mutant_set.design
    with procs.tempdir("formal") as tmp:
        root = Path(tmp)
        files = _write(mutant_set, checkable, root, "src")
        problem, selectors = _prepare(exe, design, files, root, config)
        if problem and problem.startswith(_UNREADABLE) and checkable:
            # one mutant's schemata can stop Yosys for all (a guard around an asynchronous
            # reset's `if` hides it from proc): find which, alone, and check the others; those
            # go from their standalone sources
            alone = (
                {
                    m.id: _prepare(exe, design, _write(mutant_set, [m], root, f"solo/{m.id}"), root, config)[0]
                    for m in checkable
                }
                if len(checkable) > 1
                else {checkable[0].id: problem}
            )
            failed = [m for m in checkable if alone[m.id]]
            checkable = [m for m in checkable if not alone[m.id]]
            if checkable:
                files = _write(mutant_set, checkable, root, "kept")
                problem, selectors = _prepare(exe, design, files, root, config)
        else:
            failed = []
        failed += swapped
        if problem:
            return {**out, **{m.id: _unknown(problem, tool=tool) for m in [*checkable, *failed]}}
        seconds: dict[str, float] = {}
        stopped: dict[str, str] = {}
        pending = [(m.id, m.index) for m in checkable]
        logs = root / "logs"
        logs.mkdir()
        golden = _write_sources(design.sources, root, "golden") if failed else []
        standalone: dict[str, list[str]] = {}
        tried: set[str] = set()  # mutants pdr has run on
        abc = yosys.find_abc(exe) if config.pdr and design.clock is not None else None
        for m in failed:  # each from its standalone source, in its own invocation
            script = root / f"standalone-{m.id}.ys"
            mutant = standalone[m.id] = _write_sources(mutant_set.sources_of(m), root, f"standalone/{m.id}")
            if abc is not None:
                # a standalone check reads and elaborates the design anyway, and the bounded
                # check of a memory is slow (fifo_sync): pdr first, which proves most of them
                tried.add(m.id)
                name = f"pdr-{m.id}.aig"
                (root / f"pdr-{m.id}.ys").write_text(
                    miter.standalone_aiger_script(design, golden, mutant, name, config.build), encoding="utf-8"
                )
                first = yosys.pdr(exe, abc, root / f"pdr-{m.id}.ys", name, config.bounds.timeout_s, root)
                used = first.seconds
                if first.proved:
                    out[m.id] = Verdict(
                        MutantClass.EQUIVALENT, {"method": "pdr", "tool": tool, "seconds": round(used, 3)}
                    )
                    continue
                seconds[m.id] = used
            script.write_text(
                miter.standalone_script(design, golden, mutant, m.id, config.bounds, "logs", config.build),
                encoding="utf-8",
            )
            run = yosys.run_script(exe, script, miter.BEGIN, config.bounds.timeout_s, cwd=root)
            seconds[m.id] = seconds.get(m.id, 0.0) + run.seconds.get(m.id, 0.0)
            if run.stopped is not None or run.error:
                stopped[m.id] = (
                    yosys.limit_reason(run.overrun, config.bounds.timeout_s)
                    if run.overrun
                    else f"Yosys (standalone mutant): {run.error}"
                )
        checkable = [*checkable, *(m for m in failed if m.id not in out)]
        while pending:
            script = root / "check.ys"
            script.write_text(
                miter.check_script(design, files, selectors, pending, config.bounds, "logs", config.build),
                encoding="utf-8",
            )
            run = yosys.run_script(exe, script, miter.BEGIN, config.bounds.timeout_s, cwd=root)
            seconds.update(run.seconds)
            done = set(run.finished)
            if run.stopped is None and run.error and not done:
                return {
                    **out,
                    **{m.id: _unknown(f"Yosys cannot read the design: {run.error}", tool=tool) for m in checkable},
                }
            if run.stopped is not None:
                stopped[run.stopped] = (
                    yosys.limit_reason(run.overrun, config.bounds.timeout_s) if run.overrun else f"Yosys: {run.error}"
                )
                done.add(run.stopped)
            pending = [p for p in pending if p[0] not in done]
        stimuli: dict[str, tuple[Plan, int]] = {}
        skip = design.reset.cycles if design.clock is not None and design.reset is not None else 0
        reset = (design.reset.port, int(design.reset.active == "high")) if design.reset is not None and skip else None
        steps: dict[str, int] = {}
        for m in checkable:
            base = {"tool": tool, "seconds": round(seconds.get(m.id, config.bounds.timeout_s), 3)}
            if m.id in stopped:
                out[m.id] = _unknown(stopped[m.id], **base)
                continue
            verdict, table = trace.read_bmc(_text(logs / f"{m.id}.bmc"), skip, reset)
            if verdict.outcome == Outcome.FAILED:
                stimuli[m.id] = (trace.stimulus(design, table, verdict.steps, m.id), m.index)
                steps[m.id] = verdict.steps - skip
                out[m.id] = Verdict(MutantClass.KILLABLE, {"method": "bmc", "depth": verdict.steps - skip, **base})
            else:
                out[m.id] = _no_counterexample(design.clock is not None, verdict, logs / f"{m.id}.ind", base, config)

        def aiger(m: Mutant, name: str) -> str:
            if m.id in standalone:
                return miter.standalone_aiger_script(design, golden, standalone[m.id], name, config.build)
            return miter.aiger_script(design, files, selectors, m.index, name, config.build)

        traces = _pdr_stage(exe, design, [m for m in checkable if m.id not in tried], aiger, root, config, out)
        # a pdr trace deeper than the bounded check: the bounded check again, as deep as the
        # trace, for a counterexample the simulator can replay (pdr's own trace is not kept)
        (root / "deep").mkdir()
        for m in checkable:
            if m.id not in traces or m.id in standalone:
                continue
            bounds = replace(config.bounds, depth=max(1, traces[m.id] + 1 - skip))
            script = root / f"deep-{m.id}.ys"
            script.write_text(
                miter.check_script(design, files, selectors, [(m.id, m.index)], bounds, "deep", config.build),
                encoding="utf-8",
            )
            run = yosys.run_script(exe, script, miter.BEGIN, config.bounds.timeout_s, cwd=root)
            verdict, table = trace.read_bmc(_text(root / "deep" / f"{m.id}.bmc"), skip, reset)
            if verdict.outcome == Outcome.FAILED:
                stimuli[m.id] = (trace.stimulus(design, table, verdict.steps, m.id), m.index)
                steps[m.id] = verdict.steps - skip
                used = float(out[m.id].proof.get("seconds", 0.0)) + run.seconds.get(m.id, run.cpu_s)
                out[m.id] = Verdict(
                    MutantClass.KILLABLE,
                    {"method": "bmc", "depth": verdict.steps - skip, "tool": tool, "seconds": round(used, 3)},
                )
    if stimuli:
        # each counterexample in the schemata build that holds its mutant
        confirmed = replay(schemata_targets(mutant_set), stimuli, WitnessConfig(jobs=config.jobs, eval_s=config.eval_s))
        for mid in stimuli:
            if mid in confirmed:
                out[mid] = Verdict(MutantClass.KILLABLE, out[mid].proof, confirmed[mid])
            else:
                out[mid] = _unknown(
                    f"the simulator does not reproduce the checker's counterexample (cycle {steps[mid]}): the "
                    "difference rests on a value the checker leaves free and the simulator defines (an "
                    "out-of-range select, an x), or on an output compared while reset is held",
                    **{k: v for k, v in out[mid].proof.items() if k != "method"},
                    method="bmc",
                )
    return out


def _read_as_golden(
    readings: _Readings,
    mutants: Sequence[Mutant],
    config: FormalConfig,
    before: dict[str, Verdict] | None = None,
) -> dict[str, Verdict]:
    """The ``mutants`` Verilator elaborates to golden's tree (:mod:`hwtp.mutators.formal.reading`):
    equivalent under the simulator's own reading, by id; the others are left out (``before``:
    their verdicts so far, whose seconds the proof adds to). Only when Verilator scores."""
    golden = readings.golden.model
    if not mutants or golden is None or not reading.applies(config.simulator):
        return {}
    tool = reading.version()
    out = {}
    for m in mutants:
        mine = readings.of(m)
        spent = mine.seconds
        method = (
            "verilator-tree"
            if mine.model == golden
            else "verilator-combdly"
            if _combinational_swap(readings.golden, mine, m)
            else None
        )
        if method is not None:
            earlier = (before or {}).get(m.id)
            seconds = float(earlier.proof.get("seconds", 0.0)) if earlier is not None else 0.0
            proof = {"method": method, "tool": tool, "seconds": round(seconds + spent, 3)}
            if earlier is not None and "reason" in earlier.proof:
                proof["checker"] = earlier.proof["reason"]  # what Yosys' reading gave, kept for the record
            out[m.id] = Verdict(MutantClass.EQUIVALENT, proof)
    return out


def _combinational_swap(golden: reading.Reading, mine: reading.Reading, m: Mutant) -> bool:
    """Whether ``m`` is one blocking/non-blocking swap that Verilator runs as golden's ``=``
    (:func:`hwtp.mutators.formal.reading.runs_as_blocking`)."""
    if len(m.sites) != 1 or m.sites[0].operator not in _SWAPS:
        return False
    site = m.sites[0]
    return reading.runs_as_blocking(golden, mine, site.line, site.col, site.operator == _ADDS)


def _edge_proofs(
    exe: str, tool: str, mutant_set: MutantSet, mutants: Sequence[Mutant], config: FormalConfig
) -> dict[str, Verdict]:
    """Clock-edge mutants proved equivalent under the drive and sample protocol
    (:mod:`hwtp.mutators.formal.edges`), by id; the others are left out."""
    if not config.plan_protocol:
        return {}
    design = mutant_set.design
    candidates = [m for m in mutants if edges.on_the_clock(design, m)]
    if not candidates:
        return {}
    out = {}
    with procs.tempdir("formal") as tmp:
        root = Path(tmp)
        for m in candidates:
            files = _write_sources(mutant_set.sources_of(m), root, f"edge/{m.id}")
            proved, used = edges.prove(exe, design, files, root, m.id, config.bounds.timeout_s, config.build)
            if proved:
                out[m.id] = Verdict(
                    MutantClass.EQUIVALENT, {"method": "edge-protocol", "tool": tool, "seconds": round(used, 3)}
                )
    return out


def _pdr_worth(verdict: Verdict, limit_s: float) -> bool:
    """Whether ``pdr`` may settle an unknown verdict: a bounded proof only (no counterexample
    within the depth, and induction did not close or a register differs from golden's), or
    the bounded check and induction stopped by their CPU limit."""
    reason = str(verdict.proof.get("reason", ""))
    return verdict.klass == MutantClass.UNKNOWN and (
        (verdict.proof.get("method") == "bmc" and "bounded proof" in reason)
        or reason == yosys.limit_reason(procs.Overrun.CPU, limit_s)
    )


def _pdr_stage(
    exe: str,
    design: Design,
    mutants: Sequence[Mutant],
    aiger: Callable[[Mutant, str], str],
    root: Path,
    config: FormalConfig,
    out: dict[str, Verdict],
) -> dict[str, int]:
    """ABC's ``pdr`` on the clocked mutants :func:`_pdr_worth` it, each within its own CPU
    limit: an unbounded engine that finds its own strengthening, on the miter whose start is
    the power-on reset (``aiger(mutant, file)``: the script that writes it). A proof makes them
    ``equivalent`` (method ``pdr``); anything else leaves the verdict as it was. Skipped when
    ABC is not installed. Returns, by id, the frame of each trace pdr found (0: the initial
    state), which the bounded check can then reach."""
    abc = yosys.find_abc(exe)
    todo = [m for m in mutants if _pdr_worth(out[m.id], config.bounds.timeout_s)]
    if abc is None or not config.pdr or design.clock is None or not todo:
        return {}
    traces = {}
    for m in todo:
        script = root / f"pdr-{m.id}.ys"
        script.write_text(aiger(m, f"pdr-{m.id}.aig"), encoding="utf-8")
        run = yosys.pdr(exe, abc, script, f"pdr-{m.id}.aig", config.bounds.timeout_s, root)
        used = run.seconds
        if run.frame is not None:
            traces[m.id] = run.frame
        if run.proved:
            before = out[m.id].proof
            proof = {k: v for k, v in before.items() if k not in ("method", "reason", "depth")}
            if before.get("method") == "bmc":
                proof["bmc_depth"] = config.bounds.depth
            seconds = float(proof.get("seconds", 0.0)) + used
            out[m.id] = Verdict(MutantClass.EQUIVALENT, {**proof, "method": "pdr", "seconds": round(seconds, 3)})
    return traces


def _no_counterexample(
    clocked: bool, bmc: trace.Verdict, ind_log: Path, base: dict[str, Any], config: FormalConfig
) -> Verdict:
    depth = config.bounds.depth
    if bmc.outcome == Outcome.TIMEOUT:
        return _unknown(
            f"the bounded check hit Yosys' SAT time limit (the wall-clock backstop of "
            f"{procs.backstop(config.bounds.timeout_s):g} s)",
            **base,
        )
    if bmc.outcome != Outcome.PROVED:
        return _unknown("Yosys gave no verdict for the bounded check", **base)
    if not clocked:
        return Verdict(MutantClass.EQUIVALENT, {"method": "sat", "depth": 0, **base})
    ind = trace.read_induction(_text(ind_log))
    if ind.outcome == Outcome.PROVED:
        proof = {"method": "k-induction", "depth": ind.steps, "bmc_depth": depth, **base}
        return Verdict(MutantClass.EQUIVALENT, proof)
    bounded = f"no output difference within {depth} cycles of reset (bounded proof), "
    reasons = {
        Outcome.FAILED: "but a register differs from golden's, so induction over matched registers does not apply",
        Outcome.OPEN: f"and induction did not close within {config.bounds.induction} steps",
        Outcome.TIMEOUT: f"and induction hit Yosys' SAT time limit (the wall-clock backstop of "
        f"{procs.backstop(config.bounds.timeout_s):g} s)",
        Outcome.NONE: "and Yosys gave no verdict for induction",
    }
    return _unknown(bounded + reasons[ind.outcome], method="bmc", depth=depth, **base)


def _write(mutant_set: MutantSet, mutants: Sequence[Mutant], root: Path, folder: str) -> list[str]:
    """Write the formal sources of ``mutants`` under ``root/folder``; their paths from ``root``."""
    return _write_sources(miter.formal_sources(mutant_set, mutants), root, folder)


def _write_sources(sources: Sequence[SourceFile], root: Path, folder: str) -> list[str]:
    files = []
    for src in sources:
        path = root / folder / src.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(src.text, encoding="utf-8")
        files.append(str(path.relative_to(root)))
    return files


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""


_UNREADABLE = "Yosys cannot read the design: "


def _prepare(exe: str, design: Any, files: list[str], root: Path, config: FormalConfig) -> tuple[str | None, list[str]]:
    """(why the checker cannot handle the design, or None; the selector wires)."""
    script = root / "prepare.ys"
    listing = "prepare"
    script.write_text(miter.prepare_script(design, files, listing, config.build), encoding="utf-8")
    limit = max(60.0, config.bounds.timeout_s)
    done, _, overrun = yosys.run_limited(yosys.command(exe, script, root), limit, cwd=root)
    if done is None:  # the group is already killed
        return f"Yosys did not elaborate the design within its {yosys.limit_reason(overrun, limit)}", []
    if done.returncode:
        errors = [line for line in f"{done.stdout}\n{done.stderr}".splitlines() if line.startswith("ERROR")]
        return f"{_UNREADABLE}{(errors or ['exit status ' + str(done.returncode)])[-1]}", []
    selectors = [line.split("/", 1)[1].strip() for line in _text(root / "prepare.sel").splitlines() if "/" in line]
    if _text(root / "prepare.neg").strip():
        return "flip-flops on the falling clock edge: the checker models one rising edge per step", []
    if not selectors:
        return "the selector wire did not survive elaboration", []
    return None, selectors
