"""``hwtp learn``: does training on hwtp rewards teach a policy to detect more mutants?

A small experiment that runs on a laptop CPU with no network: a tiny Llama-style model and a
tokenizer built here (:mod:`~hwtp.training.learn.model`), warm-started on weak plans
(:mod:`~hwtp.training.learn.data`, :mod:`~hwtp.training.learn.sft`), trained with GRPO on hwtp rewards in arms
that differ only in how advantages are grouped (:mod:`~hwtp.training.learn.grpo`), and evaluated on
held-out mutants before and after (:mod:`~hwtp.training.learn.evaluate`); :mod:`~hwtp.training.learn.experiment`
runs it all and writes ``OUT/results.json`` and the picture (:mod:`~hwtp.training.learn.plot`).
The trainer parts need the ``trl`` extra (:func:`require_trainer`).
"""

from __future__ import annotations

from hwtp.errors import ConfigError

#: The modules the trainer parts import (the ``trl`` extra).
TRAINER_MODULES = ("torch", "transformers", "tokenizers", "datasets", "trl")


def require_trainer() -> None:
    """Refuse at once, before any work, when the ``trl`` extra is not installed."""
    import importlib.util

    missing = [m for m in TRAINER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(
            f"hwtp learn trains a model and needs {', '.join(missing)} (not installed): pip install 'hwtp[trl]'"
        )
