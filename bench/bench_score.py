"""Benchmark: hwtp score vs the per-bug CI flow, on the same matrix, in the same run.

Matrix: 8 plans x (32 mutants + golden) on a shipped sequential design (default fifo_sync).

Every flow runs once, unmeasured, to fill ccache (if installed) and the warm build cache;
then --reps interleaved repetitions, each cold row and each baseline row in an empty build
cache of its own (everything in a private HWTP_CACHE_DIR). Rates and ratios (taken inside a
repetition) are printed as median (min..max).

- baseline: what a per-bug CI harness does: one Verilator build per mutant (its standalone
  source) and one simulator process per evaluation. Measured on a subset (--baseline-mutants)
  and extrapolated per evaluation (printed as such).
- hwtp cold: empty build cache (ccache, if installed, warm, as it would be on a CI machine with
  a ccache dir), then the scoring.
- hwtp warm: the same again with the cache filled.
- harness speed: evaluations/s inside the simulator (the harness's own time per evaluation),
  per core, for plans of <= 20 cycles.

Run: python bench/bench_score.py [--design fifo_sync] [--baseline-mutants 3] [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from reps import add_reps_argument, interleaved, load_report, private_cache, ratios, spread  # bench/ on sys.path

from hwtp.mutators import engine, mutantset
from hwtp.mutators.stimulus import StimulusConfig
from hwtp.plans.files import PlanInput
from hwtp.plans.format import extract_plan
from hwtp.policy.policies import PlanRequest, RandomPolicy
from hwtp.rtl.design import load_design
from hwtp.scoring.score import ScoreConfig, score
from hwtp.sim.backends import get_backend
from hwtp.sim.buildcache import ensure_build
from hwtp.sim.job import Evaluation, Job, compile_plan, plan_cycles
from hwtp.sim.runner import Counters, run_job
from hwtp.sim.wrapper import WRAPPER_TOP, build_sources


def make_plans(mutant_set: mutantset.MutantSet, count: int) -> list[PlanInput]:
    policy = RandomPolicy(mutant_set, seed=1, stimulus=StimulusConfig(tests=1, cycles=16, reset_chance=0.0))
    generated = policy.generate([PlanRequest("golden", [])], count)[0]
    return [PlanInput(f"p{g.index:02d}", extract_plan(g.text or "")) for g in generated]


def baseline(mutant_set: mutantset.MutantSet, plans: list[PlanInput], mutants: int, cache: Path) -> tuple[float, int]:
    """Per-bug flow on ``mutants`` mutants: build each standalone, one process per evaluation."""
    design = mutant_set.design
    backend = get_backend("verilator")
    evaluations, start = 0, time.perf_counter()
    for m in mutant_set.valid[:mutants]:
        build = ensure_build(backend, build_sources(design, mutant_set.sources_of(m)), WRAPPER_TOP, root=cache)
        for p in plans:
            assert p.plan is not None
            ev = Evaluation(p.id, compile_plan(p.plan, design), 0, cycles=plan_cycles(p.plan, design))
            run_job(build, Job(design, (ev,)))
            evaluations += 1
    return time.perf_counter() - start, evaluations


def hwtp_run(
    mutant_set: mutantset.MutantSet, plans: list[PlanInput], cache: Path, jobs: int, simulator: str = "verilator"
) -> tuple[float, int]:
    start = time.perf_counter()
    config = ScoreConfig(jobs=jobs, cache_root=cache, full_matrix=True, simulator=simulator)
    scores = score(mutant_set, plans, config)
    return time.perf_counter() - start, scores.evaluations


def harness_speed(
    mutant_set: mutantset.MutantSet, plans: list[PlanInput], cache: Path, repeat: int
) -> tuple[float, int]:
    """(evaluations/s inside one simulator process, max cycles per plan)."""
    design = mutant_set.design
    schemata, _ = mutantset.schemata_sources(mutant_set)
    build = ensure_build(get_backend("verilator"), build_sources(design, schemata), WRAPPER_TOP, root=cache)
    evs = []
    for r in range(repeat):
        for p in plans:
            assert p.plan is not None
            for m in (0, *(v.index for v in mutant_set.valid)):
                evs.append(
                    Evaluation(f"{p.id}-{m}-{r}", compile_plan(p.plan, design), m, cycles=plan_cycles(p.plan, design))
                )
    results = run_job(build, Job(design, tuple(evs)), counters=Counters())
    inside = sum(r.seconds for r in results)
    return len(results) / inside, max(plan_cycles(p.plan, design) for p in plans if p.plan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--design", default="fifo_sync")
    parser.add_argument("--plans", type=int, default=8)
    parser.add_argument("--mutants", type=int, default=32)
    parser.add_argument("--baseline-mutants", type=int, default=3)
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    add_reps_argument(parser)
    args = parser.parse_args()
    with load_report("hwtp score vs the per-bug CI flow"):
        design = load_design(args.design)
        icarus = shutil.which("iverilog") is not None
        with private_cache() as private:
            mutant_set = engine.mutate(design, engine.MutationConfig(n=args.mutants, witness_cycles=0, jobs=args.jobs))
            plans = make_plans(mutant_set, args.plans)
            warm_cache = private / "warm"

            def cold() -> tuple[float, int]:
                with tempfile.TemporaryDirectory(prefix="hwtp-bench-cold-") as tmp:
                    return hwtp_run(mutant_set, plans, Path(tmp), args.jobs)

            def base() -> tuple[float, int]:
                with tempfile.TemporaryDirectory(prefix="hwtp-bench-base-") as tmp:
                    return baseline(mutant_set, plans, args.baseline_mutants, Path(tmp))

            flows: dict[str, Callable[[], tuple[float, int]]] = {
                "base": base,
                "cold": cold,
                "warm": lambda: hwtp_run(mutant_set, plans, warm_cache, args.jobs),
            }
            if icarus:
                flows["icarus"] = lambda: hwtp_run(mutant_set, plans, warm_cache, args.jobs, "icarus")
            for flow in flows.values():  # not measured: fills ccache for both flows and the warm build cache
                flow()
            got = interleaved(args.reps, flows)
            harness = [harness_speed(mutant_set, plans, warm_cache, repeat=4) for _ in range(args.reps)]
        rate = {name: [n / s for s, n in runs] for name, runs in got.items()}
        n_evals, base_n = got["cold"][0][1], got["base"][0][1]
        valid = len(mutant_set.valid)
        print(f"design {args.design}: {len(plans)} plans x ({valid} valid mutants + golden) = {n_evals} evaluations")
        print(f"{'flow':<44}{'evals/s, median (min..max)':>30}{'vs baseline':>26}")
        print(
            f"{'baseline (build per mutant, process per eval)':<44}{spread(rate['base']).show():>30}{'1.0x':>26}"
            f"   (measured on {args.baseline_mutants} mutants x {len(plans)} plans = {base_n} evals, extrapolated)"
        )
        labels = {
            "cold": "hwtp cold (empty build cache)",
            "warm": "hwtp warm (build cached)",
            "icarus": "hwtp warm, Icarus backend",
        }
        for name, label in labels.items():
            if name in rate:
                versus = ratios(rate[name], rate["base"]).show(".1f", "x")
                print(f"{label:<44}{spread(rate[name]).show('.1f'):>30}{versus:>26}")
        cycles = harness[0][1]
        print(
            f"{'harness inside one process, per core':<44}{spread([h[0] for h in harness]).show('.0f'):>30}"
            f"   (plans of <= {cycles} cycles incl. reset; goal >= 2000/s)"
        )
        warm_s = spread([s for s, _ in got["warm"]])
        print(
            f"baseline full matrix would take ~{n_evals / spread(rate['base']).median:.0f} s; "
            f"hwtp warm {warm_s.show('.1f', ' s')}"
        )


if __name__ == "__main__":
    main()
