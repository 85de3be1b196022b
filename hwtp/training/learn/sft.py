"""The warm start: supervised fine-tuning on (prompt, weak plan) pairs, the loss on the plan's
tokens only. A plain torch loop: the model is tiny and the data fits in memory."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SFTConfig:
    steps: int = 200
    batch: int = 8
    lr: float = 3e-3
    warmup: int = 20


def _batch(tokenizer: Any, rows: Sequence[tuple[str, str]]) -> tuple[Any, Any, Any]:
    import torch

    seqs, labels = [], []
    for prompt, completion in rows:
        p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        c = tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        seqs.append(p + c)
        labels.append([-100] * len(p) + c)
    width = max(len(s) for s in seqs)
    pad = tokenizer.pad_token_id
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    lab = torch.full((len(seqs), width), -100, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, (s, lb) in enumerate(zip(seqs, labels, strict=True)):
        ids[i, : len(s)] = torch.tensor(s)
        lab[i, : len(lb)] = torch.tensor(lb)
        mask[i, : len(s)] = 1
    return ids, lab, mask


def train_sft(model: Any, tokenizer: Any, rows: Sequence[tuple[str, str]], config: SFTConfig, seed: int) -> list[float]:
    """Train ``model`` in place; returns the loss of every step."""
    import torch

    rng = random.Random(f"sft-batches:{seed}")
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.0)

    def factor(step: int) -> float:
        if step < config.warmup:
            return (step + 1) / config.warmup
        return max(0.05, 1.0 - (step - config.warmup) / max(1, config.steps - config.warmup))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    model.train()
    losses = []
    order = list(rows)
    for step in range(config.steps):
        if step * config.batch % len(order) < config.batch:
            rng.shuffle(order)
        offset = step * config.batch % len(order)
        chunk = (order + order)[offset : offset + config.batch]
        ids, lab, mask = _batch(tokenizer, chunk)
        loss = model(input_ids=ids, attention_mask=mask, labels=lab).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses
