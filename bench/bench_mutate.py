"""Benchmark: the mutation engine's front end and the cost of validating mutants.

1. Parse + site discovery + schemata generation for every shipped design, with the pyslang
   and the pyverilog front ends side by side (designs parsed, sites found, time).
2. Validation of N mutants of one sequential design: hwtp (one Verilator lint of all + ONE
   schemata build) vs compiling each mutant on its own (a full Verilator build each; measured
   on --standalone builds and extrapolated). Goal: hwtp < 3 standalone builds.

Run: python bench/bench_mutate.py [--design fifo_sync] [-n 32] [--standalone 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from hwtp import mutantset
from hwtp import mutate as engine
from hwtp.design import load_design, shipped_names
from hwtp.mutators.pyverilog_frontend import find_sites_pyverilog
from hwtp.mutators.sites import find_sites
from hwtp.sim.backends import get_backend
from hwtp.sim.buildcache import ensure_build
from hwtp.sim.wrapper import WRAPPER_TOP, build_sources


def frontends() -> None:
    designs = [load_design(n) for n in shipped_names()]
    print(f"{'front end':<12}{'designs parsed':>16}{'sites':>8}{'time s':>10}")
    for name, finder in (("pyslang", find_sites), ("pyverilog", find_sites_pyverilog)):
        parsed = sites = 0
        start = time.perf_counter()
        for d in designs:
            try:
                for src in d.sources:
                    sites += len(finder(src.text, src.path))
                parsed += 1
            except Exception as exc:  # a front end that cannot parse a design counts as not parsed
                print(f"  {name}: {d.name}: {type(exc).__name__}: {str(exc)[:80]}")
        print(f"{name:<12}{parsed:>10}/{len(designs):<5}{sites:>8}{time.perf_counter() - start:>10.3f}")
    start = time.perf_counter()
    for d in designs:
        sites = [s for src in d.sources for s in find_sites(src.text, src.path) if not s.equivalent]
        numbered = engine._number(d, 0, [engine._record(i, (s,)) for i, s in enumerate(sites, 1)])
        mutantset.schemata_sources(numbered)
    print(
        f"pyslang parse + sites + schemata of every site, all {len(designs)} designs: "
        f"{time.perf_counter() - start:.3f} s"
    )


def validation(design_name: str, n: int, standalone: int) -> None:
    design = load_design(design_name)
    with tempfile.TemporaryDirectory(prefix="hwtp-bench-") as tmp:
        start = time.perf_counter()
        result = engine.mutate(design, engine.MutationConfig(n=n, witness_cycles=0, jobs=1))
        lint_s = time.perf_counter() - start
        schemata, _ = mutantset.schemata_sources(result)
        start = time.perf_counter()
        ensure_build(get_backend("verilator"), build_sources(design, schemata), WRAPPER_TOP, root=Path(tmp) / "s")
        schemata_s = time.perf_counter() - start
        start = time.perf_counter()
        for m in result.valid[:standalone]:
            ensure_build(
                get_backend("verilator"), build_sources(design, result.sources_of(m)), WRAPPER_TOP, root=Path(tmp) / "a"
            )
        per_build = (time.perf_counter() - start) / max(1, min(standalone, len(result.valid)))
    ours = lint_s + schemata_s
    theirs = per_build * len(result.valid)
    print(f"\nvalidating {len(result.mutants)} mutants of {design_name} ({len(result.valid)} valid):")
    print(f"  hwtp: lint + one schemata build       {ours:7.1f} s  ({lint_s:.1f} s lint, {schemata_s:.1f} s build)")
    print(
        f"  one standalone build per mutant        {theirs:7.1f} s  ({per_build:.1f} s per build, "
        f"measured on {standalone}, extrapolated)"
    )
    print(f"  ratio {theirs / ours:.1f}x; hwtp costs {ours / per_build:.1f} standalone builds (goal < 3)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--design", default="fifo_sync")
    parser.add_argument("-n", type=int, default=32)
    parser.add_argument("--standalone", type=int, default=3)
    args = parser.parse_args()
    frontends()
    validation(args.design, args.n, args.standalone)


if __name__ == "__main__":
    main()
