"""hwtp as the verifier of online RL trainers: rewards of completions on mutant-set states.

``score_completions`` is the batched core; ``trl_reward``/``trl_reward_async`` (TRL),
``compute_score``/``compute_score_batch`` (verl) and ``reward_func`` (OpenRLHF) call it with
each trainer's exact signature. Mutant sets are found in the folders of ``$HWTP_STATES``
(``os.pathsep``-separated run folders or ``hwtp mutate`` output folders) or of
``configure(states=...)``; a :class:`Scorer` of one's own takes a :class:`Settings` value (and
optionally the mutant sets themselves, or an executor). See the docs, "Train with hwtp rewards"
(docs/how-to/training.md).
"""

from __future__ import annotations

from hwtp.rewards.adapters import compute_score, compute_score_batch, reward_func, trl_reward, trl_reward_async
from hwtp.rewards.core import (
    RewardResult,
    Scorer,
    Settings,
    configure,
    default_scorer,
    executor_stats,
    reset,
    score_completions,
    settings,
)
from hwtp.rewards.truth import GroundTruth, GroundTruthLike, parse_truth

__all__ = [
    "GroundTruth",
    "GroundTruthLike",
    "RewardResult",
    "Scorer",
    "Settings",
    "compute_score",
    "compute_score_batch",
    "configure",
    "default_scorer",
    "executor_stats",
    "parse_truth",
    "reset",
    "reward_func",
    "score_completions",
    "settings",
    "trl_reward",
    "trl_reward_async",
]
