"""Zero-advantage groups by state vs by design, with the offline policy and with a
deliberately imperfect one, under the ceiling-relative rule (default) and the raw rule.

    python bench/bench_zero_share.py [--designs fifo_sync,counter_en_load,adder_carry,alu_flags]
                                     [--states 8] [-G 8] [--corrupt 0.25] [--weaken 0.5]

The imperfect policy is the offline policy with, per sample, probability ``--corrupt`` of one
expectation made wrong (the plan then fails on golden) and probability ``--weaken`` of
keeping only its first expectation per test (weaker checking: it passes golden but misses
more bugs). The share that matters is the one under design grouping: it should fall only
where plans differ in quality, never because golden's ceiling is lower than a mutant's.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path
from typing import Any

from hwtp import yamlio
from hwtp.errors import PlanError
from hwtp.mutators import engine, mutantset
from hwtp.plans.files import PlanInput
from hwtp.plans.format import extract_plan
from hwtp.policy.planning import plan_states
from hwtp.policy.policies import RandomPolicy
from hwtp.policy.prompt import Templates
from hwtp.rtl.design import load_design
from hwtp.scoring.score import GOLDEN, ScoreConfig, score
from hwtp.training.advantage import preset, summarize


def _degrade(text: str, rng: random.Random, corrupt: float, weaken: float) -> str:
    data = yamlio.load(text).data
    expects = [s for t in data["tests"] for s in t["steps"] if "expect" in s]
    if expects and rng.random() < corrupt:
        step = rng.choice(expects)
        port = sorted(step["expect"])[0]
        step["expect"][port] = 1 if step["expect"][port] in (0, "0") else 0
    elif rng.random() < weaken:
        for t in data["tests"]:
            first = next((i for i, s in enumerate(t["steps"]) if "expect" in s), None)
            t["steps"] = [s for i, s in enumerate(t["steps"]) if "expect" not in s or i == first]
    return yamlio.dump(data)


def _scores(designs: list[str], states: int, samples: int, corrupt: float, weaken: float, root: Path) -> list[Any]:
    docs = {"offline": [], "imperfect": []}
    templates = Templates.load()
    for name in designs:
        result = engine.mutate(load_design(name), engine.MutationConfig(n=states, seed=0, jobs=2))
        mutantset.write(result, root / name)
        mutant_set = mutantset.load(root / name)
        ids = [GOLDEN, *(m.id for m in mutant_set.valid)]
        records = plan_states(mutant_set, ids, samples, RandomPolicy(mutant_set, seed=0), templates)
        rng = random.Random(f"{name}-degrade")
        for kind in docs:
            plans = []
            for r in records:
                text = r.generated.text or ""
                if kind == "imperfect" and text:
                    text = _degrade(text, rng, corrupt, weaken)
                try:
                    plans.append(PlanInput(r.plan, extract_plan(text), state=r.state))
                except PlanError as exc:
                    plans.append(PlanInput(r.plan, None, str(exc), state=r.state))
            docs[kind].append(score(mutant_set, plans, ScoreConfig(jobs=2)).as_dict())
    return list(docs.items())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--designs", default="fifo_sync,counter_en_load,adder_carry,alu_flags")
    parser.add_argument("--states", type=int, default=8)
    parser.add_argument("-G", "--samples", type=int, default=8)
    parser.add_argument("--corrupt", type=float, default=0.25)
    parser.add_argument("--weaken", type=float, default=0.5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = _scores(args.designs.split(","), args.states, args.samples, args.corrupt, args.weaken, Path(tmp))
    print("| policy | mean reward | rule | zero-advantage groups by state | by design |")
    print("|---|---|---|---|---|")
    for kind, docs in runs:
        rewards = [r["reward"] for d in docs for r in d["results"]]
        for rule in ("relative", "raw"):
            s = summarize(docs, preset("grpo-smu", ceiling=rule))
            print(
                f"| {kind} | {sum(rewards) / len(rewards):.2f} | {rule} | "
                f"{s['state'].zero_groups}/{s['state'].groups} ({s['state'].share:.0%}) | "
                f"{s['design'].zero_groups}/{s['design'].groups} ({s['design'].share:.0%}) |"
            )


if __name__ == "__main__":
    main()
