"""Reward time as a share of a GRPO training step's wall time in ``hwtp learn`` (goal: <= 10%).

    python bench/bench_learn_reward.py [--design counter_en_load] [--steps 4] [--reps 3]
                                       [--prompts 8] [-G 8] [--from OUT]

Each rep trains one GRPO-SMu arm for ``--steps`` steps from the same warm start (a short SFT)
and times hwtp's reward function inside TRL (``hwtp.training.learn.grpo.RewardClock``) against the
trainer's wall time. ``--from OUT`` instead reads the shares an ``hwtp learn -o OUT`` run
measured (every arm and seed). Prints each rep's share, then mean and min..max.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def _from_results(folder: Path) -> list[tuple[str, float, float]]:
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    return [
        (f"seed {r['seed']} {name}", arm["reward_seconds"], arm["seconds"])
        for r in results["runs"]
        for name, arm in r["arms"].items()
    ]


def _measure(args: argparse.Namespace) -> list[tuple[str, float, float]]:
    import torch

    import hwtp.rewards
    from hwtp.training.learn.data import DataConfig, prepare_design, sft_rows
    from hwtp.training.learn.grpo import DEFAULT_ARMS, GRPOSettings, train_arm
    from hwtp.training.learn.model import ModelConfig, build_model, build_tokenizer
    from hwtp.training.learn.sft import SFTConfig, train_sft

    torch.set_num_threads(1)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = prepare_design(args.design, root / "states", DataConfig(held_out=4, train_mutants=8, weak_plans=24))
        hwtp.rewards.configure(states=[root / "states"], workers=2)
        tokenizer = build_tokenizer([s.prompt for s in data.states] + list(data.plans), ModelConfig().vocab)
        model = build_model(tokenizer, ModelConfig(), 0)
        train_sft(model, tokenizer, sft_rows([data], 8, 0), SFTConfig(steps=args.sft_steps), 0)
        warm = root / "warm-start"
        model.save_pretrained(warm)
        settings = GRPOSettings(steps=args.steps, prompts=args.prompts, generations=args.generations)
        arm = DEFAULT_ARMS[-1]
        try:
            for rep in range(args.reps):
                _, trained = train_arm(warm, tokenizer, data.split("train"), arm, settings, rep, root / "trainer")
                out.append((f"rep {rep} {arm.name}", trained["reward_seconds"], trained["seconds"]))
        finally:
            hwtp.rewards.reset()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--design", default="counter_en_load")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("-G", "--generations", type=int, default=8)
    parser.add_argument("--sft-steps", type=int, default=100)
    parser.add_argument("--from", dest="source", type=Path, help="read an hwtp learn OUT folder instead")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    start = time.perf_counter()
    rows = _from_results(args.source) if args.source else _measure(args)
    load = os.getloadavg()
    print(f"| run | reward s | step wall s | reward share |  (load average {load[0]:.1f} on {os.cpu_count()} CPUs)")
    print("|---|---|---|---|")
    shares = []
    for label, reward, wall in rows:
        share = reward / wall if wall > 0 else 0.0
        shares.append(share)
        print(f"| {label} | {reward:.1f} | {wall:.1f} | {share:.1%} |")
    mean = sum(shares) / len(shares)
    print(
        f"reward share of the step: mean {mean:.1%} (min {min(shares):.1%}, max {max(shares):.1%}) over "
        f"{len(shares)} runs; goal <= 10%; bench wall {time.perf_counter() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
