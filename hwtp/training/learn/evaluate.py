"""Evaluation of a policy on states it was not trained on: sampled plans scored by
``hwtp.rewards`` (the rewards the trainer gets), counted as golden passes, detections and
invalid plans."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hwtp.mutators.mutantset import GOLDEN
from hwtp.training.learn.data import State

#: Outcomes whose plan passed on golden.
PASSED_GOLDEN = ("passed", "detected")


@dataclass(frozen=True)
class EvalConfig:
    samples: int = 2  # plans per state
    temperature: float = 1.0
    max_new_tokens: int = 128
    batch: int = 64


def generate(model: Any, tokenizer: Any, prompts: Sequence[str], config: EvalConfig, seed: int) -> list[str]:
    """``config.samples`` sampled completions per prompt, prompt by prompt in order."""
    import torch

    torch.manual_seed(seed)
    flat = [p for p in prompts for _ in range(config.samples)]
    out: list[str] = []
    model.eval()
    with torch.no_grad():
        for start in range(0, len(flat), config.batch):
            chunk = flat[start : start + config.batch]
            enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False)
            ids = model.generate(
                **enc,
                do_sample=True,
                temperature=config.temperature,
                top_k=0,
                max_new_tokens=config.max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
            out += tokenizer.batch_decode(ids[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    return out


def summarize(states: Sequence[State], outcomes: Sequence[str], samples: int) -> dict[str, Any]:
    """Rates over the samples: golden pass (all states), detection (mutant states), invalid."""
    n = len(outcomes)
    mutant = [
        o for s, o in zip((s for s in states for _ in range(samples)), outcomes, strict=True) if s.state != GOLDEN
    ]
    counts = Counter(outcomes)
    detected_states = {
        s.state
        for i, s in enumerate(states)
        if s.state != GOLDEN and "detected" in outcomes[i * samples : (i + 1) * samples]
    }
    return {
        "samples": n,
        "mutant_samples": len(mutant),
        "states": len(states),
        "golden_pass": sum(counts[o] for o in PASSED_GOLDEN) / n if n else 0.0,
        "detection": sum(o == "detected" for o in mutant) / len(mutant) if mutant else 0.0,
        "invalid": counts["invalid"] / n if n else 0.0,
        "mutants_detected": len(detected_states),
        "outcomes": dict(sorted(counts.items())),
    }


def evaluate(model: Any, tokenizer: Any, states: Sequence[State], config: EvalConfig, seed: int) -> dict[str, Any]:
    """Sample, score and summarise ``states`` (one split) with the policy as it is now."""
    import hwtp.rewards

    texts = generate(model, tokenizer, [s.prompt for s in states], config, seed)
    truths = [s.truth for s in states for _ in range(config.samples)]
    results = hwtp.rewards.score_completions(list(zip(truths, texts, strict=True)))
    return summarize(states, [r.outcome for r in results], config.samples)
