"""Full check: the schemata build holding each mutant, with its selector, behaves exactly like
that mutant's standalone source, for EVERY valid mutant (CI samples three per design; this builds
them all, which costs one Verilator build per mutant).

Run: python bench/check_schemata.py [DESIGN ...] [-n 32] [--depth 1]
($HWTP_SCHEMATA_PART=MUTANTS checks sets cut into several builds.)
Prints one line per design: mutants checked, disagreements (none expected), time.
"""

from __future__ import annotations

import argparse
import time

from hwtp.mutators import engine
from hwtp.plans.format import load_plan_file
from hwtp.rtl.design import load_design, shipped_names
from hwtp.sim.backends import get_backend
from hwtp.sim.buildcache import ensure_build
from hwtp.sim.executors.base import schemata_targets
from hwtp.sim.job import Evaluation, Job, compile_plan, plan_cycles
from hwtp.sim.runner import run_job
from hwtp.sim.wrapper import WRAPPER_TOP, build_sources


def check(name: str, n: int, depth: int = 1) -> tuple[int, list[str], float]:
    start = time.perf_counter()
    design = load_design(name)
    result = engine.mutate(design, engine.MutationConfig(n=n, depth=depth, witness_cycles=0))
    plan = load_plan_file(design.root / "plans" / "reference.yaml")
    compiled, cycles = compile_plan(plan, design), plan_cycles(plan, design)
    backend = get_backend("verilator")
    schemata = schemata_targets(result)  # each mutant in the schemata build that holds it
    builds = schemata.build()
    evals = [Evaluation(m.id, compiled, m.index, stop_on_fail=False, cycles=cycles) for m in result.valid]
    in_schemata = {r.id: r for i, group in schemata.split(evals) for r in run_job(builds[i], Job(design, tuple(group)))}
    bad = []
    for m in result.valid:
        alone = ensure_build(backend, build_sources(design, result.sources_of(m)), WRAPPER_TOP)
        got = run_job(alone, Job(design, (Evaluation(m.id, compiled, 0, stop_on_fail=False, cycles=cycles),)))[0]
        want = in_schemata[m.id]
        if (got.status, got.first, got.tests) != (want.status, want.first, want.tests):
            bad.append(m.id)
    return len(result.valid), bad, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("designs", nargs="*")
    parser.add_argument("-n", type=int, default=32)
    parser.add_argument("--depth", type=int, default=1)
    args = parser.parse_args()
    total, failures = 0, 0
    for name in args.designs or shipped_names():
        checked, bad, seconds = check(name, args.n, args.depth)
        total += checked
        failures += len(bad)
        print(f"{name:<22} {checked:3} mutants checked, {len(bad)} disagree {bad or ''} ({seconds:.0f} s)", flush=True)
    print(f"total: {total} mutants, {failures} disagreements")


if __name__ == "__main__":
    main()
