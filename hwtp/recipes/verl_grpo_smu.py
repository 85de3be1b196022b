"""``python -m hwtp.recipes.verl_grpo_smu``: verl's PPO trainer with GRPO-SMu design groups.

Run it instead of ``python -m verl.trainer.main_ppo``, with the same Hydra arguments and
``algorithm.adv_estimator=grpo_smu``. verl 0.9 gives every prompt a fresh random ``uid`` when it
draws the prompt from the dataset and hands advantage estimators only those uids, so no
configuration key can group by design. This recipe, as verl's own recipes do, runs verl's
``main_ppo`` with its own task runner, whose trainer is verl's v1 trainer for the configured
``trainer.v1.trainer_mode`` with one method changed: ``_fetch_one_gen_batch`` appends each
prompt's ground truth to its uid (:func:`hwtp.rewards.grpo_smu.design_uid`). The uid stays
unique per prompt, so every other use verl makes of it is unchanged, and verl's own
``compute_advantage`` hands the ``grpo_smu`` estimator uids that name each row's design and
state. The advantages are then those of ``hwtp advantage --preset grpo-smu --group-by design``.

Needs verl's v1 trainer (``trainer.use_v1=True``, verl's default). The state ceilings come from
the mutant sets in ``HWTP_STATES``, which the trainer's processes must see (as the reward
function's do).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import hydra
import ray
from omegaconf import DictConfig
from verl.trainer import main_ppo
from verl.trainer.ppo.v1 import (
    PPOTrainerColocateAsync,
    PPOTrainerSeparateAsync,
    PPOTrainerSync,
    get_trainer_cls,
    trainer_base,
)
from verl.utils import tensordict_utils as tu

from hwtp.errors import ConfigError, HwtpError
from hwtp.rewards.grpo_smu import VERL_NAME, design_uid, register_verl

#: verl's own Hydra configuration folder (the one ``verl.trainer.main_ppo`` composes).
CONFIG_DIR = str(Path(main_ppo.__file__).resolve().parent / "config")


def tag_uids(batch: Any) -> Any:
    """The batch verl drew (a TensorDict with ``uid`` and ``reward_model`` per prompt), each uid
    tagged with its prompt's ground truth (:func:`~hwtp.rewards.grpo_smu.design_uid`)."""
    uids = tu.get(batch, "uid")
    models = tu.get(batch, "reward_model")
    if uids is None or models is None:
        raise ConfigError(
            "hwtp.recipes.verl_grpo_smu: verl's batch has no uid or reward_model; train on "
            "`hwtp export --format verl` rows (data.train_files)"
        )
    truths = []
    for i, model in enumerate(models):
        truth = model.get("ground_truth") if isinstance(model, dict) else None
        if truth is None:
            raise ConfigError(f"hwtp.recipes.verl_grpo_smu: row {i} has no reward_model.ground_truth")
        truths.append(truth)
    tu.assign_non_tensor_stack(batch, "uid", [design_uid(str(u), t) for u, t in zip(uids, truths, strict=True)])
    return batch


class DesignGroups:
    """Mixin for a verl v1 ``PPOTrainer``: prompts drawn for training carry their design in their uid."""

    def _fetch_one_gen_batch(self) -> Any:
        return tag_uids(super()._fetch_one_gen_batch())  # type: ignore[misc]


class GRPOSMuTrainerSync(DesignGroups, PPOTrainerSync):  # type: ignore[misc]
    """verl's ``sync`` trainer with design-tagged uids."""


class GRPOSMuTrainerColocateAsync(DesignGroups, PPOTrainerColocateAsync):  # type: ignore[misc]
    """verl's ``colocate_async`` trainer with design-tagged uids."""


class GRPOSMuTrainerSeparateAsync(DesignGroups, PPOTrainerSeparateAsync):  # type: ignore[misc]
    """verl's ``separate_async`` trainer with design-tagged uids."""


_TRAINERS: dict[type, type] = {
    PPOTrainerSync: GRPOSMuTrainerSync,
    PPOTrainerColocateAsync: GRPOSMuTrainerColocateAsync,
    PPOTrainerSeparateAsync: GRPOSMuTrainerSeparateAsync,
}


def trainer_class(mode: str) -> type:
    """The design-grouping trainer for verl's ``trainer.v1.trainer_mode``."""
    base = get_trainer_cls(mode)
    if base in _TRAINERS.values():
        return base
    if base not in _TRAINERS:
        raise ConfigError(
            f"hwtp.recipes.verl_grpo_smu: trainer.v1.trainer_mode={mode!r} is not a verl trainer it knows"
        )
    return _TRAINERS[base]


def check(config: DictConfig) -> None:
    """Refuse, before Ray starts, a configuration this recipe cannot group by design."""
    if not config.trainer.get("use_v1", False):
        raise ConfigError("hwtp.recipes.verl_grpo_smu needs verl's v1 trainer: drop trainer.use_v1=False")
    estimator = str(config.algorithm.adv_estimator)
    if estimator != VERL_NAME:
        raise ConfigError(
            f"hwtp.recipes.verl_grpo_smu: algorithm.adv_estimator={estimator}; set algorithm.adv_estimator={VERL_NAME}"
        )


def install(mode: str) -> type:
    """In this process, make verl's trainer for ``mode`` the design-grouping one and register the
    estimator; returns the trainer class. verl's ``get_trainer_cls(mode)`` then returns it."""
    register_verl()
    cls = trainer_class(mode)
    trainer_base.TRAINER_REGISTRY[mode] = cls
    return cls


class GRPOSMuTaskRunner(main_ppo.TaskRunnerV1.__ray_metadata__.modified_class):  # type: ignore[misc,name-defined]
    """verl's ``TaskRunnerV1``, whose trainer is the design-grouping one."""

    def run(self, config: DictConfig) -> None:
        install(str(config.trainer.v1.trainer_mode))
        super().run(config)


@hydra.main(config_path=CONFIG_DIR, config_name="ppo_trainer", version_base=None)
def main(config: DictConfig) -> None:
    """``verl.trainer.main_ppo.main`` with :class:`GRPOSMuTaskRunner` as the task runner."""
    try:
        check(config)
    except HwtpError as exc:
        print(f"hwtp: {exc}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    main_ppo.auto_set_device(config)
    main_ppo.validate_config(
        config=config,
        use_reference_policy=main_ppo.need_reference_policy(config),
        use_critic=main_ppo.need_critic(config),
    )
    main_ppo.run_ppo(config, task_runner_class=ray.remote(GRPOSMuTaskRunner))


if __name__ == "__main__":
    main()
