"""``hwtp learn``: warm start, GRPO arms, held-out evaluation, ``OUT/results.json``.

Per seed: one tokenizer (shared: it depends only on the data), one model built and SFT-trained
from that seed, evaluated once (the start both arms share), then each arm trains a copy of
that warm start with the same states, seed and budget and is evaluated again.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hwtp.learn.data import DataConfig, DesignData, State, prepare_design, sft_rows
from hwtp.learn.evaluate import EvalConfig, evaluate
from hwtp.learn.grpo import ARMS, Arm, GRPOSettings, train_arm
from hwtp.learn.model import ModelConfig, build_model, build_tokenizer, parameter_count
from hwtp.learn.sft import SFTConfig, train_sft
from hwtp.learn.stats import interval

#: results.json's format version.
FORMAT = 1
RESULTS = "results.json"
#: The metrics compared before and after (results.json "summary").
METRICS = ("golden_pass", "detection", "invalid")


@dataclass(frozen=True)
class LearnConfig:
    designs: tuple[str, ...]
    held_out_designs: tuple[str, ...] = ()
    seeds: tuple[int, ...] = (0, 1, 2)
    arms: tuple[Arm, ...] = ARMS
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    grpo: GRPOSettings = field(default_factory=GRPOSettings)
    evaluation: EvalConfig = field(default_factory=EvalConfig)
    sft_plans_per_state: int = 16
    shared_warm_start: bool = False  # one SFT (of the first seed) for every seed: seeds vary GRPO only
    workers: int = 2

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["arms"] = [a.as_dict() for a in self.arms]
        return out


def _load() -> dict[str, Any]:
    try:
        return {"loadavg": list(os.getloadavg()), "cpus": os.cpu_count()}
    except OSError:
        return {"cpus": os.cpu_count()}


def _eval_all(
    model: Any, tokenizer: Any, splits: dict[str, list[State]], config: EvalConfig, seed: int
) -> dict[str, Any]:
    return {name: evaluate(model, tokenizer, states, config, seed) for name, states in splits.items() if states}


def summarize_runs(runs: Sequence[dict[str, Any]], arms: Sequence[Arm]) -> dict[str, Any]:
    """Per arm and split: each metric before and after, and its change, across seeds."""
    out: dict[str, Any] = {}
    for arm in arms:
        per_split: dict[str, Any] = {}
        for split in runs[0]["before"] if runs else ():
            rows: dict[str, Any] = {}
            for metric in METRICS:
                before = [r["before"][split][metric] for r in runs]
                after = [r["arms"][arm.name]["after"][split][metric] for r in runs]
                rows[metric] = {
                    "before": interval(before),
                    "after": interval(after),
                    "change": interval([a - b for a, b in zip(after, before, strict=True)]),
                }
            per_split[split] = rows
        zero = [sum(s.get("zero_advantage_groups", 0.0) for s in r["arms"][arm.name]["steps"]) for r in runs]
        steps = [max(1, len(r["arms"][arm.name]["steps"])) for r in runs]
        per_split["zero_advantage_groups"] = interval([z / n for z, n in zip(zero, steps, strict=True)])
        out[arm.name] = per_split
    return out


def run(config: LearnConfig, out: Path, progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """The whole experiment; writes and returns ``OUT/results.json``'s content."""
    import torch

    import hwtp.rewards
    from hwtp.learn.plot import plot_results

    torch.set_num_threads(1)  # one thread: on a shared 2-core machine a second one mostly waits
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    states_root = out / "states"
    designs: list[DesignData] = []
    for name in config.designs:
        progress(f"states of {name}")
        designs.append(prepare_design(name, states_root, config.data))
    for name in config.held_out_designs:
        progress(f"states of held-out design {name}")
        designs.append(prepare_design(name, states_root, config.data, held_out_design=True))
    hwtp.rewards.configure(states=[states_root], workers=config.workers)
    train_states = [s for d in designs for s in d.split("train")]
    splits = {
        "held_out": [s for d in designs for s in d.split("held_out")],
        "held_out_design": [s for d in designs for s in d.split("held_out_design")],
        "train": train_states,
    }
    texts = [s.prompt for d in designs for s in d.states] + [p for d in designs for p in d.plans]
    tokenizer = build_tokenizer(texts, config.model.vocab)
    saved = out / "warm-start" / f"seed-{config.seeds[0]}" / "tokenizer.json"
    if saved.is_file():  # a reused warm start keeps the tokenizer it was trained with
        from transformers import PreTrainedTokenizerFast

        tokenizer = PreTrainedTokenizerFast.from_pretrained(saved.parent)
        tokenizer.padding_side = "left"
    lengths = [len(tokenizer(s.prompt, add_special_tokens=False)["input_ids"]) for d in designs for s in d.states]
    results: dict[str, Any] = {
        "format": FORMAT,
        "kind": "hwtp-learn",
        "config": config.as_dict(),
        "designs": {
            d.design: {
                "train_states": len(d.split("train")),
                "held_out_states": len(d.split("held_out")) + len(d.split("held_out_design")),
                "weak_plans": len(d.plans),
                "held_out_design": d.design in config.held_out_designs,
            }
            for d in designs
        },
        "tokenizer": {"vocab": len(tokenizer), "longest_prompt_tokens": max(lengths)},
        "machine": {"platform": platform.platform(), **_load()},
        "runs": [],
    }
    warm_starts: dict[int, dict[str, Any]] = {}
    try:
        for seed in config.seeds:
            sft_seed = config.seeds[0] if config.shared_warm_start else seed
            warm = out / "warm-start" / f"seed-{sft_seed}"
            if sft_seed in warm_starts:
                progress(f"seed {seed}: the warm start of seed {sft_seed}")
                model, sft = _load_model(warm), warm_starts[sft_seed]
            elif (warm / "config.json").is_file():  # OUT holds this warm start already: reuse it
                progress(f"seed {seed}: reusing the warm start in {warm}")
                model = _load_model(warm)
                results["model"] = {"parameters": parameter_count(model), **config.model.as_dict()}
                sft = warm_starts[sft_seed] = {"seed": sft_seed, "reused": str(warm)}
            else:
                progress(f"seed {seed}: warm start (SFT)")
                model = build_model(tokenizer, config.model, sft_seed)
                results["model"] = {"parameters": parameter_count(model), **config.model.as_dict()}
                t0 = time.perf_counter()
                rows = sft_rows(designs, config.sft_plans_per_state, sft_seed)
                losses = train_sft(model, tokenizer, rows, config.sft, sft_seed)
                sft = {"seed": sft_seed, "rows": len(rows), "loss": losses, "seconds": time.perf_counter() - t0}
                warm_starts[sft_seed] = sft
                model.save_pretrained(warm)
                tokenizer.save_pretrained(warm)
            progress(f"seed {seed}: evaluating the warm start")
            before = _eval_all(model, tokenizer, splits, config.evaluation, seed)
            entry: dict[str, Any] = {
                "seed": seed,
                "sft": sft,
                "before": before,
                "arms": {},
            }
            results["unfinished"] = entry  # written as it goes: a run stopped early keeps what it measured
            _write(out, results)
            for arm in config.arms:
                progress(f"seed {seed}: {arm.name} ({config.grpo.steps} steps)")
                policy, trained = train_arm(warm, tokenizer, train_states, arm, config.grpo, seed, out / "trainer")
                progress(f"seed {seed}: evaluating {arm.name}")
                trained["after"] = _eval_all(policy, tokenizer, splits, config.evaluation, seed)
                entry["arms"][arm.name] = trained
                del policy
                _write(out, results)
            del results["unfinished"]
            results["runs"].append(entry)
            results["summary"] = summarize_runs(results["runs"], config.arms)
            results["seconds"] = time.perf_counter() - started
            _write(out, results)
    finally:
        hwtp.rewards.reset()
    results["machine"]["load_after"] = _load().get("loadavg")
    results["seconds"] = time.perf_counter() - started
    results["picture"] = plot_results(results, out).name
    _write(out, results)
    return results


def _load_model(folder: Path) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, dtype="float32")


def _write(out: Path, results: dict[str, Any]) -> None:
    tmp = out / (RESULTS + ".tmp")
    tmp.write_text(json.dumps(results, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    tmp.replace(out / RESULTS)
