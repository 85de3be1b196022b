"""A file for trainers that load reward functions from a ``.py`` path: OpenRLHF's
``--reward.remote_url`` (``reward_func``) and verl's ``custom_reward_function.path``
(``compute_score``, ``compute_score_batch``). Its path:
``python -c "import hwtp.rewards.entry as m; print(m.__file__)"``."""

from hwtp.rewards.adapters import compute_score, compute_score_batch, reward_func

__all__ = ["compute_score", "compute_score_batch", "reward_func"]
