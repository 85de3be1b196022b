"""OpenRLHF 0.11's own reward client (``openrlhf.utils.agent.SingleTurnAgentExecutor``) on hwtp:
its HTTP path against a real ``hwtp serve`` and its ``.py`` path loading ``hwtp/rewards/entry.py``
give the rewards ``hwtp score`` gave; a changed mutant set, which OpenRLHF's client swallows,
is printed with hwtp's message; hwtp's request time limit is under the client's.

Needs OpenRLHF's wheel without its GPU stack (``pip install --no-deps openrlhf==0.11.2``: its
dependencies pin flash-attn, a CUDA build) and aiohttp, which its client uses (``.ci/run`` installs
both); skipped without it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest
from runs import small_run
from serving import ServeProcess

import hwtp.rewards as R
import hwtp.rewards.entry as entry
from hwtp.errors import RewardError
from hwtp.training.serve.limits import REQUEST_TIMEOUT_S, ServeLimits

pytestmark = [
    pytest.mark.trainer,
    pytest.mark.skipif(
        not all(importlib.util.find_spec(m) for m in ("openrlhf", "aiohttp", "starlette", "uvicorn")),
        reason="needs OpenRLHF's client (see .ci/run: HWTP_CI_OPENRLHF) and hwtp[serve]",
    ),
]

END = "<|im_end|>"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``hwtp run counter_en_load adder_carry --states 2 -G 2 --format openrlhf --format jsonl``."""
    return small_run(tmp_path_factory, "openrlhf", "openrlhf", "jsonl")


def _rows(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    files = sorted((run_dir / "export" / kind / "data").glob("*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]


def _batch(run_dir: Path) -> tuple[list[str], list[str], list[str], list[float]]:
    """OpenRLHF's reward call for one response per prompt: queries (prompt + response + end token,
    decoded with special tokens kept), prompts, labels (the export's ``label`` column), and the
    rewards ``hwtp score`` gave those plans in the run."""
    scored = {(r["design"], r["state"]): r for r in _rows(run_dir, "jsonl")}
    queries, prompts, labels, want = [], [], [], []
    for row in _rows(run_dir, "openrlhf"):
        truth = json.loads(row["label"])
        sample = scored[(truth["design"], truth["state"])]
        prompt = "".join(f"<|im_start|>{m['role']}\n{m['content']}{END}\n" for m in row["input"])
        prompt += "<|im_start|>assistant\n"
        prompts.append(prompt)
        queries.append(prompt + sample["completion"] + END)
        labels.append(row["label"])
        want.append(sample["reward"])
    return queries, prompts, labels, want


def _changed(label: str) -> str:
    """The label of an export made before the mutant set changed (another hash)."""
    return json.dumps({**json.loads(label), "mutant_set": "0" * 64})


@pytest.fixture(autouse=True)
def _states(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("HWTP_STATES", str(run_dir))
    R.reset()
    R.configure(workers=1)
    yield
    R.reset()


def _executor(url: str) -> Any:
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    return SingleTurnAgentExecutor(remote_rm_url=url)


@pytest.mark.sim
def test_remote_url_gets_hwtp_rewards_and_a_changed_set_is_printed(run_dir: Path, tmp_path: Path) -> None:
    """``--reward.remote_url http://.../reward``: OpenRLHF's own HTTP client gets hwtp's rewards. A
    label of a changed mutant set is a 422 that the client retries 5 times and drops (it raises
    its own "Request error for 5 times"), so hwtp serve prints hwtp's message on its console."""
    queries, prompts, labels, want = _batch(run_dir)
    assert {1.0, 2.0} <= set(want)
    serve = ServeProcess(run_dir, tmp_path, "--workers", "1")
    try:
        executor = _executor(serve.url + "/reward")
        (answer,) = asyncio.run(executor._fetch_rewards_via_http(queries, prompts, labels))
        assert answer["rewards"] == want
        assert answer["scores"] == [r / 2.0 for r in want]
        bad = [_changed(labels[0])]
        with pytest.raises(RuntimeError, match="Request error for 5 times"):
            asyncio.run(executor._fetch_rewards_via_http(queries[:1], prompts[:1], bad))
    finally:
        code, _, err = serve.stop()
    assert code == 0
    design = json.loads(labels[0])["design"]
    lines = [line for line in err.splitlines() if line.startswith("hwtp serve /reward 422:")]
    assert len(lines) == 1, err[-2000:]  # once, not once per retry
    assert design in lines[0] and "0" * 12 in lines[0]


@pytest.mark.sim
def test_reward_func_file_gets_hwtp_rewards_and_a_changed_set_is_printed(
    run_dir: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``--reward.remote_url .../hwtp/rewards/entry.py``: OpenRLHF loads ``reward_func`` from the file
    and calls it one query at a time; a changed mutant set raises hwtp's RewardError, which
    OpenRLHF would log at INFO level and drop, so hwtp also prints it to stderr."""
    queries, prompts, labels, want = _batch(run_dir)
    executor = _executor(entry.__file__)
    assert executor.reward_func is R.reward_func  # the file re-exports hwtp.rewards.reward_func
    answers = asyncio.run(executor._fetch_rewards_via_func(queries, prompts, labels))
    assert [float(a["rewards"][0]) for a in answers] == want
    with pytest.raises(RewardError, match="mutant set") as caught:
        asyncio.run(executor._fetch_rewards_via_func(queries[:1], prompts[:1], [_changed(labels[0])]))
    err = capfd.readouterr().err
    assert f"hwtp reward_func: {caught.value}" in err


def test_request_timeout_is_under_openrlhfs_client_timeout() -> None:
    """OpenRLHF's client gives a reward request ``aiohttp.ClientTimeout(total=N)`` then sends it
    again; hwtp's default time limit answers first (a 504 with hwtp's message)."""
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    source = inspect.getsource(SingleTurnAgentExecutor._fetch_rewards_via_http)
    found = re.search(r"ClientTimeout\(total=(\d+(?:\.\d+)?)\)", source)
    assert found, "OpenRLHF's client no longer sets a total timeout here"
    assert ServeLimits().request_timeout_s == REQUEST_TIMEOUT_S < float(found.group(1))
