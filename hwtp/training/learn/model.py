"""The policy: a small Llama-style causal LM built from a config, and a byte-level BPE tokenizer
trained here on the experiment's own prompt and plan text (nothing is downloaded)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

#: The end-of-text token (end of a completion, and padding).
EOS = "<|endoftext|>"


@dataclass(frozen=True)
class ModelConfig:
    """The shape of the policy."""

    vocab: int = 1536
    hidden: int = 128
    layers: int = 4
    heads: int = 4
    intermediate: int = 256
    max_positions: int = 1024

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_tokenizer(texts: Sequence[str], vocab: int) -> Any:
    """A byte-level BPE tokenizer trained on ``texts`` (``EOS`` ends and pads)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    core.train_from_iterator(list(texts), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token=EOS, pad_token=EOS)
    tokenizer.padding_side = "left"  # generation pads prompts on the left
    return tokenizer


def build_model(tokenizer: Any, config: ModelConfig, seed: int) -> Any:
    """A Llama-style causal LM with random weights (seeded)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    llama = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden,
        intermediate_size=config.intermediate,
        num_hidden_layers=config.layers,
        num_attention_heads=config.heads,
        num_key_value_heads=config.heads,
        max_position_embeddings=config.max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    return LlamaForCausalLM(llama)


def parameter_count(model: Any) -> int:
    return int(sum(p.numel() for p in model.parameters()))
