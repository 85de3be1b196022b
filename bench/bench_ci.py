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

Both are measured twice in the same run: with ccache warm (Verilator's runtime objects
cached, as on a CI machine that keeps a ccache folder) and with ccache off (a plain machine).
Build caches start empty in each case.

Run: python bench/bench_ci.py [--design counter_en_load] [--baseline-mutants 3] [-j 2] [--skip-no-ccache]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from hwtp import mutate as engine
from hwtp.ci.config import CiConfig
from hwtp.ci.exporttests import export_tests
from hwtp.ci.mutation import CiReport, run_ci
from hwtp.ci.runs import run_tests
from hwtp.ci.shards import merge
from hwtp.design import load_design, shipped_root
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
    return CiConfig(root=design.root, top=design.top, design_folder=design.root,
                    test_modules=("test_reference",), test_paths=(tests,), n=MUTANTS, seed=0, jobs=jobs,
                    timeout_s=120.0)


def per_mutant(config: CiConfig, count: int, cache: Path, work: Path) -> tuple[float, float, float, int]:
    """(mutate s, build s per state, run s per state, states measured) of the per-mutant flow."""
    design = config.load_design()
    start = time.perf_counter()
    mutant_set = engine.mutate(design, engine.MutationConfig(n=config.n, seed=config.seed, jobs=config.jobs,
                                                             witness_cycles=0))
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


def measure(config: CiConfig, baseline: int, jobs: int, label: str, with_j1: bool) -> list[str]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="hwtp-bench-ci-") as tmp:
        root = Path(tmp)
        mutate_s, build_s, run_s, measured = per_mutant(config, baseline, root / "cache-base", root / "work")
        states = MUTANTS + 1
        base_total = mutate_s + states * (build_s + run_s)
        rows.append(f"{label:<12} per-mutant flow ({measured} of {states} measured, extrapolated)"
                    f"  mutate {mutate_s:6.1f}  build {states * build_s:7.1f}  runs {states * run_s:6.1f}"
                    f"  total {base_total:7.1f}")
        whole = None
        for j in ([jobs, 1] if with_j1 and jobs != 1 else [jobs]):
            cache = root / f"cache-hwtp-{j}"
            for what, shared, verify in (("process per mutant", False, False),
                                         ("shared, first use", True, True), ("shared", True, False)):
                notes: list[str] = []
                start = time.perf_counter()
                report = run_ci(replace(config, jobs=j, shared=shared), cache_root=cache, workdir=root,
                                verify=verify, note=notes.append)
                total = time.perf_counter() - start
                c = report.counts
                score = f"{report.score:.0%}" if report.score is not None else "n/a"
                rows.append(f"{label:<12} hwtp ci -j {j} {what:<19} ({c['valid']} mutants, score {score})"
                            f"  build {report.build_seconds:5.1f}  total {total:6.1f}"
                            f"  ->  {base_total / total:5.1f}x faster   [{notes[0] if notes else ''}]")
                whole = whole or (report if shared else None)
        if whole is not None:
            rows.append(f"{label:<12} 4 shards merged == unsharded: {_sharded_equal(config, whole, root)}")
    return rows


def _comparable(report: CiReport) -> dict[str, object]:
    """The report without wall-clock fields (they differ between any two runs)."""
    d = report.as_dict()
    for key in ("seconds", "build", "timeout_s"):
        d.pop(key)
    d["golden"].pop("seconds")
    for m in d["mutants"]:
        m.pop("seconds")
    return d


def _sharded_equal(config: CiConfig, whole: CiReport, root: Path) -> bool:
    paths = []
    for i in range(1, 5):
        part = run_ci(replace(config, shared=True), cache_root=root / "cache-shards", workdir=root, shard=(i, 4))
        paths.append(root / f"shard{i}.json")
        paths[-1].write_text(json.dumps(part.as_dict()), encoding="utf-8")
    return _comparable(merge(paths, whole.root)) == _comparable(whole)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--design", default="counter_en_load")
    parser.add_argument("--baseline-mutants", type=int, default=3,
                        help="states of the per-mutant flow measured")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--skip-no-ccache", action="store_true", help="only the ccache-warm configuration")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hwtp-bench-proj-") as tmp:
        config = make_project(args.design, Path(tmp), args.jobs)
        rows = [f"hwtp ci vs per-mutant builds: {args.design}, {MUTANTS} mutants + golden, testbench = "
                f"the reference plan as cocotb tests, {os.cpu_count()} cores (load {os.getloadavg()[0]:.1f})"]
        cc = toolchain.ccache() is not None
        rows += measure(config, args.baseline_mutants, args.jobs, "ccache warm" if cc else "no ccache", True)
        if cc and not args.skip_no_ccache:
            with ccache_off(True):
                rows += measure(config, max(2, args.baseline_mutants - 1), args.jobs, "no ccache", False)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
