"""Benchmark: formal classification (hwtp.formal) of the mutants random witnesses leave unknown.

For every shipped design: ``hwtp mutate -n 0`` (every site) with the witness search
(``--witness-cycles``, default 2000) and no formal check, then the Yosys miter on the
``unknown`` mutants. Reported per design and in total:

- the share of the witness search's unknowns the checker resolves (proved ``equivalent``,
  or ``killable`` with a counterexample the simulator confirmed); goal >= 90%;
- the Yosys time per mutant inside one invocation for all (hwtp's way): median and worst;
  goal: median < 1 s;
- the same mutants checked one per Yosys invocation (MCY's way: read, elaborate and check
  each mutant in its own process), total Yosys wall time against hwtp's. (The wall-time
  columns run the schemata script alone: where one mutant's guard stops Yosys for the whole
  schemata — around an asynchronous reset, e.g. edge_detector, fifo_sync, rr_arbiter,
  shift_register — the batch column stops early, while classification goes on per mutant.)

Levers (issue: resolve more, faster), measured on what today's check leaves unknown:

- ``--induction K``: k-induction up to K steps instead of 8 (the same run, a longer bound);
- ``--pdr``: ABC's ``pdr`` (property-directed reachability, an unbounded engine that finds
  its own inductive strengthening: no register has to match golden's) on the miter written as
  AIGER (``hwtp.formal.miter.aiger_script``), per mutant, ``--timeout`` s each; only a proof
  counts (a PDR counterexample may lie in the power-on reset, which it does not model). The
  classifier runs this stage itself on bounded-proof unknowns (``FormalConfig.pdr``); with
  ``--pdr`` the check runs without it, and the stage is measured apart.

Run: python bench/bench_formal.py [--designs a,b] [--depth 20] [--timeout 10] [--jobs 2] [--witness-cycles 2000]
                                  [--induction 8] [--pdr]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

from hwtp import mutate as engine
from hwtp.design import load_design, shipped_names
from hwtp.formal import miter, yosys
from hwtp.formal.classify import FormalConfig, check
from hwtp.mutantset import Mutant, MutantClass, MutantSet


def _write_sources(mutant_set: MutantSet, mutants: list[Mutant], root: Path) -> list[str]:
    """The formal sources of ``mutants`` under ``root/src``; their paths from ``root``."""
    files = []
    for src in miter.formal_sources(mutant_set, mutants):
        (root / "src" / src.path).parent.mkdir(parents=True, exist_ok=True)
        (root / "src" / src.path).write_text(src.text)
        files.append(f"src/{src.path}")
    return files


def _yosys_wall(mutant_set: MutantSet, mutants: list[Mutant], bounds: miter.Bounds, one_each: bool) -> float:
    """Wall-clock s Yosys takes to check ``mutants``: one invocation for all, or one each."""
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
        start = time.perf_counter()
        for group in groups:
            targets = [(m.id, m.index) for m in group]
            script = root / "check.ys"
            script.write_text(miter.check_script(design, files, ["hwtp_mutant_sel"], targets, bounds, "logs"))
            yosys.run_script(exe, script, miter.BEGIN, bounds.timeout_s, cwd=root)
        return time.perf_counter() - start


def _pdr(mutant_set: MutantSet, mutants: list[Mutant], timeout_s: float) -> dict[str, tuple[bool, float]]:
    """Per mutant: (proved equivalent by ABC pdr, seconds: AIGER export and pdr)."""
    exe, abc = yosys.require(), shutil.which("yosys-abc") or shutil.which("berkeley-abc")
    if abc is None:
        raise SystemExit("--pdr needs yosys-abc (Debian's yosys package) or berkeley-abc")
    out: dict[str, tuple[bool, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = _write_sources(mutant_set, mutants, root)
        for m in mutants:
            start = time.perf_counter()
            script = root / f"{m.id}.ys"
            script.write_text(miter.aiger_script(mutant_set.design, files, ["hwtp_mutant_sel"], m.index,
                                                 f"{m.id}.aig"))
            proved = False
            try:
                subprocess.run([exe, "-q", "-s", script.name], cwd=root, capture_output=True, timeout=timeout_s,
                               check=True)
                left = max(1.0, timeout_s - (time.perf_counter() - start))
                run = subprocess.run([abc, "-c", f"read_aiger {m.id}.aig; fold; strash; pdr -T {int(left)}"],
                                     cwd=root, capture_output=True, text=True, timeout=left + 5)
                proved = "Property proved" in run.stdout
            except (subprocess.TimeoutExpired, subprocess.CalledProcessError):
                pass
            out[m.id] = (proved, time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--designs", default="", help="comma-separated (default: every shipped design)")
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--witness-cycles", type=int, default=2000)
    parser.add_argument("--induction", type=int, default=8, help="longest k-induction (today: 8)")
    parser.add_argument("--pdr", action="store_true", help="then ABC pdr on what stays unknown")
    args = parser.parse_args()
    names = [n for n in args.designs.split(",") if n] or shipped_names()
    bounds = miter.Bounds(depth=args.depth, timeout_s=args.timeout, induction=args.induction)
    pdr_times: list[float] = []
    pdr_proved = 0
    print(f"{'design':<22}{'unknown':>8}{'equiv':>7}{'kill':>6}{'still':>7}{'batch s':>9}{'1-each s':>10}")
    times: list[float] = []
    totals: Counter[str] = Counter()
    batch_all = each_all = 0.0
    reasons: Counter[str] = Counter()
    for name in names:
        design = load_design(name)
        config = engine.MutationConfig(n=None, seed=0, jobs=args.jobs, witness_cycles=args.witness_cycles,
                                       prefer_killable=False)
        result = engine.mutate(design, config)
        unknown = [m for m in result.valid if m.klass == MutantClass.UNKNOWN]
        # --pdr: today's check without its pdr stage, then pdr measured apart on what it leaves
        verdicts = check(result, unknown, FormalConfig(bounds=bounds, jobs=args.jobs, pdr=not args.pdr))
        classes = Counter(v.klass.value for v in verdicts.values())
        for v in verdicts.values():
            if "seconds" in v.proof:
                times.append(float(v.proof["seconds"]))
            if v.klass == MutantClass.UNKNOWN:
                reasons[str(v.proof.get("reason", ""))[:70]] += 1
        if args.pdr:
            still = [m for m in unknown if verdicts[m.id].klass == MutantClass.UNKNOWN and miter.unsupported(m) is None]
            for proved, seconds in _pdr(result, still, args.timeout).values():
                pdr_times.append(seconds)
                pdr_proved += proved
        batch = _yosys_wall(result, unknown, bounds, one_each=False)
        each = _yosys_wall(result, unknown, bounds, one_each=True)
        batch_all += batch
        each_all += each
        totals.update(classes)
        totals["unknown_before"] += len(unknown)
        print(
            f"{name:<22}{len(unknown):>8}{classes['equivalent']:>7}{classes['killable']:>6}{classes['unknown']:>7}"
            f"{batch:>9.2f}{each:>10.2f}"
        )
    resolved = totals["equivalent"] + totals["killable"]
    share = resolved / totals["unknown_before"] if totals["unknown_before"] else 1.0
    print(
        f"\nunknown after the witness search: {totals['unknown_before']}; resolved: {resolved} ({share:.0%}; "
        f"goal >= 90%): {totals['equivalent']} proved equivalent, {totals['killable']} killable"
    )
    if times:
        print(f"Yosys time per mutant (one invocation): median {statistics.median(times):.2f} s, "
              f"worst {max(times):.2f} s (goal: median < 1 s)")
    print(f"Yosys wall time, all designs: one invocation per design {batch_all:.1f} s; "
          f"one invocation per mutant (MCY's way) {each_all:.1f} s"
          + (f" ({each_all / batch_all:.1f}x)" if batch_all else ""))
    if args.pdr:
        both = resolved + pdr_proved
        share_pdr = both / totals["unknown_before"] if totals["unknown_before"] else 1.0
        median = f"median {statistics.median(pdr_times):.2f} s" if pdr_times else "no mutant"
        print(f"ABC pdr on the {len(pdr_times)} still unknown: {pdr_proved} proved equivalent ({median} each, "
              f"export included); resolved with pdr: {both} ({share_pdr:.0%})")
    for reason, n in reasons.most_common():
        print(f"  still unknown: {n} x {reason}")


if __name__ == "__main__":
    main()
