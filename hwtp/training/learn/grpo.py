"""GRPO on hwtp rewards, one arm at a time: TRL's trainer with hwtp's advantages
(:class:`hwtp.rewards.grpo_smu.GRPOSMuTrainer`) grouped per state (plain GRPO) or per design
(GRPO-SMu). Every number kept per step is read from the trainer's own log history."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hwtp.training.learn.data import State


@dataclass(frozen=True)
class Arm:
    """One way of turning rewards into advantages; everything else is shared between arms.

    ``reward_scheme`` names the reward scheme of :mod:`hwtp.scoring.scheme` the arm trains on (None:
    ``smu``, the sparse default); evaluation always scores with ``smu``."""

    name: str
    group_by: str  # "state" (per prompt: plain GRPO) or "design" (GRPO-SMu)
    preset: str  # an hwtp.training.advantage preset
    ceiling: str = "relative"
    reward_scheme: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


#: The arms: plain GRPO (TRL's formula, per state), GRPO-SMu (per design), and GRPO-SMu on the
#: dense ``kill-fraction`` reward (a share of the design's killable mutants).
ARMS = (
    Arm("grpo", "state", "trl"),
    Arm("grpo-smu", "design", "grpo-smu"),
    Arm("grpo-smu-dense", "design", "grpo-smu", reward_scheme="kill-fraction"),
)
#: The arms run unless others are named (the dense one costs a run of every plan on every mutant).
DEFAULT_ARMS = ARMS[:2]


@dataclass(frozen=True)
class GRPOSettings:
    steps: int = 30
    prompts: int = 4  # prompts (states) per step
    generations: int = 8  # completions per prompt
    lr: float = 5e-4
    beta: float = 0.02  # KL to the warm start
    temperature: float = 1.0
    max_completion: int = 128


#: Per-step keys kept from TRL's log history (TRL's name → results.json name).
STEP_KEYS = {
    "reward": "reward",
    "reward_std": "reward_std",
    "hwtp/zero_advantage_groups": "zero_advantage_groups",
    "frac_reward_zero_std": "zero_std_prompts",
    "hwtp/invalid_rate": "invalid",
    "hwtp/detected_rate": "detected",
    "hwtp/max_states_per_design": "max_states_per_design",
    "kl": "kl",
    "loss": "loss",
    "grad_norm": "grad_norm",
    "entropy": "entropy",
    "completions/mean_length": "completion_length",
}


class RewardClock:
    """hwtp's TRL reward, timed: the seconds spent scoring, to set against a step's wall time."""

    __name__ = "hwtp_reward"

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, prompts: Any, completions: Any, completion_ids: Any = None, **kwargs: Any) -> list[float | None]:
        import hwtp.rewards

        start = time.perf_counter()
        rewards = hwtp.rewards.trl_reward(prompts, completions, completion_ids, **kwargs)
        self.seconds += time.perf_counter() - start
        self.calls += 1
        log_metric = kwargs.get("log_metric")
        scored = [r for r in rewards if r is not None]
        if callable(log_metric) and scored:
            # above the golden-pass level: the plan killed its mutant (smu) or some mutant (dense schemes)
            passed = hwtp.rewards.settings().rewards.golden_pass
            log_metric("hwtp/detected_rate", sum(r > passed for r in scored) / len(scored))
        return rewards


def use_scheme(name: str | None) -> None:
    """Score with reward scheme ``name`` from now on (None: the default, ``smu``)."""
    import hwtp.rewards
    from hwtp.scoring.scheme import SMU

    hwtp.rewards.configure(reward_scheme=name or SMU)


def train_arm(
    warm_start: Path,
    tokenizer: Any,
    states: Sequence[State],
    arm: Arm,
    settings: GRPOSettings,
    seed: int,
    workdir: Path,
) -> tuple[Any, dict[str, Any]]:
    """Train the model saved in ``warm_start`` (also the KL reference) for ``settings.steps``
    GRPO steps on ``states``; returns the trained model and the per-step log, the change of
    the parameters, and where the time went."""
    import datasets
    import torch
    from transformers import PrinterCallback
    from trl import GRPOConfig

    from hwtp.rewards.grpo_smu import GRPOSMuTrainer
    from hwtp.training.advantage import preset

    use_scheme(arm.reward_scheme)
    dataset = datasets.Dataset.from_list([s.row() for s in states])
    args = GRPOConfig(
        output_dir=str(workdir),
        max_steps=settings.steps,
        per_device_train_batch_size=settings.prompts * settings.generations,
        num_generations=settings.generations,
        max_completion_length=settings.max_completion,
        learning_rate=settings.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        beta=settings.beta,
        temperature=settings.temperature,
        top_k=0,
        use_vllm=False,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,  # TRL's default recomputes every forward: memory a tiny model does not need
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=seed,
        data_seed=seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
        model_init_kwargs={"dtype": "float32"},
    )
    reward = RewardClock()
    trainer = GRPOSMuTrainer(
        model=str(warm_start),
        processing_class=tokenizer,
        reward_funcs=[reward],
        args=args,
        train_dataset=dataset,
        advantage_config=preset(arm.preset, ceiling=arm.ceiling),
        group_by=arm.group_by,
    )
    trainer.remove_callback(PrinterCallback)  # the numbers go to results.json, not to stdout
    model = trainer.model
    before = [p.detach().clone() for p in model.parameters()]
    start, cpu = time.perf_counter(), time.process_time()
    try:
        trainer.train()
    finally:
        use_scheme(None)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    with torch.no_grad():
        change = float(torch.sqrt(sum(((p - b) ** 2).sum() for p, b in zip(model.parameters(), before, strict=True))))
    steps = []
    for entry in trainer.state.log_history:
        if "loss" not in entry or "step" not in entry:
            continue
        row: dict[str, Any] = {"step": int(entry["step"])}
        for key, name in STEP_KEYS.items():
            if key in entry:
                row[name] = float(entry[key])
        steps.append(row)
    return model, {
        "steps": steps,
        "param_change": change,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "reward_seconds": reward.seconds,
        "reward_share": reward.seconds / seconds if seconds > 0 else 0.0,
    }
