"""Benchmark: what a dense reward costs per completion, ``kill-fraction`` against ``smu``.

Workload: random 1-test plans (as ``bench_rewards.py`` makes them: one per state, spread over
golden and the mutants) for one design mutated twice, with 32 and with 128 mutants (default
alu_flags: every mutant killable, so the dense reward runs each plan on all of them). Both
schemes score the same completions through ``hwtp.rewards.score_completions`` (what every
trainer adapter and ``hwtp serve`` call) on warm pools of --workers simulator processes:
``smu`` needs 2 evaluations per completion (golden and its state), ``kill-fraction`` 1 + the
killable mutants (one process runs them all, the selector set per evaluation).

Reported per mutant count, over --reps repetitions (the schemes alternate inside each, so they
share the machine's load): p50 latency of one completion, rewards/s in batches of 64, and the
ratio kill-fraction / smu of each (taken inside a repetition), median (min..max).

Run: python bench/bench_schemes.py [--design alu_flags] [--mutants 32,128] [--workers 2] [--reps 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_rewards import HWTP, completions, measure, percentile
from reps import add_reps_argument, load_report, ratios, spread

from hwtp import rewards
from hwtp.mutators import mutantset
from hwtp.scoring.scheme import KILL_FRACTION, SMU, killable
from hwtp.sim import warm

SCHEMES = (SMU, KILL_FRACTION)


def mutant_folder(root: Path, design: str, count: int) -> Path:
    """``hwtp mutate DESIGN -n COUNT`` into ``root`` (kept: a second run reuses it)."""
    folder = root / f"{design}-{count}"
    if not (folder / mutantset.MUTANTS_JSON).is_file():
        done = subprocess.run(
            [HWTP, "mutate", design, "-n", str(count), "--formal", "off", "-o", str(folder)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"hwtp mutate failed: {done.stderr}")
    return folder


def run_count(folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    mutant_set = mutantset.load(folder)
    items = completions(mutant_set, args.completions, seed=0)
    per: dict[str, dict[str, list[float]]] = {s: {"p50": [], "rate": []} for s in SCHEMES}
    rewards_seen: dict[str, list[float | None]] = {}
    for scheme in SCHEMES:  # warm-up, not measured: the build, the pool's processes, one batch each
        rewards.configure(states=[folder], workers=args.workers, reward_scheme=scheme)
        rewards.score_completions(items[: args.batch])
    for rep in range(args.reps):
        for scheme in SCHEMES if rep % 2 == 0 else tuple(reversed(SCHEMES)):
            rewards.configure(states=[folder], workers=args.workers, reward_scheme=scheme)

            def run(batch: Any) -> list[float | None]:
                return [r.reward for r in rewards.score_completions(list(batch))]

            got = measure(run, items, args.singles, args.batches, args.batch)
            per[scheme]["p50"].append(percentile(got.single_ms, 50))
            per[scheme]["rate"].append(got.batch_rate)
            rewards_seen[scheme] = got.rewards
        print(
            f"  rep {rep + 1}: "
            + ", ".join(f"{s} p50 {per[s]['p50'][-1]:.1f} ms, {per[s]['rate'][-1]:.0f}/s" for s in SCHEMES),
            flush=True,
        )
    rewards.reset()
    warm.close_all()
    dense = [r for r in rewards_seen[KILL_FRACTION] if r is not None]
    return {
        "valid": len(mutant_set.valid),
        "killable": len(killable(mutant_set)),
        "per": per,
        "p50_ratio": ratios(per[KILL_FRACTION]["p50"], per[SMU]["p50"]),
        "rate_ratio": ratios(per[KILL_FRACTION]["rate"], per[SMU]["rate"]),
        "distinct_dense_rewards": len(set(dense)),
        "distinct_smu_rewards": len({r for r in rewards_seen[SMU] if r is not None}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--design", default="alu_flags")
    parser.add_argument("--mutants", default="32,128", help="mutant counts (hwtp mutate -n), comma-separated")
    parser.add_argument("--workers", type=int, default=2)
    add_reps_argument(parser)
    parser.add_argument("--completions", type=int, default=256)
    parser.add_argument("--singles", type=int, default=40, help="one-completion calls per repetition (p50)")
    parser.add_argument("--batches", type=int, default=4, help="batches per repetition (rewards/s)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--workdir", type=Path, help="keep the mutant sets here (default: a temporary folder)")
    args = parser.parse_args()
    with load_report("reward schemes: kill-fraction against smu per completion"):
        root = args.workdir or Path(tempfile.mkdtemp(prefix="hwtp-bench-schemes-"))
        rows = []
        for count in (int(c) for c in args.mutants.split(",")):
            folder = mutant_folder(root, args.design, count)
            print(f"{args.design}, {count} mutants ({folder}):", flush=True)
            rows.append((count, run_count(folder, args)))
        print()
        print(
            "| mutants (killable) | smu p50, rewards/s | kill-fraction p50, rewards/s | p50 ratio | rewards/s ratio |"
        )
        print("|---|---|---|---|---|")
        for count, r in rows:
            smu, dense = r["per"][SMU], r["per"][KILL_FRACTION]
            print(
                f"| {count} ({r['killable']}) | {spread(smu['p50']).show('.1f', ' ms')}, "
                f"{spread(smu['rate']).show('.0f', '/s')} | {spread(dense['p50']).show('.1f', ' ms')}, "
                f"{spread(dense['rate']).show('.0f', '/s')} | {r['p50_ratio'].show(unit='x')} "
                f"| {r['rate_ratio'].show(unit='x')} |"
            )
        for count, r in rows:
            print(
                f"{count} mutants: distinct rewards over the completions: smu {r['distinct_smu_rewards']}, "
                f"kill-fraction {r['distinct_dense_rewards']}"
            )
        sys.stdout.flush()


if __name__ == "__main__":
    main()
