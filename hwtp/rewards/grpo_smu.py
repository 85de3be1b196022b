"""GRPO-SMu inside the trainer: advantages grouped over a design's state set, not per prompt.

Trainers normalise rewards per prompt (one state). GRPO-SMu groups every completion of a
design's diversified state set, with each reward first divided by its state's ceiling (the
relative-ceiling rule of :mod:`hwtp.training.advantage`). Both hooks below compute exactly what
``hwtp advantage --preset grpo-smu --group-by design`` computes on the same rewards, through
:func:`hwtp.training.advantage.group_ids`, :func:`~hwtp.training.advantage.relative_rewards` and
:func:`~hwtp.training.advantage.compute_advantages` (no formula lives here).

- **verl**: the advantage estimator ``grpo_smu`` (``algorithm.adv_estimator=grpo_smu``),
  registered with verl's own ``register_adv_est`` when this module is imported in a process
  that has imported verl. hwtp declares it as a ``verl.plugins`` entry point, which verl
  loads in every process that imports it, so nothing else is needed. It reads each row's
  design from ``non_tensor_batch`` (``extra_info["design"]``, else ``data_source``
  ``hwtp/DESIGN``, as ``hwtp export --format verl`` writes them), the keyword verl hands to
  estimators that take it (GDPO in verl 0.9.1; every estimator that declares it once
  verl-project/verl#7473 is in). ``index`` (verl's per-prompt ``uid``) is random per prompt and
  cannot name a design, so without ``non_tensor_batch`` the estimator reads the design from
  a uid that :func:`design_uid` tagged (the recipe ``python -m hwtp.recipes.verl_grpo_smu`` tags
  every prompt's uid when verl draws it: verl then hands the estimator its design through
  ``index``), and refuses to run otherwise rather than silently fall back to per-prompt groups.
- **TRL**: :class:`GRPOSMuTrainer`, a ``trl.GRPOTrainer`` whose advantages are replaced by
  GRPO-SMu's over the whole generation batch (all processes), grouped by the ``design``
  column of ``hwtp export --format trl``.

A state's ceiling comes from the reward's own result when the trainer keeps it (a
``ceiling`` reward extra-info key in verl), else from the mutant set the ground truth names
(found as :mod:`hwtp.rewards` finds it: the pass level on golden and on an equivalent mutant,
the detect level on other mutants, at the configured reward levels).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from hwtp.errors import ConfigError, RewardError
from hwtp.training.advantage import (
    AdvantageConfig,
    GroupBy,
    compute_advantages,
    group_ids,
    preset,
    relative_rewards,
    zero_advantage_share,
)

if TYPE_CHECKING:
    import torch

#: The name of the estimator in verl's registry (``algorithm.adv_estimator=grpo_smu``).
VERL_NAME = "grpo_smu"

#: The outcome a sample without a reward gets (no statistic counts it; its advantage is 0).
_NO_REWARD = "error"


# --------------------------------------------------------------------------- shared core


def _truth(value: Any) -> Any:
    # lazy: verl loads this module as a plugin in every process; the reward modules only when used
    from hwtp.rewards.truth import parse_truth

    return parse_truth(value)


def state_ceilings(truths: Sequence[Any]) -> list[float]:
    """The ceiling of each ground truth's state under the configured reward scheme
    (:func:`hwtp.rewards.core.ceiling_of`): for ``smu`` the pass level on golden and on a mutant
    proved equivalent, the detect level on other mutants; for the dense schemes the detect level
    on every state while there is a mutant to count (reward levels of :func:`hwtp.rewards.settings`).

    A ground truth whose mutant set is not in the configured folders raises
    :class:`~hwtp.errors.RewardError`, as scoring it would.
    """
    # lazy: verl loads this module as a plugin in every process; the scorer (and simulator) only when used
    from hwtp.rewards.core import ceiling_of

    known: dict[tuple[str, str, str], float] = {}
    out = []
    for raw in truths:
        truth = _truth(raw)
        key = (truth.design, truth.mutant_set, truth.state)
        if key not in known:
            known[key] = ceiling_of(truth)
        out.append(known[key])
    return out


def advantages(
    rewards: Sequence[float | None] | npt.ArrayLike,
    designs: Sequence[str],
    states: Sequence[str],
    ceilings: Sequence[float],
    config: AdvantageConfig | None = None,
    outcomes: Sequence[str] | None = None,
    by: GroupBy = "design",
) -> npt.NDArray[np.floating[Any]]:
    """GRPO-SMu advantages of one batch: ``hwtp advantage --group-by BY`` on these rewards.

    A reward that is None or NaN (no reward: indeterminate, or no ground truth) counts in no
    statistic and gets advantage 0, as an excluded outcome does.
    """
    cfg = config if config is not None else preset("grpo-smu")
    raw = [math.nan if r is None else float(r) for r in np.asarray(rewards, dtype=object).reshape(-1).tolist()]
    n = len(raw)
    if not (len(designs) == len(states) == len(ceilings) == n):
        raise RewardError(
            f"GRPO-SMu: {n} rewards but {len(designs)} designs, {len(states)} states, {len(ceilings)} ceilings"
        )
    kinds = list(outcomes) if outcomes is not None else ["scored"] * n
    if len(kinds) != n:
        raise RewardError(f"GRPO-SMu: {n} rewards but {len(kinds)} outcomes")
    records: list[dict[str, Any]] = [
        {
            "design": str(d),
            "state": str(s),
            "reward": 0.0 if math.isnan(r) else r,
            "ceiling": float(c),
            "outcome": _NO_REWARD if math.isnan(r) else str(o),
        }
        for d, s, r, c, o in zip(designs, states, raw, ceilings, kinds, strict=True)
    ]
    ids = group_ids(records, by)
    relative = cfg.ceiling == "relative" and by != "state"
    values = relative_rewards(records) if relative else [rec["reward"] for rec in records]
    excluded = [str(rec["outcome"]) for rec in records]
    if _NO_REWARD not in cfg.exclude_outcomes:
        cfg = dataclasses.replace(cfg, exclude_outcomes=cfg.exclude_outcomes | {_NO_REWARD})
    return compute_advantages(values, ids, cfg, excluded)


# --------------------------------------------------------------------------- verl


def _column(non_tensor_batch: Mapping[str, Any], key: str, n: int) -> list[Any] | None:
    if key not in non_tensor_batch:
        return None
    values = list(np.asarray(non_tensor_batch[key], dtype=object).reshape(-1))
    if len(values) != n:
        raise RewardError(f"grpo_smu: non_tensor_batch[{key!r}] has {len(values)} rows for {n} responses")
    return values


def _verl_design(i: int, extra: Any, source: Any, truth: Any) -> str:
    if isinstance(extra, Mapping) and isinstance(extra.get("design"), str) and extra["design"]:
        return str(extra["design"])
    if isinstance(source, str) and source.startswith("hwtp/") and len(source) > len("hwtp/"):
        return source[len("hwtp/") :]
    if truth is not None:
        return str(_truth(truth).design)
    raise RewardError(
        f"grpo_smu: row {i} names no design (extra_info.design, data_source 'hwtp/DESIGN' or "
        "reward_model.ground_truth); train on `hwtp export --format verl` rows"
    )


#: Between verl's own uid and the ground truth in a uid tagged by :func:`design_uid`.
UID_TAG = "|hwtp:"


def design_uid(uid: str, ground_truth: Any) -> str:
    """verl's per-prompt ``uid`` with the prompt's ground truth appended: still unique per prompt
    (every use of the uid in verl is unchanged), and it names the design and state, so verl's
    ``compute_advantage``, which hands estimators the uids as ``index``, hands them the groups."""
    return f"{uid}{UID_TAG}{json.dumps(_truth(ground_truth).as_dict(), sort_keys=True)}"


def uid_truths(index: Any, n: int) -> list[dict[str, Any]] | None:
    """The ground truths :func:`design_uid` put in ``n`` uids; None when no uid carries one."""
    if index is None:
        return None
    uids = [str(u) for u in np.asarray(index, dtype=object).reshape(-1).tolist()]
    if len(uids) != n:
        raise RewardError(f"grpo_smu: {len(uids)} uids for {n} responses")
    tagged = [u.partition(UID_TAG)[2] for u in uids]
    if not any(tagged):
        return None
    out = []
    for i, text in enumerate(tagged):
        if not text:
            raise RewardError(f"grpo_smu: uid {i} ({uids[i][:40]!r}) names no design while others do")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise RewardError(f"grpo_smu: uid {i} carries no readable ground truth") from None
        out.append(value)
    return out


def verl_rows(
    non_tensor_batch: Mapping[str, Any] | None, n: int, index: Any = None
) -> tuple[list[str], list[str], list[float], list[str]]:
    """Designs, states, ceilings and outcomes of ``n`` verl rows from their ``non_tensor_batch``,
    else from the ground truths in their uids (``index``, tagged by :func:`design_uid`)."""
    if non_tensor_batch is None:
        tagged = uid_truths(index, n)
        if tagged is None:
            raise ConfigError(
                "algorithm.adv_estimator=grpo_smu groups by design, but verl passed the estimator only "
                "per-prompt uids (verl 0.9 hands rows only to its 'gdpo' estimator): run "
                "`python -m hwtp.recipes.verl_grpo_smu` instead of `python -m verl.trainer.main_ppo` "
                "(same arguments), whose uids name each prompt's design"
            )
        parsed = [_truth(t) for t in tagged]
        return [t.design for t in parsed], [t.state for t in parsed], state_ceilings(tagged), ["scored"] * n
    extras = _column(non_tensor_batch, "extra_info", n) or [None] * n
    sources = _column(non_tensor_batch, "data_source", n) or [None] * n
    models = _column(non_tensor_batch, "reward_model", n) or [None] * n
    truths = [m.get("ground_truth") if isinstance(m, Mapping) else None for m in models]
    designs = [_verl_design(i, e, s, t) for i, (e, s, t) in enumerate(zip(extras, sources, truths, strict=True))]
    states = []
    for i, (extra, truth) in enumerate(zip(extras, truths, strict=True)):
        if isinstance(extra, Mapping) and isinstance(extra.get("state"), str):
            states.append(str(extra["state"]))
        elif truth is not None:
            states.append(str(_truth(truth).state))
        else:
            raise RewardError(f"grpo_smu: row {i} names no state (extra_info.state or reward_model.ground_truth)")
    kept = _column(non_tensor_batch, "ceiling", n)  # compute_score's extra info, when it returns one
    if kept is not None and all(_positive(c) for c in kept):
        ceilings = [float(c) for c in kept]
    else:
        if any(t is None for t in truths):
            raise RewardError("grpo_smu: a row has no reward_model.ground_truth to find its state's ceiling")
        ceilings = state_ceilings(truths)
    outcomes = ["scored"] * n
    for key in ("outcome", "indeterminate"):
        column = _column(non_tensor_batch, key, n)
        if column is None:
            continue
        for i, value in enumerate(column):
            if key == "outcome" and isinstance(value, str) and value:
                outcomes[i] = value
            elif key == "indeterminate" and bool(value):
                outcomes[i] = _NO_REWARD
    return designs, states, ceilings, outcomes


def _positive(value: Any) -> bool:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return math.isfinite(number) and number > 0


def compute_grpo_smu_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    config: Any = None,
    non_tensor_batch: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl advantage estimator ``grpo_smu``: ``(advantages, returns)``, both (bs, response_length).

    The signature of verl's estimators (``compute_advantage`` calls it with keywords); the
    score of a response is the sum of its token-level rewards, as in verl's ``grpo``.
    """
    import torch

    scores = token_level_rewards.sum(dim=-1)
    designs, states, ceilings, outcomes = verl_rows(non_tensor_batch, int(scores.shape[0]), index)
    adv = advantages(scores.detach().double().cpu().numpy(), designs, states, ceilings, outcomes=outcomes)
    with torch.no_grad():
        values = torch.as_tensor(adv, dtype=scores.dtype, device=scores.device)
        out = values.unsqueeze(-1) * response_mask
    return out, out


def register_verl() -> bool:
    """Register ``grpo_smu`` in verl's advantage-estimator registry; False when verl is absent."""
    try:
        from verl.trainer.ppo.core_algos import register_adv_est
    except ImportError:
        return False
    register_adv_est(VERL_NAME)(compute_grpo_smu_advantage)
    return True


if "verl" in sys.modules:  # imported by verl's plugin loader, or after verl: register now
    register_verl()


# --------------------------------------------------------------------------- TRL


def trl_rows(inputs: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, Any]]:
    """(design, state, ground truth) of TRL input rows (``hwtp export --format trl`` columns)."""
    rows = []
    for i, row in enumerate(inputs):
        truth = row.get("ground_truth")
        design, state = row.get("design"), row.get("state")
        if truth is not None:
            parsed = _truth(truth)
            design, state = design or parsed.design, state or parsed.state
        if not isinstance(design, str) or not design or not isinstance(state, str) or not state:
            raise RewardError(
                f"GRPOSMuTrainer: row {i} has no design/state (columns design, state, ground_truth of "
                "`hwtp export --format trl`)"
            )
        rows.append((design, state, truth))
    return rows


def _make_trl_trainer() -> type:
    import torch
    from accelerate.utils import gather_object
    from trl import GRPOTrainer

    class GRPOSMuTrainer(GRPOTrainer):  # type: ignore[misc]
        """``trl.GRPOTrainer`` with GRPO-SMu advantages: grouped by the ``design`` column over the
        whole generation batch, each reward relative to its state's ceiling.

        Rewards are the reward functions' weighted sum, as TRL's ``sum_then_normalize``;
        ``scale_rewards`` does not apply (``advantage_config`` decides; default: the ``grpo-smu``
        preset). A completion every reward function returned None for gets advantage 0.
        ``reward_scheme`` (``smu``, ``kill-fraction``, ``incremental``; None: as
        :func:`hwtp.rewards.configure` has it) sets the scheme of :mod:`hwtp.rewards` for
        both the rewards and the ceilings.
        """

        def __init__(
            self,
            *args: Any,
            advantage_config: AdvantageConfig | None = None,
            group_by: GroupBy = "design",
            reward_scheme: str | None = None,
            **kwargs: Any,
        ) -> None:
            if reward_scheme is not None:
                from hwtp.rewards.core import configure

                configure(reward_scheme=reward_scheme)  # refused here, before the model loads
            super().__init__(*args, **kwargs)
            if self.multi_objective_aggregation != "sum_then_normalize":
                raise ConfigError(
                    "GRPOSMuTrainer sums the reward functions then normalises; "
                    "set multi_objective_aggregation='sum_then_normalize'"
                )
            self.advantage_config = advantage_config if advantage_config is not None else preset("grpo-smu")
            self.group_by: GroupBy = group_by
            self._hwtp_rows: list[tuple[str, str, Any]] = []
            self._hwtp_rewards: torch.Tensor | None = None

        def grpo_smu_advantages(
            self, rewards_per_func: torch.Tensor, rows: Sequence[tuple[str, str, Any]]
        ) -> torch.Tensor:
            """Advantages of the gathered batch: ``rewards_per_func`` (N, reward functions), NaN
            for None, as ``_calculate_rewards`` returns it; ``rows`` (design, state, ground truth)."""
            weights = self.reward_weights.to(rewards_per_func.device).unsqueeze(0)
            rewards = (rewards_per_func * weights).nansum(dim=1)
            rewards[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan
            designs = [r[0] for r in rows]
            states = [r[1] for r in rows]
            ceilings = state_ceilings([r[2] for r in rows])
            adv = advantages(
                rewards.double().cpu().numpy(), designs, states, ceilings, self.advantage_config, by=self.group_by
            )
            return torch.as_tensor(adv, dtype=torch.float32, device=rewards_per_func.device)

        def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> Any:
            rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            self._hwtp_rows = list(gather_object(trl_rows(inputs)))  # gathered like the rewards
            self._hwtp_rewards = rewards_per_func
            return rewards_per_func

        def _generate_and_score_completions(self, inputs: Any) -> Any:
            output = super()._generate_and_score_completions(inputs)
            assert self._hwtp_rewards is not None
            adv = self.grpo_smu_advantages(self._hwtp_rewards, self._hwtp_rows)
            local = len(inputs)
            start = self.accelerator.process_index * local
            output["advantages"] = adv[start : start + local].to(output["advantages"].device)
            logged: Any = self._logs["advantages"]
            for _ in range(min(len(adv), len(logged))):
                logged.pop()
            logged.extend(adv.tolist())
            mode = "train" if getattr(self.model, "training", True) else "eval"
            ids = [r[0] if self.group_by == "design" else f"{r[0]}/{r[1]}" for r in self._hwtp_rows]
            self._metrics[mode]["hwtp/zero_advantage_groups"].append(zero_advantage_share(adv.cpu().numpy(), ids))
            # how many states of one design this batch holds (design groups need two or more)
            states = {(r[0], r[1]) for r in self._hwtp_rows}
            per_design = Counter(design for design, _ in states)
            self._metrics[mode]["hwtp/max_states_per_design"].append(float(max(per_design.values(), default=0)))
            self._hwtp_rewards = None
            return output

    return GRPOSMuTrainer


_trl_class: type | None = None


def __getattr__(name: str) -> Any:
    """``GRPOSMuTrainer`` is built on first use, so that importing this module (for verl) never
    imports TRL."""
    global _trl_class
    if name == "GRPOSMuTrainer":
        if _trl_class is None:
            _trl_class = _make_trl_trainer()
        return _trl_class
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
