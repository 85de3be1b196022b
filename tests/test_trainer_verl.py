"""verl 0.9's own code on hwtp's export: its Hydra config with the documented lines, its
``RLHFDataset``, its ``naive`` reward manager calling ``hwtp.rewards.compute_score`` (rewards equal
``hwtp score``'s), and its ``compute_advantage`` on the uids the recipe ``hwtp.recipes.verl_grpo_smu``
draws (advantages equal ``hwtp advantage --preset grpo-smu --group-by design``).

Needs ``pip install 'hwtp[verl]'`` (verl and what its v1 trainer imports); skipped without it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from runs import DESIGNS, small_run

import hwtp.rewards as R
from hwtp.errors import ConfigError
from hwtp.training.advantage import advantage_records, preset

pytestmark = [
    pytest.mark.trainer,
    pytest.mark.skipif(
        not all(importlib.util.find_spec(m) for m in ("verl", "transfer_queue", "cachetools", "fastapi")),
        reason="needs verl's v1 trainer (pip install 'hwtp[verl]')",
    ),
    # verl warns at import about engines it has no packages for (megatron, mindspeed)
    pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning"),
]

ROOT = Path(__file__).resolve().parent.parent
#: the how-to whose verl command the tests compose (was the README's "Training with hwtp rewards")
TRAINING = ROOT / "docs" / "how-to" / "training.md"
TUTORIAL = ROOT / "docs" / "tutorials" / "ml-engineer.md"
EXAMPLE = ROOT / "examples" / "trl" / "train.py"


def doc_block(page: Path, heading: str, starts: str) -> str:
    """The first ```bash block after ``heading`` in ``page`` that starts with ``starts``."""
    text = page.read_text()
    section = text[text.index(heading) :]
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S):
        if textwrap.dedent(block).lstrip().startswith(starts):
            return textwrap.dedent(block)
    raise AssertionError(f"no ```bash block starting {starts!r} after {heading!r} in {page}")


def overrides(block: str) -> list[str]:
    """The ``key=value`` Hydra arguments of a documented command (comments and ``...`` dropped)."""
    words = shlex.split(block.replace("\\\n", " "), comments=True)
    return [w for w in words if "=" in w and not w.startswith("-")]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``hwtp run counter_en_load adder_carry --states 2 -G 2 --format verl --format jsonl``."""
    return small_run(tmp_path_factory, "verl", "verl", "jsonl")


@pytest.fixture(scope="module")
def tokenizer(run_dir: Path) -> Any:
    """A byte-level BPE tokenizer built here (no hub), so responses decode to the text encoded."""
    spec = importlib.util.spec_from_file_location("hwtp_example_trl_train_verl", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    texts = [r["completion"] for r in _jsonl(run_dir)] + [m["content"] for r in _jsonl(run_dir) for m in r["prompt"]]
    return module.build_tokenizer(texts)


def _jsonl(run_dir: Path) -> list[dict[str, Any]]:
    files = sorted((run_dir / "export" / "jsonl" / "data").glob("*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]


def _files(run_dir: Path) -> list[str]:
    out = run_dir / "export" / "verl"
    return [str(out / s["file"]) for s in json.loads((out / "manifest.json").read_text())["shards"]]


def test_tutorial_reward_lines_are_the_how_tos() -> None:
    """The ML tutorial's verl command configures the reward exactly as the how-to's tested one."""

    def reward_lines(page: Path, heading: str) -> list[str]:
        block = doc_block(page, heading, "python -m verl.trainer.main_ppo")
        return [o for o in overrides(block) if o.startswith(("reward.", "algorithm."))]

    how_to = reward_lines(TRAINING, "# Training with hwtp rewards")
    assert any(o.startswith("reward.custom_reward_function.path=") for o in how_to), how_to
    assert reward_lines(TUTORIAL, "verl") == how_to


def verl_config(run_dir: Path, extra: list[str]) -> Any:
    """verl's own ``ppo_trainer`` config composed with the documented reward lines (as main_ppo does)."""
    from hydra import compose, initialize_config_dir

    from hwtp.recipes.verl_grpo_smu import CONFIG_DIR

    reward = overrides(doc_block(TRAINING, "# Training with hwtp rewards", "python -m verl.trainer.main_ppo"))
    assert any(o.startswith("reward.custom_reward_function.path=") for o in reward), reward
    data = [f"data.train_files=[{','.join(_files(run_dir))}]", "data.max_prompt_length=8192"]
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return compose(config_name="ppo_trainer", overrides=[*reward, *data, *extra])


@pytest.fixture(autouse=True)
def _states(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("HWTP_STATES", str(run_dir))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    R.reset()
    R.configure(workers=1)
    yield
    R.reset()


def _dataset(run_dir: Path, tokenizer: Any, config: Any) -> Any:
    from verl.utils.dataset.rl_dataset import RLHFDataset

    return RLHFDataset(data_files=list(config.data.train_files), tokenizer=tokenizer, config=config.data)


def _verl_rewards(manager: Any, tokenizer: Any, rows: list[dict[str, Any]], texts: list[str]) -> list[dict[str, Any]]:
    """verl's reward manager on one response per row, as its reward loop calls ``run_single``:
    a DataProto item with ``responses``, ``attention_mask`` and the row's non-tensor fields."""
    import torch
    from verl import DataProto

    out = []
    for row, text in zip(rows, texts, strict=True):
        ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"][0]
        prompt = torch.ones(3, dtype=torch.long)
        item = DataProto.from_dict(
            tensors={
                "responses": ids.unsqueeze(0),
                "attention_mask": torch.ones(1, len(prompt) + len(ids), dtype=torch.long),
            },
            non_tensors={k: np.array([row[k]], dtype=object) for k in ("data_source", "reward_model", "extra_info")},
        )
        out.append(manager.loop.run_until_complete(manager.run_single(item)))
    return out


def _close_loop(loop: Any) -> None:
    if asyncio.get_event_loop_policy().get_event_loop() is loop:
        asyncio.set_event_loop(None)
    loop.close()


@pytest.mark.sim
def test_readme_reward_lines_give_hwtp_score_rewards(
    run_dir: Path, tokenizer: Any, request: pytest.FixtureRequest
) -> None:
    """RLHFDataset reads the export; the naive reward manager the documented lines configure calls
    hwtp's compute_score, and its rewards are the run's (``hwtp score``) on the same plans."""
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
    from verl.trainer.ppo.reward import get_custom_reward_fn, load_reward_manager

    config = verl_config(run_dir, [])
    assert config.reward.reward_manager.name == "naive"
    assert get_custom_reward_fn(config) is not None  # verl 0.9 reads reward.custom_reward_function only
    dataset = _dataset(run_dir, tokenizer, config)
    rows = [dataset[i] for i in range(len(dataset))]
    assert {r["reward_model"]["ground_truth"]["design"] for r in rows} == set(DESIGNS)
    manager = load_reward_manager(config, tokenizer)
    assert isinstance(manager, NaiveRewardManager)
    request.addfinalizer(lambda: _close_loop(manager.loop))  # the event loop verl made for it

    scored = {(r["design"], r["state"]): r for r in _jsonl(run_dir)}  # one plan per state (-G 2: the first)
    texts = [scored[(r["extra_info"]["design"], r["extra_info"]["state"])]["completion"] for r in rows]
    got = _verl_rewards(manager, tokenizer, rows, texts)
    want = [scored[(r["extra_info"]["design"], r["extra_info"]["state"])]["reward"] for r in rows]
    assert [g["reward_score"] for g in got] == want
    assert {g["reward_extra_info"]["outcome"] for g in got} >= {"passed", "detected"}
    broken = _verl_rewards(manager, tokenizer, rows[:1], ["no plan here"])[0]
    assert broken["reward_score"] == 0.0 and broken["reward_extra_info"]["outcome"] == "invalid"


@pytest.mark.sim
def test_recipe_uids_give_hwtp_advantage_by_design(run_dir: Path, tokenizer: Any) -> None:
    """The recipe's trainer draws a batch from verl's own dataloader over the export; verl's own
    ``compute_advantage`` with ``grpo_smu`` on those uids (n=2 responses per prompt) gives
    ``hwtp advantage --preset grpo-smu --group-by design`` on the same rewards."""
    import torch
    from torchdata.stateful_dataloader import StatefulDataLoader
    from verl import DataProto
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.utils import tensordict_utils as tu
    from verl.utils.dataset.rl_dataset import collate_fn

    from hwtp.recipes import verl_grpo_smu as recipe

    config = verl_config(run_dir, ["algorithm.adv_estimator=grpo_smu"])
    recipe.check(config)
    cls = recipe.install(str(config.trainer.v1.trainer_mode))
    from verl.trainer.ppo.v1 import get_trainer_cls

    assert get_trainer_cls(str(config.trainer.v1.trainer_mode)) is cls
    dataset = _dataset(run_dir, tokenizer, config)
    trainer = object.__new__(cls)  # verl's method on verl's dataloader; the trainer's workers are not needed
    trainer.train_dataloader = StatefulDataLoader(dataset, batch_size=len(dataset), collate_fn=collate_fn)
    trainer.train_dataloader_it = None
    batch = trainer._fetch_one_gen_batch()
    uids = tu.get(batch, "uid")
    models = tu.get(batch, "reward_model")
    assert len(set(uids)) == len(dataset)  # still one uid per prompt

    n = 2  # actor_rollout_ref.rollout.n: verl repeats each prompt's uid for its responses
    rows = [m["ground_truth"] for m in models for _ in range(n)]
    plans = {(r["design"], r["state"]): r["completion"] for r in _jsonl(run_dir)}
    texts = ["no plan, sorry" if i % 3 == 0 else plans[(t["design"], t["state"])] for i, t in enumerate(rows)]
    results = R.score_completions(list(zip(rows, texts, strict=True)))
    assert {r.outcome for r in results} >= {"invalid", "passed", "detected"}
    length = 5
    rewards = torch.zeros(len(rows), length)
    rewards[:, -1] = torch.tensor([r.reward for r in results])
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": torch.ones(len(rows), length)},
        non_tensors={"uid": np.repeat(np.array(uids, dtype=object), n)},
    )
    data = compute_advantage(data, adv_estimator=config.algorithm.adv_estimator, config=AlgoConfig())
    got = data.batch["advantages"][:, 0].double().numpy()

    docs = [
        {
            "design": r.design,
            "mutant_set": t["mutant_set"],
            "results": [
                {
                    "plan": f"p{i}",
                    "state": r.state,
                    "outcome": r.outcome,
                    "reward": r.reward,
                    "ceiling": r.ceiling,
                    "detail": None,
                }
            ],
        }
        for i, (r, t) in enumerate(zip(results, rows, strict=True))
    ]
    want = np.array([rec["advantage"] for rec in advantage_records(docs, preset("grpo-smu"), "design")])
    assert np.abs(want).max() > 0.5
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_plain_main_ppo_uids_are_refused() -> None:
    """Untagged uids (``python -m verl.trainer.main_ppo``): the estimator stops and names the recipe."""
    import torch
    from verl import DataProto
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.ray_trainer import compute_advantage

    data = DataProto.from_dict(
        tensors={"token_level_rewards": torch.ones(2, 3), "response_mask": torch.ones(2, 3)},
        non_tensors={"uid": np.array(["a", "a"], dtype=object)},
    )
    with pytest.raises(ConfigError, match=r"python -m hwtp\.recipes\.verl_grpo_smu"):
        compute_advantage(data, adv_estimator="grpo_smu", config=AlgoConfig())


def test_recipe_entry_point_composes_verl_config(run_dir: Path) -> None:
    """``python -m hwtp.recipes.verl_grpo_smu`` takes verl's own arguments (``--cfg job`` prints the
    composed config and stops before Ray), and refuses another estimator with hwtp's message."""
    block = doc_block(TRAINING, "## GRPO-SMu advantages in the trainer", "python -m hwtp.recipes.verl_grpo_smu")
    args = overrides(block)
    args = [a for a in args if not a.startswith("data.train_files=")]
    files = f"data.train_files=[{','.join(_files(run_dir))}]"
    env = {**os.environ, "HWTP_STATES": str(run_dir)}
    proc = subprocess.run(
        [sys.executable, "-m", "hwtp.recipes.verl_grpo_smu", "--cfg", "job", *args, files],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "adv_estimator: grpo_smu" in proc.stdout and "pkg://hwtp.rewards" in proc.stdout
    from hwtp.recipes import verl_grpo_smu as recipe

    config = verl_config(run_dir, ["algorithm.adv_estimator=grpo"])
    with pytest.raises(ConfigError, match=r"algorithm\.adv_estimator=grpo_smu"):
        recipe.check(config)
