"""NeMo Gym 0.7's own code on hwtp: its dataset validation reads ``hwtp export --format nemo-gym``,
its config models accept the export's ``nemo_gym.yaml`` and its server client resolves the
resources server there to ``hwtp serve``, and a rollout as its ``simple_agent`` makes one
(``/seed_session``, ``/verify``, ``/close_session``, ``/aggregate_metrics``) is answered with
bodies its own pydantic models accept, the reward being ``hwtp score``'s.

NeMo Gym 0.7 declares Python >= 3.13; its wheel is pure Python, and the code used here runs on
3.10+ once installed with ``--ignore-requires-python`` (see ``.ci/run``). Skipped without it.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from runs import small_run
from serving import ServeProcess

pytestmark = [
    pytest.mark.trainer,
    pytest.mark.skipif(
        not all(importlib.util.find_spec(m) for m in ("nemo_gym", "responses_api_agents", "starlette", "uvicorn")),
        reason="needs NeMo Gym (see .ci/run: HWTP_CI_NEMO_GYM) and hwtp[serve]",
    ),
    pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning", "ignore::FutureWarning"),
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``hwtp run counter_en_load adder_carry --states 2 -G 2 --format nemo-gym --format jsonl``."""
    return small_run(tmp_path_factory, "nemo_gym", "nemo-gym", "jsonl")


def _lines(folder: Path) -> list[str]:
    return [line for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines() if line.strip()]


def _config(run_dir: Path) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.load(run_dir / "export" / "nemo-gym" / "nemo_gym.yaml")


def test_dataset_and_config_are_read_by_nemo_gym(run_dir: Path) -> None:
    """NeMo Gym's ``compute_sample_metrics`` (what ``ng_prepare_data`` runs on every line: it
    validates the row as a ``BaseRunRequest``) accepts every row; its config models accept the
    agent entry, whose datasets are the export's shards; its server client resolves
    ``hwtp_resources_server`` to the host and port of the config."""
    from nemo_gym.config_types import maybe_get_server_instance_config
    from nemo_gym.global_config import get_first_server_config_dict
    from nemo_gym.server_utils import ServerClient
    from nemo_gym.train_data_utils import compute_sample_metrics

    lines = _lines(run_dir / "export" / "nemo-gym" / "data")
    assert len(lines) == 6  # one per (design, state) prompt
    for line in lines:
        metrics, offending = compute_sample_metrics(line)
        assert not offending and metrics.number_of_examples == 1
        row = json.loads(line)
        assert set(row["ground_truth"]) == {"design", "state", "mutant_set"}
        assert [m["role"] for m in row["responses_create_params"]["input"]] == ["system", "user"]

    config = _config(run_dir)
    agent, error = maybe_get_server_instance_config("hwtp_simple_agent", config["hwtp_simple_agent"])
    assert agent is not None, error
    assert agent.get_inner_run_server_config().resources_server["name"] == "hwtp_resources_server"
    assert [Path(d.jsonl_fpath).read_text().splitlines() for d in agent.datasets] == [lines]
    # NeMo Gym starts only servers whose config has an entrypoint (nemo_gym/cli/env.py: `if
    # "entrypoint" not in server_config_dict: continue`); hwtp serve is started by its user.
    server = get_first_server_config_dict(config, "hwtp_resources_server")
    assert "entrypoint" not in server
    assert ServerClient._build_server_base_url(None, server) == "http://127.0.0.1:8000"


def _response(text: str) -> dict[str, Any]:
    """An OpenAI Responses object with one assistant message, as NeMo Gym's model server returns."""
    return {
        "id": "resp_1",
        "created_at": 0.0,
        "model": "policy_model",
        "object": "response",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
    }


@pytest.mark.sim
def test_simple_agent_rollout_is_answered_with_nemo_gym_models(run_dir: Path, tmp_path: Path) -> None:
    """The calls of NeMo Gym's ``SimpleAgent.run`` (responses_api_agents/simple_agent/app.py: POST
    ``/seed_session`` with ``body.model_dump()``, then ``/verify`` with ``body.model_dump() |
    {"response": ...}``) and of an environment server (``ResourcesSeedSessionRequest``,
    ``ResourcesCloseSessionRequest``), then ``/aggregate_metrics``: every answer validates as NeMo
    Gym's response model, and the rewards are those ``hwtp score`` gave the plans in the run."""
    from nemo_gym.base_resources_server import (
        BaseSeedSessionResponse,
        ResourcesCloseSessionRequest,
        ResourcesCloseSessionResponse,
        ResourcesSeedSessionRequest,
        ResourcesSeedSessionResponse,
    )
    from nemo_gym.config_types import AggregateMetrics, AggregateMetricsRequest
    from nemo_gym.episode_types import EpisodeId, TaskId
    from nemo_gym.openai_utils import NeMoGymResponse
    from omegaconf import OmegaConf
    from responses_api_agents.simple_agent.app import SimpleAgentRunRequest, SimpleAgentVerifyResponse

    scored = {}
    for line in _lines(run_dir / "export" / "jsonl" / "data"):
        record = json.loads(line)
        scored.setdefault((record["design"], record["state"]), record)
    serve = ServeProcess(run_dir, tmp_path, "--workers", "1")
    try:
        port = serve.url.rsplit(":", 1)[1]
        config = OmegaConf.merge(  # the config's override line: ++...hwtp.port=N
            _config(run_dir), OmegaConf.from_dotlist([f"hwtp_resources_server.resources_servers.hwtp.port={port}"])
        )
        from nemo_gym.global_config import get_first_server_config_dict
        from nemo_gym.server_utils import ServerClient

        url = ServerClient._build_server_base_url(None, get_first_server_config_dict(config, "hwtp_resources_server"))
        assert url == serve.url

        verified, want = [], []
        for index, line in enumerate(_lines(run_dir / "export" / "nemo-gym" / "data")):
            body = SimpleAgentRunRequest.model_validate(json.loads(line) | {"_ng_task_index": index})
            seeded = serve.post("/seed_session", body.model_dump())
            assert seeded.status_code == 200, seeded.text
            BaseSeedSessionResponse.model_validate(seeded.json())
            truth = body.model_extra["ground_truth"]
            sample = scored[(truth["design"], truth["state"])]
            response = NeMoGymResponse.model_validate(_response(sample["completion"])).model_dump(mode="json")
            answer = serve.post("/verify", body.model_dump() | {"response": response})
            assert answer.status_code == 200, answer.text
            result = SimpleAgentVerifyResponse.model_validate(answer.json())
            verified.append(answer.json())
            want.append(sample["reward"])
            assert result.reward == sample["reward"]
        assert {1.0, 2.0} <= set(want)

        episode = EpisodeId(rollout_id="r1")
        task = TaskId(taskset="hwtp", task_id="0")
        seed = ResourcesSeedSessionRequest(
            resources_session_id="s-1", episode_id=episode, task_id=task, task_data={"ground_truth": truth}
        )
        seeded = serve.post("/seed_session", seed.model_dump(mode="json"))
        assert ResourcesSeedSessionResponse.model_validate(seeded.json()).resources_session_id == "s-1"
        close = ResourcesCloseSessionRequest(resources_session_id="s-1", episode_id=episode)
        closed = serve.post("/close_session", close.model_dump(mode="json"))
        assert ResourcesCloseSessionResponse.model_validate(closed.json()).resources_session_id == "s-1"

        request = AggregateMetricsRequest(verify_responses=verified + verified)  # two rollouts per row
        answer = serve.post("/aggregate_metrics", request.model_dump(mode="json"))
        assert answer.status_code == 200, answer.text
        metrics = AggregateMetrics.model_validate(answer.json())
        assert metrics.agent_metrics["mean/reward"] == pytest.approx(sum(want) / len(want))
        assert metrics.agent_metrics["rollouts"] == 2 * len(want)
        assert len(metrics.group_level_metrics) == len(want)
        assert [g["mean/reward"] for g in metrics.group_level_metrics] == want
        assert metrics.key_metrics["hwtp/detected_rate"] == pytest.approx(sum(w == 2.0 for w in want) / len(want))

        changed = json.loads(line) | {"ground_truth": {**truth, "mutant_set": "0" * 64}}
        refused = serve.post("/verify", changed | {"response": response})
        assert refused.status_code == 422 and truth["design"] in refused.json()["error"]
    finally:
        code, _, err = serve.stop()
    assert code == 0
    assert any(x.startswith("hwtp serve /verify 422:") and truth["design"] in x for x in err.splitlines()), err
