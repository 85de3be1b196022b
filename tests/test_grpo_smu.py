"""GRPO-SMu inside the trainers (hwtp.rewards.grpo_smu): verl's ``grpo_smu`` estimator and TRL's
GRPOSMuTrainer give the advantages ``hwtp advantage --group-by design`` gives on the same
rewards; examples/trl trains 2 GRPO steps on CPU with hwtp rewards."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hwtp.rewards as R
from hwtp.errors import ConfigError, RewardError
from hwtp.rewards import grpo_smu
from hwtp.training.advantage import advantage_records, preset

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "trl" / "train.py"
DESIGNS = ("counter_en_load", "adder_carry")
HASH = "ab" * 32

# One batch of a design-grouped trainer: two designs, several states each, mixed outcomes.
BATCH = [
    # design, state, reward, ceiling, outcome
    ("fifo", "golden", 1.0, 1.0, "passed"),
    ("fifo", "golden", 0.0, 1.0, "invalid"),
    ("fifo", "m0001", 2.0, 2.0, "detected"),
    ("fifo", "m0001", 1.0, 2.0, "passed"),
    ("fifo", "m0002", 1.0, 1.0, "passed"),  # an equivalent mutant: passing is its best
    ("fifo", "m0002", 0.0, 1.0, "timeout"),
    ("alu", "golden", 1.0, 1.0, "passed"),
    ("alu", "golden", 1.0, 1.0, "passed"),
    ("alu", "m0003", 1.0, 2.0, "passed"),
    ("alu", "m0003", 0.0, 2.0, "golden_fail"),
]


def score_docs(batch: list[tuple[str, str, float, float, str]]) -> list[dict[str, Any]]:
    """The batch as ``hwtp score`` files (one per sample, so the order is kept)."""
    return [
        {
            "design": d,
            "mutant_set": HASH,
            "results": [{"plan": f"p{i}", "state": s, "outcome": o, "reward": r, "ceiling": c, "detail": None}],
        }
        for i, (d, s, r, c, o) in enumerate(batch)
    ]


def expected(batch: list[tuple[str, str, float, float, str]]) -> np.ndarray:
    """``hwtp advantage --preset grpo-smu --group-by design`` on the batch."""
    return np.array([rec["advantage"] for rec in advantage_records(score_docs(batch), preset("grpo-smu"), "design")])


def trainer_rewards(batch: list[tuple[str, str, float, float, str]]) -> list[float | None]:
    """What a trainer holds: no reward (None/NaN) for an indeterminate result."""
    return [None if o in ("timeout", "error") else r for _, _, r, _, o in batch]


@pytest.fixture(autouse=True)
def _fresh_rewards() -> Iterator[None]:
    R.reset()
    yield
    R.reset()


# --------------------------------------------------------------------------- no trainer


def test_core_is_hwtp_advantage_by_design() -> None:
    designs, states, _, ceilings, _ = zip(*BATCH, strict=True)
    got = grpo_smu.advantages(trainer_rewards(BATCH), designs, states, ceilings)
    want = expected(BATCH)
    assert np.abs(want).max() > 0.5  # not a degenerate batch
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert got[5] == 0.0  # the timeout: no statistic, no signal
    per_state = grpo_smu.advantages(trainer_rewards(BATCH), designs, states, ceilings, by="state")
    want_state = [rec["advantage"] for rec in advantage_records(score_docs(BATCH), preset("grpo-smu"), "state")]
    np.testing.assert_allclose(per_state, want_state, rtol=0, atol=1e-12)
    with pytest.raises(RewardError, match="rewards but"):
        grpo_smu.advantages([1.0], ["fifo", "fifo"], ["golden"], [1.0])


# --------------------------------------------------------------------------- verl

torch = pytest.importorskip("torch") if importlib.util.find_spec("torch") else None
needs_torch = pytest.mark.skipif(torch is None, reason="needs torch (pip install 'hwtp[trl]')")


def verl_batch(batch: list[tuple[str, str, float, float, str]], length: int = 6) -> dict[str, Any]:
    """The keywords verl's compute_advantage builds: token-level rewards (the score on the last
    response token), the response mask, per-prompt uids and the rows' non_tensor_batch."""
    assert torch is not None
    n = len(batch)
    valid = [2 + i % (length - 2) for i in range(n)]
    mask = torch.zeros(n, length, dtype=torch.float32)
    rewards = torch.zeros(n, length, dtype=torch.float32)
    for i, (_, _, r, _, o) in enumerate(batch):
        mask[i, : valid[i]] = 1.0
        rewards[i, valid[i] - 1] = 0.0 if o in ("timeout", "error") else r  # verl's compute_score gives 0.0
    truths = [{"design": d, "state": s, "mutant_set": HASH} for d, s, *_ in batch]
    non_tensor = {
        "uid": np.array([f"uid-{d}-{s}" for d, s, *_ in batch], dtype=object),
        "data_source": np.array([f"hwtp/{d}" for d, *_ in batch], dtype=object),
        "reward_model": np.array([{"style": "rule", "ground_truth": t} for t in truths], dtype=object),
        "extra_info": np.array(
            [{"index": i, "split": "train", **t} for i, t in enumerate(truths)],
            dtype=object,
        ),
        # compute_score's dict keys, which verl keeps per row as reward extra info
        "outcome": np.array([o for *_, o in batch], dtype=object),
        "indeterminate": np.array([o in ("timeout", "error") for *_, o in batch], dtype=bool),
        "ceiling": np.array([c for _, _, _, c, _ in batch], dtype=np.float64),
    }
    return {
        "token_level_rewards": rewards,
        "response_mask": mask,
        "index": non_tensor["uid"],
        "config": None,
        "non_tensor_batch": non_tensor,
    }


def _estimator() -> Any:
    """verl's registered ``grpo_smu`` when verl imports here, else the function verl would call."""
    try:
        from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    except ImportError:
        return grpo_smu.compute_grpo_smu_advantage
    assert grpo_smu.register_verl()
    fn = get_adv_estimator_fn(grpo_smu.VERL_NAME)
    assert fn is grpo_smu.compute_grpo_smu_advantage
    return fn


@needs_torch
def test_verl_estimator_is_hwtp_advantage_by_design() -> None:
    kwargs = verl_batch(BATCH)
    advantages, returns = _estimator()(**kwargs)
    mask = kwargs["response_mask"]
    assert advantages.shape == mask.shape and advantages.dtype == torch.float32
    assert torch.equal(advantages, returns)
    assert torch.all(advantages[mask == 0] == 0)
    per_sample = advantages.sum(-1) / mask.sum(-1)  # one value broadcast over the response tokens
    np.testing.assert_allclose(per_sample.numpy(), expected(BATCH), rtol=1e-6, atol=1e-6)
    # the design from data_source alone (rows without extra_info), outcomes from "indeterminate" alone
    nt = dict(kwargs["non_tensor_batch"])
    del nt["extra_info"], nt["outcome"]
    again, _ = grpo_smu.compute_grpo_smu_advantage(**{**kwargs, "non_tensor_batch": nt})
    torch.testing.assert_close(again, advantages)


@needs_torch
def test_verl_estimator_without_rows_refuses() -> None:
    kwargs = verl_batch(BATCH)
    del kwargs["non_tensor_batch"]  # what verl 0.9.1's compute_advantage passes a non-gdpo estimator
    with pytest.raises(ConfigError, match=r"python -m hwtp\.recipes\.verl_grpo_smu"):
        grpo_smu.compute_grpo_smu_advantage(**kwargs)
    nt = {"uid": kwargs["index"]}
    with pytest.raises(RewardError, match="names no design"):
        grpo_smu.compute_grpo_smu_advantage(**kwargs, non_tensor_batch=nt)


def test_design_uids_keep_verls_uid_and_name_the_ground_truth() -> None:
    """The recipe's uids: verl's own uid first (still unique per prompt), then the ground truth;
    untagged uids are None (plain main_ppo), a batch with some untagged is refused."""
    truth = {"design": "fifo", "state": "m0001", "mutant_set": HASH}
    uid = grpo_smu.design_uid("0f3c-uid", json.dumps(truth))
    assert uid.startswith("0f3c-uid" + grpo_smu.UID_TAG)
    assert grpo_smu.uid_truths(np.array([uid, uid], dtype=object), 2) == [truth, truth]
    assert grpo_smu.uid_truths(np.array(["a", "b"], dtype=object), 2) is None
    with pytest.raises(RewardError, match="names no design while others do"):
        grpo_smu.uid_truths(np.array([uid, "b"], dtype=object), 2)
    with pytest.raises(RewardError, match="2 uids for 3 responses"):
        grpo_smu.uid_truths(np.array([uid, uid], dtype=object), 3)


# --------------------------------------------------------------------------- real runs


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``hwtp run counter_en_load adder_carry --states 2 -G 2 --format trl --format jsonl``."""
    out = tmp_path_factory.mktemp("grpo_smu") / "run"
    from hwtp.cli.main import main

    code = main(["run", *DESIGNS, "--states", "2", "-G", "2", "--format", "trl", "--format", "jsonl", "-o", str(out)])
    assert code == 0
    return out


def _rows(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    files = sorted((run_dir / "export" / kind / "data").glob("*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]


@pytest.mark.sim
@needs_torch
def test_verl_estimator_finds_ceilings_from_the_mutant_sets(run_dir: Path) -> None:
    """Without a ceiling column the estimator reads each state's ceiling from its mutant set."""
    R.configure(states=[run_dir], workers=1)
    truths = [row["ground_truth"] for row in _rows(run_dir, "trl")]
    rewards = [1.0 if i % 2 else 0.0 for i in range(len(truths))]
    batch = [(t["design"], t["state"], r, 0.0, "passed") for t, r in zip(truths, rewards, strict=True)]
    kwargs = verl_batch(batch)
    nt = kwargs["non_tensor_batch"]
    nt["reward_model"] = np.array([{"style": "rule", "ground_truth": t} for t in truths], dtype=object)
    nt["extra_info"] = np.array([{"index": i, **t} for i, t in enumerate(truths)], dtype=object)
    del nt["ceiling"]
    advantages, _ = grpo_smu.compute_grpo_smu_advantage(**kwargs)
    ceilings = [1.0 if t["state"] == "golden" else 2.0 for t in truths]  # no equivalent mutants here
    want = expected([(d, s, r, c, o) for (d, s, r, _, o), c in zip(batch, ceilings, strict=True)])
    per_sample = advantages.sum(-1) / kwargs["response_mask"].sum(-1)
    np.testing.assert_allclose(per_sample.numpy(), want, rtol=1e-6, atol=1e-6)


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("hwtp_example_trl_train", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.sim
@pytest.mark.trainer
@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning", "ignore::UserWarning")
def test_trl_trainer_advantages_are_hwtp_advantage_by_design(run_dir: Path, tmp_path: Path) -> None:
    """GRPOSMuTrainer's advantages on rewards hwtp scored (real warm simulators) for the random
    policy's plans and for broken completions: ``hwtp advantage --group-by design`` on them."""
    pytest.importorskip("trl")
    datasets = pytest.importorskip("datasets")
    from trl import GRPOConfig

    R.configure(states=[run_dir], workers=1)
    dataset = datasets.load_dataset(str(run_dir / "export" / "trl"), split="train")
    plans = {(r["design"], r["state"]): r["completion"] for r in _rows(run_dir, "jsonl")}
    inputs, completions = [], []
    for row in dataset:  # num_generations=2: each prompt twice, as TRL repeats them
        for k in range(2):
            inputs.append(row)
            good = plans[(row["design"], row["state"])]
            completions.append([{"role": "assistant", "content": good if (k + len(inputs)) % 3 else "no plan, sorry"}])
    results = R.score_completions(
        [(row["ground_truth"], c[0]["content"]) for row, c in zip(inputs, completions, strict=True)]
    )
    assert {r.outcome for r in results} >= {"invalid", "passed", "detected"}
    # rewards_per_func as TRL's _calculate_rewards returns it: (N, reward functions), NaN for None
    rewards_per_func = torch.tensor([[np.nan if r.reward is None else r.reward] for r in results], dtype=torch.float32)

    example = _example()
    tokenizer = example.build_tokenizer([m["content"] for row in dataset for m in row["prompt"]])
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=8,
        use_cpu=True,
        report_to="none",
    )
    trainer = grpo_smu.GRPOSMuTrainer(
        model=example.build_model(tokenizer, 64),
        processing_class=tokenizer,
        reward_funcs=[R.trl_reward],
        args=args,
        train_dataset=dataset,
    )
    got = trainer.grpo_smu_advantages(rewards_per_func, grpo_smu.trl_rows(inputs))
    assert got.shape == (len(inputs),) and got.dtype == torch.float32
    batch = [(r.design, r.state, r.reward or 0.0, r.ceiling, r.outcome) for r in results]
    want = expected(batch)
    assert np.abs(want).max() > 0.5
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)
    with pytest.raises(RewardError, match="no design/state"):
        grpo_smu.trl_rows([{"prompt": []}])


@pytest.mark.sim
@pytest.mark.trainer
def test_trl_example_trains_two_steps(run_dir: Path, tmp_path: Path) -> None:
    """``python examples/trl/train.py RUN_DIR -o OUT``: 2 GRPO steps on CPU, rewards from hwtp."""
    pytest.importorskip("trl")
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), str(run_dir), "-o", str(tmp_path / "out")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "2 GRPO steps" in proc.stdout
    log = (tmp_path / "out" / "log_history.jsonl").read_text()
    history = [json.loads(line) for line in log.splitlines()]
    steps = [h for h in history if "loss" in h]
    assert [h["step"] for h in steps] == [1, 2]
    for h in steps:
        assert "rewards/hwtp_reward/mean" in h  # the reward function is hwtp's trl_reward
        assert "hwtp/invalid_rate" in h  # logged by hwtp's reward through TRL's log_metric
        assert "hwtp/zero_advantage_groups" in h  # GRPOSMuTrainer's advantages were used
    assert history[-1]["step"] == 2
