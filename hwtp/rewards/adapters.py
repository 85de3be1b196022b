"""Reward functions with the exact signatures the trainers call.

- TRL ``GRPOTrainer(reward_funcs=[trl_reward])`` (or ``trl_reward_async``): keyword call
  ``(prompts=, completions=, completion_ids=, **dataset columns, trainer_state=, log_extra=,
  log_metric=)``; the ``ground_truth`` column of ``hwtp export --format trl``. Returns a
  float per completion, or None (TRL's "no reward": it becomes NaN and is ignored) when the
  row has no ground truth or the result is indeterminate (timeout, error).
- verl ``custom_reward_function`` (``compute_score``, one completion) and the ``batch``
  reward manager (``compute_score_batch``): a dict per completion whose ``score`` is a float.
  verl cannot take "no reward", so an indeterminate result scores 0.0 and is marked
  ``indeterminate: True`` in the dict (verl keeps the other keys as reward extra info).
- OpenRLHF ``--reward.remote_url FILE.py`` (``reward_func``): queries are prompt + response
  with special tokens; returns ``rewards``/``scores`` (torch tensors when torch is installed,
  as OpenRLHF builds experiences from them; lists otherwise) and per-sample ``extra_logs``.
  An indeterminate result is 0.0 there too, marked by ``extra_logs["hwtp_indeterminate"]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from hwtp.errors import RewardError
from hwtp.rewards.completion import completion_text, cut_prompt, message_text
from hwtp.rewards.core import RewardResult, score_completions, settings
from hwtp.rewards.refusals import announce

#: The keys of verl's per-completion dict (the same for every completion: verl stacks them).
VERL_KEYS = ("score", "outcome", "indeterminate", "reason")


def _reason(result: RewardResult) -> str:
    reason = result.detail.get("reason") if isinstance(result.detail, dict) else None
    return str(reason) if reason else ""


def _trl(prompts: Sequence[Any], completions: Sequence[Any], kwargs: dict[str, Any]) -> list[float | None]:
    if "ground_truth" not in kwargs:
        raise RewardError(
            "trl_reward: the dataset has no ground_truth column; train on an export made with "
            "`hwtp export --format trl` (or `hwtp run`), whose rows carry it"
        )
    truths = list(kwargs["ground_truth"])
    if len(truths) != len(completions):
        raise RewardError(f"trl_reward: {len(truths)} ground truths for {len(completions)} completions")
    wanted = [i for i, t in enumerate(truths) if t is not None]
    texts = [completion_text(completions[i]) for i in wanted]
    # TRL's completions are the response alone; the prompt is passed so that an echoed
    # prompt is cut and its example plan never counts.
    prompt_texts = [message_text(prompts[i]) if i < len(prompts) else None for i in wanted]
    results = score_completions([(truths[i], t) for i, t in zip(wanted, texts, strict=True)], prompt_texts)
    out: list[float | None] = [None] * len(completions)
    outcomes: list[str] = ["no_ground_truth"] * len(completions)
    for i, r in zip(wanted, results, strict=True):
        out[i] = r.reward
        outcomes[i] = r.outcome
    log_extra = kwargs.get("log_extra")
    if callable(log_extra):
        log_extra("hwtp_outcome", outcomes)
    log_metric = kwargs.get("log_metric")
    if callable(log_metric) and results:
        log_metric("hwtp/invalid_rate", sum(r.outcome == "invalid" for r in results) / len(results))
        log_metric("hwtp/indeterminate_rate", sum(r.indeterminate for r in results) / len(results))
    return out


def trl_reward(
    prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
) -> list[float | None]:
    """TRL reward function: hwtp's reward of each completion on its row's state."""
    return _trl(prompts, completions, kwargs)


async def trl_reward_async(
    prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
) -> list[float | None]:
    """:func:`trl_reward` for TRL's async reward functions: scoring runs in a worker thread."""
    return await asyncio.to_thread(_trl, prompts, completions, kwargs)


trl_reward.__name__ = "hwtp_reward"
trl_reward_async.__name__ = "hwtp_reward"


def _verl_dict(result: RewardResult) -> dict[str, Any]:
    return {
        "score": 0.0 if result.reward is None else float(result.reward),
        "outcome": result.outcome,
        "indeterminate": result.indeterminate,
        "reason": _reason(result),
    }


def _verl_truth(ground_truth: Any, where: str) -> Any:
    if ground_truth is None:
        raise RewardError(
            f"{where}: ground_truth is None; the rows need reward_model.ground_truth "
            "as `hwtp export --format verl` writes"
        )
    return ground_truth


def compute_score(
    data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **kwargs: Any
) -> dict[str, Any]:
    """verl ``custom_reward_function``: the score of one response (``solution_str``)."""
    truth = _verl_truth(ground_truth, "compute_score")
    return _verl_dict(score_completions([(truth, completion_text(solution_str))])[0])


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """verl ``batch`` reward manager: the scores of a batch of responses, in one call."""
    if len(ground_truths) != len(solution_strs):
        raise RewardError(f"compute_score_batch: {len(ground_truths)} ground truths for {len(solution_strs)} responses")
    items = [
        (_verl_truth(t, f"compute_score_batch[{i}]"), completion_text(s))
        for i, (t, s) in enumerate(zip(ground_truths, solution_strs, strict=True))
    ]
    return [_verl_dict(r) for r in score_completions(items)]


def _tensor(values: list[float]) -> Any:
    try:
        import torch
    except ImportError:
        return values
    return torch.tensor(values, dtype=torch.float32)


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **kwargs: Any) -> dict[str, Any]:
    """OpenRLHF ``--reward.remote_url reward.py``: rewards of prompt + response ``queries``."""
    if not (len(queries) == len(prompts) == len(labels)):
        raise RewardError(f"reward_func: {len(queries)} queries, {len(prompts)} prompts, {len(labels)} labels")
    items = []
    for i, (query, prompt, label) in enumerate(zip(queries, prompts, labels, strict=True)):
        if label is None:
            raise RewardError(
                f"reward_func: label {i} is None; pass --data.label_key label "
                "with an `hwtp export --format openrlhf` dataset"
            )
        items.append((label, cut_prompt(str(query), str(prompt) if prompt is not None else None)))
    try:
        results = score_completions(items, [str(p) if p is not None else None for p in prompts])
    except RewardError as exc:
        announce("reward_func", str(exc))  # OpenRLHF logs what reward_func raises at INFO level only
        raise
    detect = settings().rewards.detect or 1.0
    rewards = [0.0 if r.reward is None else float(r.reward) for r in results]
    scores = [max(0.0, min(1.0, x / detect)) for x in rewards]  # 0..1 for --dynamic_filtering

    def flag(test: Callable[[RewardResult], bool]) -> Any:
        return _tensor([1.0 if test(r) else 0.0 for r in results])

    return {
        "rewards": _tensor(rewards),
        "scores": _tensor(scores),
        "extra_logs": {
            "hwtp_invalid": flag(lambda r: r.outcome in ("invalid", "golden_fail")),
            "hwtp_detected": flag(lambda r: r.outcome == "detected"),
            "hwtp_indeterminate": flag(lambda r: r.indeterminate),
        },
    }
