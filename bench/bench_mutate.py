"""Benchmark: the mutation engine's front end, the cost of validating mutants, and schemata at scale.

1. Parse + site discovery + schemata generation for every shipped design, with the pyslang
   and the pyverilog front ends side by side (designs parsed, sites found, time), --reps times.
2. Validation of N mutants of one sequential design: hwtp (one Verilator lint per schemata
   build + the schemata builds) vs compiling each mutant on its own (a full Verilator build each;
   measured on --standalone builds and extrapolated), --reps times, each in empty build caches.
   Goal: hwtp < 3 standalone builds.
3. Scale (--scale): ``hwtp mutate traffic_light -n 512 --depth 2`` and ``-n 2000`` as the CLI
   runs them, each repetition with an empty build cache and an empty ccache: wall time and peak
   RSS of the whole process tree (sampled every 0.1 s), median and range. Goal: <= 180 s and
   <= 4 GB for ``-n 512 --depth 2`` on 2 cores. Then the scoring cost per evaluation on a set of
   32 and one of 512 first-order-and-depth-2 mutants (the same plans on the same number of
   states, spread over the set's builds, builds made before timing): goal 512/32 within 0.8-1.2.

The machine's load average is printed with each part: a loaded machine stretches every time.

Run: python bench/bench_mutate.py [--design fifo_sync] [-n 32] [--standalone 3] [--scale | --only-scale]
[--without-every-site] [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from reps import interleaved, ratios, spread

from hwtp.mutators import engine, mutantset
from hwtp.mutators.pyverilog_frontend import find_sites_pyverilog
from hwtp.mutators.sites import find_sites
from hwtp.plans.files import PlanInput
from hwtp.plans.format import load_plan_file
from hwtp.rtl.design import load_design, shipped_names
from hwtp.scoring.score import ScoreConfig, prepare, score
from hwtp.sim import warm
from hwtp.sim.backends import get_backend
from hwtp.sim.buildcache import ensure_build
from hwtp.sim.executors.base import Schemata, schemata_targets
from hwtp.sim.job import Evaluation
from hwtp.sim.wrapper import WRAPPER_TOP, build_sources


def _sites(finder: Callable[[str, str], list[Any]], designs: list[Any], name: str, report: bool) -> tuple[int, int]:
    """(designs parsed, sites found) by one front end over ``designs``."""
    parsed = sites = 0
    for d in designs:
        try:
            for src in d.sources:
                sites += len(finder(src.text, src.path))
            parsed += 1
        except Exception as exc:  # a front end that cannot parse a design counts as not parsed
            if report:
                print(f"  {name}: {d.name}: {type(exc).__name__}: {str(exc)[:80]}")
    return parsed, sites


def _schemata_of_every_site(designs: list[Any]) -> None:
    for d in designs:
        sites = [s for src in d.sources for s in find_sites(src.text, src.path) if not s.equivalent]
        numbered = engine._number(d, 0, [engine._record(i, (s,)) for i, s in enumerate(sites, 1)])
        mutantset.schemata_sources(numbered)


def frontends(reps: int) -> None:
    """Part 1, ``reps`` times interleaved: each front end's time, and pyslang's with schemata."""
    designs = [load_design(n) for n in shipped_names()]
    finders = {"pyslang": find_sites, "pyverilog": find_sites_pyverilog}
    counts = {name: _sites(finder, designs, name, report=True) for name, finder in finders.items()}

    def timed(work: Callable[[], object]) -> Callable[[], float]:
        def run() -> float:
            start = time.perf_counter()
            work()
            return time.perf_counter() - start

        return run

    runs = {name: timed(lambda f=f, n=name: _sites(f, designs, n, report=False)) for name, f in finders.items()}
    runs["pyslang + schemata"] = timed(lambda: _schemata_of_every_site(designs))
    got = interleaved(reps, runs)
    print(f"{'front end':<12}{'designs parsed':>16}{'sites':>8}   time s, median (min..max) of {reps}")
    for name, (parsed, sites) in counts.items():
        print(f"{name:<12}{parsed:>10}/{len(designs):<5}{sites:>8}   {spread(got[name]).show('.3f')}")
    print(
        f"pyslang parse + sites + schemata of every site, all {len(designs)} designs: "
        f"{spread(got['pyslang + schemata']).show('.3f')} s; pyverilog/pyslang time "
        f"{ratios(got['pyverilog'], got['pyslang']).show(unit='x')}"
    )


def validation(design_name: str, n: int, standalone: int, reps: int) -> None:
    """Part 2, ``reps`` times (the two flows' order reversed on every other repetition), each in
    empty build caches of its own (ccache is shared, as on a CI machine: both flows hit it)."""
    design = load_design(design_name)
    result = engine.mutate(design, engine.MutationConfig(n=n, witness_cycles=0, jobs=1))
    measured = result.valid[:standalone]

    def ours() -> float:
        with tempfile.TemporaryDirectory(prefix="hwtp-bench-") as tmp:
            start = time.perf_counter()
            engine.mutate(design, engine.MutationConfig(n=n, witness_cycles=0, jobs=1))  # the lint
            schemata_targets(result, cache_root=Path(tmp) / "s").build(1)
            return time.perf_counter() - start

    def per_build() -> float:
        with tempfile.TemporaryDirectory(prefix="hwtp-bench-") as tmp:
            start = time.perf_counter()
            for m in measured:
                ensure_build(
                    get_backend("verilator"), build_sources(design, result.sources_of(m)), WRAPPER_TOP,
                    root=Path(tmp) / "a",
                )
            return (time.perf_counter() - start) / max(1, len(measured))

    got = interleaved(reps, {"hwtp": ours, "standalone": per_build})
    theirs = [b * len(result.valid) for b in got["standalone"]]
    print(f"\nvalidating {len(result.mutants)} mutants of {design_name} ({len(result.valid)} valid), {_load()}:")
    print(f"  hwtp: lint + schemata build(s)          {spread(got['hwtp']).show('.1f')} s")
    print(
        f"  one standalone build per mutant         {spread(theirs).show('.1f')} s  "
        f"({spread(got['standalone']).show('.1f')} s per build, measured on {len(measured)}, extrapolated)"
    )
    cost = [o / b for o, b in zip(got["hwtp"], got["standalone"], strict=True)]
    print(
        f"  ratio {ratios(theirs, got['hwtp']).show(unit='x')}; hwtp costs {spread(cost).show('.1f')} standalone "
        f"builds (goal < 3), {reps} repetitions"
    )


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min {five:.1f}) on {os.cpu_count()} cores"


def _tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and every process below it, now (from /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += children.get(pid, [])
    return total


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (and theirs)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _pids_cpu(pids: list[int]) -> float:
    """CPU seconds so far of the running processes ``pids`` (from /proc)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _measured(argv: list[str], environ: dict[str, str]) -> tuple[float, float, int, int, str]:
    """Wall seconds, CPU seconds of the process tree, its peak RSS, the exit code and the last
    lines of ``argv``."""
    with tempfile.TemporaryFile("w+") as log:
        cpu = _children_cpu()
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env=environ, stdout=log, stderr=subprocess.STDOUT)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _tree_rss(proc.pid))
            time.sleep(0.1)
        seconds = time.perf_counter() - start
        cpu = _children_cpu() - cpu
        log.seek(0)
        tail = " | ".join(log.read().strip().splitlines()[-2:])
    return seconds, cpu, peak, proc.returncode, tail


def _spread(values: list[float], unit: str, scale: float = 1.0, digits: int = 1) -> str:
    v = [x / scale for x in values]
    return (
        f"median {statistics.median(v):.{digits}f} {unit} (range {min(v):.{digits}f}-{max(v):.{digits}f}, "
        f"{len(v)} reps)"
    )


def scale(reps: int, jobs: int, every_site: bool = True) -> dict[str, Path]:
    """``hwtp mutate traffic_light`` at scale, cold caches; the mutant folders of the last reps
    (``every_site``: also ``-n 2000``)."""
    kept: dict[str, Path] = {}
    runs = [("-n 512 --depth 2", ["-n", "512", "--depth", "2"], (180.0, 4 << 30)), ("-n 2000", ["-n", "2000"], None)]
    for label, args, goal in runs if every_site else runs[:1]:
        times: list[float] = []
        cpus: list[float] = []
        peaks: list[float] = []
        for rep in range(reps):
            tmp = Path(tempfile.mkdtemp(prefix="hwtp-bench-scale-"))
            environ = {**os.environ, "HWTP_CACHE_DIR": str(tmp / "cache"), "CCACHE_DIR": str(tmp / "ccache")}
            argv = [
                str(Path(sys.executable).parent / "hwtp"),
                "mutate",
                "traffic_light",
                *args,
                "-j",
                str(jobs),
                "-o",
                str(tmp / "mutants"),
            ]
            load = _load()
            seconds, cpu, peak, code, tail = _measured(argv, environ)
            if code != 0:  # e.g. a simulator start-up past its budget on an overloaded machine: the next rep
                print(f"  rep {rep + 1}: hwtp mutate traffic_light {label}: exit {code} after {seconds:.1f} s: {tail}")
                continue
            times.append(seconds)
            cpus.append(cpu)
            peaks.append(peak)
            kept[label] = tmp / "mutants"
            parts = len(schemata_targets(mutantset.load(tmp / "mutants")).targets)
            print(
                f"  rep {rep + 1}: {seconds:.1f} s wall, {cpu:.1f} s CPU, peak {peak / 2**30:.2f} GB, "
                f"{parts} schemata builds ({load}; after: {_load()})"
            )
        if not times:
            continue
        print(
            f"hwtp mutate traffic_light {label} -j {jobs}: wall {_spread(times, 's')}, "
            f"CPU of the process tree {_spread(cpus, 's')}, peak RSS {_spread(peaks, 'GB', 2**30)}"
        )
        if goal is not None:
            ok = statistics.median(times) <= goal[0] and max(peaks) <= goal[1]
            print(f"  goal <= {goal[0]:.0f} s and <= {goal[1] / 2**30:.0f} GB: {'met' if ok else 'MISSED'}")
    return kept


def scoring_cost(reps: int, jobs: int, large: Path | None) -> None:
    """Seconds per evaluation on a set of 32 mutants and on the -n 512 --depth 2 set: the same
    plans on the same 32 states, so the simulations are the same work and only the set's size
    differs (the small set is the large one cut to those 32 mutants, at the same selector
    values, in a build of its own; without the large set, a -n 16 --depth 2 set of 32)."""
    design = load_design("traffic_light")
    sets: dict[str, mutantset.MutantSet] = {}
    if large is not None:
        big = mutantset.load(large)
        states = list(big.states)
        step = max(1, len(states) // 32)
        kept = {m.id for m in states[::step][:32]}
        sets["32"] = replace(big, mutants=tuple(m for m in big.mutants if m.id in kept), spares=())
        sets["512"] = big
    else:
        sets["32"] = engine.mutate(
            design, engine.MutationConfig(n=16, depth=2, branching=1, witness_cycles=0, jobs=jobs)
        )
    reference = load_plan_file(design.root / "plans" / "reference.yaml")
    plans = [PlanInput(f"ref{i}", reference) for i in range(8)]
    per_eval: dict[str, list[float]] = {}
    for label, mutant_set in sets.items():
        states = list(mutant_set.states)
        step = max(1, len(states) // 32)
        chosen = tuple(m.id for m in states[::step][:32])
        config = ScoreConfig(states=chosen, jobs=jobs, full_matrix=True)
        parts = schemata_targets(mutant_set)
        parts.build(jobs)
        for _ in range(reps):
            cpu = _children_cpu() + time.process_time()
            scores = score(mutant_set, plans, config)
            cpu = _children_cpu() + time.process_time() - cpu
            per_eval.setdefault(label, []).append(scores.seconds / scores.evaluations * 1000)
            per_eval.setdefault(f"cpu {label}", []).append(cpu / scores.evaluations * 1000)
        print(
            f"scoring on {len(mutant_set.valid)} mutants ({len(parts.targets)} builds), {scores.evaluations} "
            f"evaluations per rep: wall {_spread(per_eval[label], 'ms per evaluation')}, CPU "
            f"{_spread(per_eval[f'cpu {label}'], 'ms per evaluation')} ({_load()})"
        )
        more = [PlanInput(f"warm{i}", reference) for i in range(32)]
        many = list(prepare(mutant_set, more, config).evaluations.values())
        warm_ms, warm_cpu = _warm_cost(mutant_set, parts, many, reps, jobs)
        per_eval.setdefault(f"warm {label}", []).extend(warm_ms)
        per_eval.setdefault(f"cpu warm {label}", []).extend(warm_cpu)
        print(
            f"  warm pools (one per build, {jobs} running at once in all), {len(many)} evaluations per rep: "
            f"wall {_spread(warm_ms, 'ms per evaluation')}, CPU {_spread(warm_cpu, 'ms per evaluation')}"
        )
    for how in ("", "warm ", "cpu ", "cpu warm "):
        if f"{how}512" not in per_eval:
            continue
        growth = [b / a for a, b in zip(per_eval[f"{how}32"], per_eval[f"{how}512"], strict=True)]
        ok = 0.8 <= statistics.median(growth) <= 1.2
        print(
            f"cost per evaluation, {how or 'hwtp score, '}512 vs 32 mutants: {_spread(growth, 'x', 1, 2)} "
            f"(goal 0.8-1.2: {'met' if ok else 'MISSED'})"
        )


def _warm_cost(
    mutant_set: mutantset.MutantSet, parts: Schemata, evaluations: list[Evaluation], reps: int, jobs: int
) -> tuple[list[float], list[float]]:
    """ms per evaluation through warm pools (the reward functions' path), one pool per build,
    all sharing one budget of ``jobs`` running processes as the reward functions' pools do,
    after one warm-up pass: what a training step pays."""
    builds = parts.build(jobs)
    budget = warm.Budget(jobs)
    pools = [warm.WarmPool(b, mutant_set.design, workers=jobs, budget=budget) for b in builds]
    try:
        out, cpus = [], []
        for rep in range(reps + 1):
            pids = [pid for pool in pools for pid in pool.pids()]
            cpu = _pids_cpu(pids) + time.process_time()
            start = time.perf_counter()
            futures = [pools[i].submit(group) for i, group in parts.split(evaluations)]
            for f in futures:
                f.result()
            if rep:  # the first pass starts the processes; one started later counts its start-up
                out.append((time.perf_counter() - start) / len(evaluations) * 1000)
                now = sorted({*pids, *(pid for pool in pools for pid in pool.pids())})
                cpus.append((_pids_cpu(now) + time.process_time() - cpu) / len(evaluations) * 1000)
        return out, cpus
    finally:
        for pool in pools:
            pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--design", default="fifo_sync")
    parser.add_argument("-n", type=int, default=32)
    parser.add_argument("--standalone", type=int, default=3)
    parser.add_argument("--scale", action="store_true", help="also part 3 (minutes per repetition)")
    parser.add_argument("--only-scale", action="store_true", help="part 3 only")
    parser.add_argument("--without-every-site", action="store_true", help="part 3 without its -n 2000 run")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument(
        "--large", type=Path, help="part 3's scoring cost only, on this -n 512 --depth 2 mutant folder"
    )
    args = parser.parse_args()
    if args.large:
        scoring_cost(args.reps, args.jobs, args.large)
        return
    if not args.only_scale:
        frontends(args.reps)
        validation(args.design, args.n, args.standalone, args.reps)
    if args.scale or args.only_scale:
        print(f"\nschemata at scale ({_load()}):")
        kept = scale(args.reps, args.jobs, every_site=not args.without_every_site)
        scoring_cost(args.reps, args.jobs, kept.get("-n 512 --depth 2"))


if __name__ == "__main__":
    main()
