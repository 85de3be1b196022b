"""Train a tiny policy with TRL's GRPO on an hwtp export: hwtp rewards, GRPO-SMu advantages.

Everything is built here, offline: a byte-level BPE tokenizer trained on the export's prompt
text and a 2-layer Qwen2 model from a config (random weights). It only shows that the loop
closes on CPU; a real run loads a pretrained model instead (``model="Qwen/Qwen2.5-0.5B-Instruct"``
and its tokenizer) and keeps everything else::

    hwtp run counter_en_load adder_carry --states 2 -G 2 --format trl -o runs/tiny
    python examples/trl/train.py runs/tiny -o runs/tiny-grpo

The run folder is where the reward finds the mutant sets (``HWTP_STATES``) and its
``export/trl`` is the dataset. Writes the trainer's log history to OUT/log_history.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def build_tokenizer(texts: list[str], vocab_size: int = 1024) -> Any:
    """A byte-level BPE tokenizer trained on ``texts``, with a chat template (no download)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    core.train_from_iterator(texts, trainer=trainer)
    end, pad = SPECIAL[2], SPECIAL[0]
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token=end, pad_token=pad, bos_token=None)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(tokenizer: Any, max_positions: int) -> Any:
    """A 2-layer, 64-wide Qwen2 causal LM with random weights."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    return Qwen2ForCausalLM(config)


def train(run_dir: Path, out: Path, steps: int = 2, seed: int = 0) -> list[dict[str, Any]]:
    """``steps`` GRPO steps on ``run_dir/export/trl``; returns the trainer's log history."""
    import datasets
    import torch
    from trl import GRPOConfig

    import hwtp.rewards
    from hwtp.rewards.grpo_smu import GRPOSMuTrainer

    torch.manual_seed(seed)
    hwtp.rewards.configure(states=[run_dir], workers=1)
    dataset = datasets.load_dataset(str(run_dir / "export" / "trl"), split="train")
    texts = [m["content"] for row in dataset for m in row["prompt"]]
    tokenizer = build_tokenizer(texts)
    chats = [tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in dataset]
    longest = max(len(tokenizer(chat, add_special_tokens=False)["input_ids"]) for chat in chats)
    completion = 32
    model = build_model(tokenizer, max_positions=longest + completion + 8)
    args = GRPOConfig(
        output_dir=str(out),
        max_steps=steps,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=completion,
        learning_rate=1e-4,
        beta=0.0,
        use_vllm=False,
        use_cpu=True,
        bf16=False,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=seed,
        dataloader_num_workers=0,
    )
    trainer = GRPOSMuTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=[hwtp.rewards.trl_reward],
        args=args,
        train_dataset=dataset,
    )
    try:
        trainer.train()
    finally:
        hwtp.rewards.reset()
    return list(trainer.state.log_history)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, help="an `hwtp run ... --format trl -o RUN_DIR` folder")
    parser.add_argument("-o", "--out", type=Path, required=True, help="the trainer's output folder")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    history = train(ns.run_dir, ns.out, ns.steps, ns.seed)
    log = ns.out / "log_history.jsonl"
    log.write_text("".join(json.dumps(entry) + "\n" for entry in history))
    print(f"{len([h for h in history if 'loss' in h])} GRPO steps; log history in {log}")


if __name__ == "__main__":
    main()
