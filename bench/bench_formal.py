"""Benchmark: formal classification (hwtp.mutators.formal) of the mutants random witnesses leave unknown.

For every shipped design: ``hwtp mutate -n 0`` (every site) with the witness search
(``--witness-cycles``, default 2000) and no formal check, then the Yosys miter on the
``unknown`` mutants. Reported per design and in total:

- the share of the witness search's unknowns the checker resolves (proved ``equivalent``,
  or ``killable`` with a counterexample the simulator confirmed); goal >= 90%; how many each
  method resolved (``verilator-tree``: Verilator elaborates the mutant to golden's tree,
  ``hwtp.mutators.formal.reading``), and per design why the rest stay unknown;
- the CPU time per mutant inside one invocation for all (hwtp's way; ABC pdr added where it
  ran): median and worst; goal: median < 1 s (CPU seconds: the number does not move with
  the machine's load, hwtp's limits count the same way);
- the same mutants checked one per Yosys invocation (MCY's way: read, elaborate and check
  each mutant in its own process), total Yosys CPU time against hwtp's (``--no-baseline``
  skips these two columns). (The CPU-time
  columns run the schemata script alone: where one mutant's guard stops Yosys for the whole
  schemata — around an asynchronous reset, e.g. edge_detector, fifo_sync, rr_arbiter,
  shift_register — the batch column stops early, while classification goes on per mutant.)

Levers (issue: resolve more, faster), measured on what today's check leaves unknown:

- ``--induction K``: k-induction up to K steps instead of 8 (the same run, a longer bound);
- ``--pdr``: ABC's ``pdr`` (property-directed reachability, an unbounded engine that finds
  its own inductive strengthening: no register has to match golden's) on the miter written as
  AIGER (``hwtp.mutators.formal.miter.aiger_script``), per mutant, ``--timeout`` s each; only a proof
  counts (a PDR counterexample may lie in the power-on reset, which it does not model). The
  classifier runs this stage itself on bounded-proof unknowns (``FormalConfig.pdr``); with
  ``--pdr`` the check runs without it, and the stage is measured apart.

Run: python bench/bench_formal.py [--designs a,b] [--depth 20] [--timeout 10] [--jobs 2] [--witness-cycles 2000]
                                  [--induction 8] [--pdr] [--reps 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

from hwtp.mutators import engine
from hwtp.mutators.formal import miter, yosys
from hwtp.mutators.formal.classify import FormalConfig, check
from hwtp.mutators.mutantset import Mutant, MutantClass, MutantSet
from hwtp.rtl.design import load_design, shipped_names


def _write_sources(mutant_set: MutantSet, mutants: list[Mutant], root: Path) -> list[str]:
    """The formal sources of ``mutants`` under ``root/src``; their paths from ``root``."""
    files = []
    for src in miter.formal_sources(mutant_set, mutants):
        (root / "src" / src.path).parent.mkdir(parents=True, exist_ok=True)
        (root / "src" / src.path).write_text(src.text)
        files.append(f"src/{src.path}")
    return files


def _yosys_cpu(mutant_set: MutantSet, mutants: list[Mutant], bounds: miter.Bounds, one_each: bool) -> float:
    """CPU seconds Yosys takes to check ``mutants``: one invocation for all, or one each."""
    exe = yosys.require()
    design = mutant_set.design
    checkable = [m for m in mutants if miter.unsupported(m) is None]
    if not checkable:
        return 0.0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = _write_sources(mutant_set, checkable, root)
        (root / "logs").mkdir()
        groups = [[m] for m in checkable] if one_each else [checkable]
        used = 0.0
        for group in groups:
            targets = [(m.id, m.index) for m in group]
            script = root / "check.ys"
            script.write_text(miter.check_script(design, files, ["hwtp_mutant_sel"], targets, bounds, "logs"))
            used += yosys.run_script(exe, script, miter.BEGIN, bounds.timeout_s, cwd=root).cpu_s
        return used


def _pdr(mutant_set: MutantSet, mutants: list[Mutant], timeout_s: float) -> dict[str, tuple[bool, float]]:
    """Per mutant: (proved equivalent by ABC pdr, CPU seconds: AIGER export and pdr)."""
    exe = yosys.require()
    abc = yosys.find_abc(exe)
    if abc is None:
        raise SystemExit("--pdr needs yosys-abc (Debian's yosys package)")
    out: dict[str, tuple[bool, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = _write_sources(mutant_set, mutants, root)
        for m in mutants:
            script = root / f"{m.id}.ys"
            script.write_text(miter.aiger_script(mutant_set.design, files, ["hwtp_mutant_sel"], m.index, f"{m.id}.aig"))
            run = yosys.pdr(exe, abc, script, f"{m.id}.aig", timeout_s, root)
            out[m.id] = (bool(run.proved), run.seconds)
    return out


def _spread(values: list[float], fmt: str = ".2f") -> str:
    """``median (min-max)`` of ``values``."""
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--designs", default="", help="comma-separated (default: every shipped design)")
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--witness-cycles", type=int, default=2000)
    parser.add_argument("--induction", type=int, default=8, help="longest k-induction (today: 8)")
    parser.add_argument("--pdr", action="store_true", help="then ABC pdr on what stays unknown")
    parser.add_argument("--reps", type=int, default=3, help="repetitions of the checks (the witness search runs once)")
    parser.add_argument(
        "--no-baseline",
        dest="baseline",
        action="store_false",
        help="skip the check script's batch and one-per-mutant columns",
    )
    args = parser.parse_args()
    names = [n for n in args.designs.split(",") if n] or shipped_names()
    bounds = miter.Bounds(depth=args.depth, timeout_s=args.timeout, induction=args.induction)
    # the witness search once per design (seeded: the same unknowns in every repetition)
    sets: list[tuple[str, MutantSet, list[Mutant]]] = []
    for name in names:
        config = engine.MutationConfig(
            n=None, seed=0, jobs=args.jobs, witness_cycles=args.witness_cycles, prefer_killable=False
        )
        result = engine.mutate(load_design(name), config)
        sets.append((name, result, [m for m in result.valid if m.klass == MutantClass.UNKNOWN]))
    rep_share: list[float] = []
    rep_median: list[float] = []
    rep_check: list[float] = []
    rep_batch: list[float] = []
    rep_each: list[float] = []
    for rep in range(args.reps):
        print(f"\nrepetition {rep + 1} of {args.reps}")
        print(
            f"{'design':<22}{'unknown':>8}{'equiv':>7}{'kill':>6}{'still':>7}{'wall s':>8}{'batch cpu':>10}"
            f"{'1-each cpu':>11}"
        )
        times: list[float] = []
        totals: Counter[str] = Counter()
        check_all = batch_all = each_all = 0.0
        reasons: Counter[str] = Counter()
        methods: Counter[str] = Counter()
        pdr_times: list[float] = []
        pdr_proved = 0
        for name, result, unknown in sets:
            # --pdr: today's check without its pdr stage, then pdr measured apart on what it leaves
            started = time.perf_counter()
            verdicts = check(result, unknown, FormalConfig(bounds=bounds, jobs=args.jobs, pdr=not args.pdr))
            checked = time.perf_counter() - started
            classes = Counter(v.klass.value for v in verdicts.values())
            for v in verdicts.values():
                if "seconds" in v.proof:
                    times.append(float(v.proof["seconds"]))
                if v.klass == MutantClass.UNKNOWN:
                    reasons[f"{name}: {str(v.proof.get('reason', ''))[:70]}"] += 1
                else:
                    methods[f"{v.klass.value} by {v.proof.get('method')}"] += 1
            if args.pdr:
                still = [
                    m for m in unknown if verdicts[m.id].klass == MutantClass.UNKNOWN and miter.unsupported(m) is None
                ]
                for proved, seconds in _pdr(result, still, args.timeout).values():
                    pdr_times.append(seconds)
                    pdr_proved += proved
            batch = _yosys_cpu(result, unknown, bounds, one_each=False) if args.baseline else 0.0
            each = _yosys_cpu(result, unknown, bounds, one_each=True) if args.baseline else 0.0
            check_all += checked
            batch_all += batch
            each_all += each
            totals.update(classes)
            totals["unknown_before"] += len(unknown)
            print(
                f"{name:<22}{len(unknown):>8}{classes['equivalent']:>7}{classes['killable']:>6}"
                f"{classes['unknown']:>7}{checked:>8.1f}{batch:>10.2f}{each:>11.2f}"
            )
        resolved = totals["equivalent"] + totals["killable"]
        share = resolved / totals["unknown_before"] if totals["unknown_before"] else 1.0
        print(
            f"unknown after the witness search: {totals['unknown_before']}; resolved: {resolved} ({share:.0%}; "
            f"goal >= 90%): {totals['equivalent']} proved equivalent, {totals['killable']} killable"
        )
        if times:
            print(
                f"CPU time per mutant (hwtp's check: Yosys, and ABC pdr where it ran): median "
                f"{statistics.median(times):.2f} s, worst {max(times):.2f} s (goal: median < 1 s)"
            )
            rep_median.append(statistics.median(times))
        print(
            f"all designs: hwtp's check (prepare, one invocation for all, pdr, replay) {check_all:.1f} s wall; "
            f"the check script in one invocation per design {batch_all:.1f} CPU s, one per mutant (MCY's way) "
            f"{each_all:.1f} CPU s"
        )
        if args.pdr:
            both = resolved + pdr_proved
            share_pdr = both / totals["unknown_before"] if totals["unknown_before"] else 1.0
            median = f"median {statistics.median(pdr_times):.2f} s" if pdr_times else "no mutant"
            print(
                f"ABC pdr on the {len(pdr_times)} still unknown: {pdr_proved} proved equivalent ({median} each, "
                f"export included); resolved with pdr: {both} ({share_pdr:.0%})"
            )
        print("  resolved by: " + ", ".join(f"{n} {what}" for what, n in methods.most_common()))
        for reason, n in reasons.most_common():
            print(f"  still unknown: {n} x {reason}")
        rep_share.append(100 * share)
        rep_check.append(check_all)
        rep_batch.append(batch_all)
        rep_each.append(each_all)
    print(f"\nover {args.reps} repetitions, median (range):")
    print(f"  resolved: {_spread(rep_share, '.1f')} % of the witness search's unknowns (goal >= 90%)")
    if rep_median:
        print(f"  median CPU time per mutant: {_spread(rep_median)} s (goal < 1 s)")
    print(f"  hwtp's check, all designs: {_spread(rep_check, '.1f')} s wall")
    if args.baseline:
        print(
            f"  check script, one invocation per design: {_spread(rep_batch, '.1f')} CPU s; one per mutant "
            f"(baseline): {_spread(rep_each, '.1f')} CPU s; baseline / one per design: "
            f"{_spread([e / b for e, b in zip(rep_each, rep_batch, strict=True) if b], '.2f')}x"
        )


if __name__ == "__main__":
    main()
