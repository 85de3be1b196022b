"""Vectorised advantages vs a per-group Python loop, measured in the same run.

    python bench/bench_advantage.py            # 1,000,000 rewards in groups of 8
    python bench/bench_advantage.py --n 100000

Rewards are drawn from {0, 1, 2} (seeded) and scored under the ``grpo-smu`` preset. The
baseline is the straightforward implementation: one numpy computation per group in a Python
loop. Per repetition (interleaved) the loop runs once and the core --core-calls times back to
back (its mean kept: one 0.1 s call sees a single slice of a loaded machine's scheduler, the
loop's 6 s average over many), in wall time and in CPU time (the process's own: far less
sensitive to other work on the machine); medians and ranges are printed.
Goal: the core at least 50x faster and under 0.2 s for a million rewards (medians).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from reps import Clock, add_reps_argument, clock, interleaved, load_report, ratios, since, spread  # bench/ on sys.path

from hwtp.training.advantage import PRESETS, AdvantageConfig, compute_advantages

Floats = npt.NDArray[Any]


def per_group_loop(rewards: Floats, groups: npt.NDArray[np.int64], cfg: AdvantageConfig) -> Floats:
    """grpo-smu, one group at a time: (r - mean of the others) / (sample std of the group + ε)."""
    out = np.zeros_like(rewards)
    members: dict[int, list[int]] = {}
    for i, g in enumerate(groups.tolist()):
        members.setdefault(g, []).append(i)
    for idx in members.values():
        r = rewards[idx]
        n = r.size
        if n < 2 or r.min() == r.max():
            continue
        loo_mean = (r.sum() - r) / (n - 1)
        out[idx] = (r - loo_mean) / (r.std(ddof=cfg.ddof) + cfg.epsilon)
    return out


def timed(fn: Callable[[], Floats], calls: int = 1) -> tuple[Clock, Floats]:
    """((wall, CPU) seconds per call, the mean over ``calls`` back-to-back calls; the last result)."""
    start = clock()
    for _ in range(calls):
        result = fn()
    wall, cpu = since(start)
    return (wall / calls, cpu / calls), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="number of rewards")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--core-calls", type=int, default=10, help="calls of the core per repetition (mean kept; the loop runs once)"
    )
    add_reps_argument(parser, default=5)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    rewards = rng.integers(0, 3, size=args.n).astype(np.float64)
    groups = np.arange(args.n, dtype=np.int64) // args.group_size
    shuffled = rng.permutation(args.n)
    rewards_shuf, groups_shuf = rewards[shuffled], groups[shuffled]  # made before anything is timed
    cfg = PRESETS["grpo-smu"]
    n_groups = -(-args.n // args.group_size)
    title = f"{args.n:,} rewards in {n_groups:,} groups of {args.group_size}, preset grpo-smu, {args.reps} reps"
    with load_report(title):
        compute_advantages(rewards, groups, cfg)  # warm-up, not timed (first-call allocations)
        runs = interleaved(
            args.reps,
            {
                "loop": lambda: timed(lambda: per_group_loop(rewards, groups, cfg)),
                "grouped": lambda: timed(lambda: compute_advantages(rewards, groups, cfg), args.core_calls),
                "shuffled": lambda: timed(lambda: compute_advantages(rewards_shuf, groups_shuf, cfg), args.core_calls),
            },
        )
        slow, fast, fast_shuf = runs["loop"][0][1], runs["grouped"][0][1], runs["shuffled"][0][1]
        assert np.allclose(fast, slow, rtol=1e-9, atol=1e-9), "core and loop disagree"
        assert np.allclose(fast_shuf, fast[shuffled], rtol=1e-9, atol=1e-9), "order changed results"
        for kind, which in (("wall", 0), ("CPU", 1)):
            seconds = {name: [t[which] for t, _ in got] for name, got in runs.items()}
            print(f"{'implementation, ' + kind + ' time':<36}{'seconds, median (min..max)':>30}{'speed-up':>24}")
            for label, name in (
                ("per-group Python loop", "loop"),
                ("vectorised core (rows grouped)", "grouped"),
                ("vectorised core (rows shuffled)", "shuffled"),
            ):
                speed = ratios(seconds["loop"], seconds[name]).show(".1f", "x")
                print(f"{label:<36}{spread(seconds[name]).show('.3f'):>30}{speed:>24}")
            core = spread(seconds["grouped"])
            speed_up = ratios(seconds["loop"], seconds["grouped"])
            goal = "met" if speed_up.median >= 50 and core.median < 0.2 else "NOT met"
            print(f"goal (>= 50x and < 0.2 s for the core on grouped rows, medians of {kind} time): {goal}")


if __name__ == "__main__":
    main()
