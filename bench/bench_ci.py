"""Benchmark: hwtp ci (one schemata build) vs building and running each mutant on its own.

Workload: a shipped design (default counter_en_load) with a cocotb testbench made from its
reference plan (``hwtp export-tests``: one cocotb test per plan test), against 32 mutants.
Both flows run the same testbench on golden and on every mutant, each run in its own
simulator process, and use the same Verilator build options.

- per-mutant flow: for golden and each mutant, build its standalone source with Verilator
  (a fresh build folder) and run the testbench, one after the other (each build uses
  ``make -j``). Measured on ``--baseline-mutants`` of them and extrapolated to all 33 builds
  and runs (printed as such); mutation time is the same as hwtp's and is added to it.
- hwtp ci, a process per mutant (``shared: false``): ``run_ci`` end to end (mutate, one
  schemata build, golden, 32 simulator processes, ``-j``).
- hwtp ci, one process for many (``shared: true``, the default): the same, the mutants run in
  ``-j`` shared simulator processes; measured on first use (with the soundness check: a sample
  of mutants also run one process each) and again once the verdict is recorded.
- shards: the same run as 4 shards (``shard=(i, 4)``) merged (:func:`hwtp.ci.shards.merge`);
  the merged report must equal the unsharded one (wall-clock fields aside).

Every flow starts from the same state: an empty hwtp cache folder of its own (a private
HWTP_CACHE_DIR: mutant validation, the build and the verdicts start from nothing; the
"verdict recorded" flow's holds only the verdict the first use recorded) and ccache warm (an
unmeasured pass of every flow fills it, as on a CI machine that keeps a ccache folder;
--also-no-ccache measures again with ccache off, a plain machine). Then --reps repetitions,
the flows' order reversed on every other one; totals and speed-ups (taken inside a
repetition) are printed as median (min..max).

Run: python bench/bench_ci.py [--design counter_en_load] [--baseline-mutants 3] [-j 2] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from reps import add_reps_argument, interleaved, load_report, private_cache, ratios, spread  # bench/ on sys.path

from hwtp.ci.config import CiConfig
from hwtp.ci.exporttests import export_tests
from hwtp.ci.mutation import CiReport, run_ci
from hwtp.ci.runs import run_tests
from hwtp.ci.shards import merge
from hwtp.mutators import engine
from hwtp.rtl.design import load_design, shipped_root
from hwtp.sim import toolchain
from hwtp.sim.backends import get_backend
from hwtp.sim.buildcache import ensure_build

MUTANTS = 32


@contextmanager
def ccache_off(disabled: bool) -> Iterator[None]:
    """Run without ccache (the simulator environment looks ccache up on every build)."""
    saved = toolchain.ccache
    if disabled:
        toolchain.ccache = lambda: None  # type: ignore[assignment]
    try:
        yield
    finally:
        toolchain.ccache = saved  # type: ignore[assignment]


def make_project(design_name: str, folder: Path, jobs: int) -> CiConfig:
    design = load_design(design_name)
    tests = folder / "tests"
    tests.mkdir(parents=True)
    plan = shipped_root() / design_name / "plans" / "reference.yaml"
    export_tests(design, [plan], tests / "test_reference.py")
    return CiConfig(
        root=design.root,
        top=design.top,
        design_folder=design.root,
        test_modules=("test_reference",),
        test_paths=(tests,),
        n=MUTANTS,
        seed=0,
        jobs=jobs,
        timeout_s=120.0,
    )


def per_mutant(config: CiConfig, count: int, cache: Path, work: Path) -> tuple[float, float, float, int]:
    """(mutate s, build s per state, run s per state, states measured) of the per-mutant flow."""
    design = config.load_design()
    start = time.perf_counter()
    mutant_set = engine.mutate(
        design, engine.MutationConfig(n=config.n, seed=config.seed, jobs=config.jobs, witness_cycles=0)
    )
    mutate_s = time.perf_counter() - start
    backend = get_backend("verilator")
    states = [design.sources, *(mutant_set.sources_of(m) for m in mutant_set.valid[: count - 1])]
    build_s = run_s = 0.0
    for i, sources in enumerate(states):
        t0 = time.perf_counter()
        build = ensure_build(backend, sources, design.top, root=cache)
        t1 = time.perf_counter()
        run = run_tests(build, config, 0, work / f"s{i}", 120.0)
        build_s, run_s = build_s + t1 - t0, run_s + time.perf_counter() - t1
        assert run.status in ("pass", "fail"), run.reason
    return mutate_s, build_s / len(states), run_s / len(states), len(states)


@dataclass(frozen=True)
class Flow:
    """One timed run of a flow: its total seconds, and what it prints beside them."""

    total: float
    detail: str
    report: CiReport | None = None


def baseline_flow(config: CiConfig, count: int) -> Flow:
    with private_cache() as cache:
        mutate_s, build_s, run_s, measured = per_mutant(config, count, cache / "builds", cache / "work")
    states = MUTANTS + 1
    total = mutate_s + states * (build_s + run_s)
    detail = (
        f"({measured} of {states} measured, extrapolated)  mutate {mutate_s:.1f}  build {states * build_s:.1f}"
        f"  runs {states * run_s:.1f}"
    )
    return Flow(total, detail)


def hwtp_flow(config: CiConfig, shared: bool, verify: bool, verdicts: Path) -> Flow:
    """``run_ci`` in an empty cache folder. A first use (``verify``) leaves the soundness verdict
    it records in ``verdicts``; a shared run without ``verify`` starts with only that verdict."""
    with private_cache() as cache:
        if shared and not verify:
            shutil.copytree(verdicts, cache / VERDICTS)
        notes: list[str] = []
        start = time.perf_counter()
        report = run_ci(
            replace(config, shared=shared), cache_root=cache, workdir=cache, verify=verify, note=notes.append
        )
        total = time.perf_counter() - start
        if verify:
            shutil.copytree(cache / VERDICTS, verdicts, dirs_exist_ok=True)
    score = f"{report.score:.0%}" if report.score is not None else "n/a"
    detail = f"({report.counts['valid']} mutants, score {score}, build {report.build_seconds:.1f} s)"
    return Flow(total, f"{detail} [{'; '.join(notes[1:])}]", report)


VERDICTS = "ci-shared"  # where hwtp.ci.shared records soundness verdicts in the cache folder
RECORDED = "shared (verdict recorded)"


def measure(config: CiConfig, baseline: int, reps: int, label: str) -> tuple[list[str], CiReport]:
    with tempfile.TemporaryDirectory(prefix="hwtp-bench-ci-verdicts-") as tmp:
        verdicts = Path(tmp) / VERDICTS
        flows: dict[str, Callable[[], Flow]] = {
            "one build + one process per mutant": lambda: baseline_flow(config, baseline),
            "process per mutant": lambda: hwtp_flow(config, False, False, verdicts),
            "shared, first use (soundness check)": lambda: hwtp_flow(config, True, True, verdicts),
            RECORDED: lambda: hwtp_flow(config, True, False, verdicts),
        }
        print(f"{label}: warm-up pass (not measured: fills ccache, records the verdict)", flush=True)
        for flow in flows.values():
            flow()
        got = interleaved(reps, flows)
    base = [f.total for f in got["one build + one process per mutant"]]
    rows = []
    for name, runs in got.items():
        totals = [f.total for f in runs]
        flow = name if name.startswith("one build") else f"hwtp ci -j {config.jobs}, {name}"
        rows.append(
            f"{label:<12} {flow:<52} total {spread(totals).show('.1f', ' s'):<22} "
            f"{ratios(base, totals).show('.1f', 'x'):<20} {runs[-1].detail}"
        )
    whole = got[RECORDED][-1].report
    assert whole is not None
    return rows, whole


def _comparable(report: CiReport) -> dict[str, object]:
    """The report without wall-clock fields (they differ between any two runs)."""
    d = report.as_dict()
    for key in ("seconds", "build", "timeout_s"):
        d.pop(key)
    d["golden"].pop("seconds")
    for m in d["mutants"]:
        m.pop("seconds")
    return d


def sharded_equal(config: CiConfig, whole: CiReport) -> bool:
    """4 shards, merged, equal the unsharded report (not timed)."""
    paths = []
    with private_cache() as root:
        for i in range(1, 5):
            part = run_ci(replace(config, shared=True), cache_root=root, workdir=root, shard=(i, 4))
            paths.append(root / f"shard{i}.json")
            paths[-1].write_text(json.dumps(part.as_dict()), encoding="utf-8")
        return _comparable(merge(paths, whole.root)) == _comparable(whole)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--design", default="counter_en_load")
    parser.add_argument("--baseline-mutants", type=int, default=3, help="states of the per-mutant flow measured")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--also-no-ccache", action="store_true", help="measure again with ccache off")
    add_reps_argument(parser)
    args = parser.parse_args()
    with load_report("hwtp ci against building and running each mutant on its own"):
        with tempfile.TemporaryDirectory(prefix="hwtp-bench-proj-") as tmp:
            config = make_project(args.design, Path(tmp), args.jobs)
            print(
                f"hwtp ci vs per-mutant builds: {args.design}, {MUTANTS} mutants + golden, testbench = "
                f"the reference plan as cocotb tests, -j {args.jobs}, {args.reps} reps; totals and speed-ups "
                f"median (min..max)",
                flush=True,
            )
            cc = toolchain.ccache() is not None
            rows, whole = measure(config, args.baseline_mutants, args.reps, "ccache warm" if cc else "no ccache")
            if cc and args.also_no_ccache:
                with ccache_off(True):
                    more, _ = measure(config, max(2, args.baseline_mutants - 1), args.reps, "no ccache")
                rows += more
            rows.append(f"4 shards merged == unsharded: {sharded_equal(config, whole)}")
        print("\n".join(rows))


if __name__ == "__main__":
    main()
