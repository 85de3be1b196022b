"""Soak: back-to-back ``hwtp run`` invocations with ``-j 2`` and over a thousand evaluations
each; counts failures and checks every evaluation was stored exactly once.

    python bench/soak_run.py [--runs 20] [--design fifo_sync] [--states 32] [-G 16]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hwtp.run.store import open_store


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--design", default="fifo_sync")
    parser.add_argument("--states", type=int, default=32)
    parser.add_argument("-G", "--samples", type=int, default=16)
    args = parser.parse_args()
    hwtp = shutil.which("hwtp") or str(Path(sys.executable).with_name("hwtp"))
    failures, counts = 0, set()
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            rundir = Path(tmp) / f"r{i}"
            start = time.perf_counter()
            proc = subprocess.run(
                [hwtp, "run", args.design, "-o", str(rundir), "--states", str(args.states),
                 "-G", str(args.samples), "-j", "2"],
                capture_output=True, text=True, check=False,
            )
            seconds = time.perf_counter() - start
            if proc.returncode != 0:
                failures += 1
                print(f"run {i + 1}: exit {proc.returncode} after {seconds:.1f} s: {proc.stderr.strip()[-300:]}")
                continue
            with open_store(rundir, readonly=True) as store:
                stored = store.evaluation_count(args.design)
                counted = store.counters().get("simulations", 0)
            counts.add((stored, counted))
            ok = stored == counted
            failures += not ok
            print(f"run {i + 1}: ok in {seconds:.1f} s, {stored} evaluations stored, {counted} counted")
            shutil.rmtree(rundir)
    print(f"{args.runs - failures} passed, {failures} failed")
    return 1 if failures or len(counts) != 1 else 0


if __name__ == "__main__":
    raise SystemExit(main())
