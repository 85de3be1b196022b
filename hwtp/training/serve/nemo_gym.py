"""The NeMo Gym resources-server routes of ``hwtp serve`` besides ``/verify`` (in
:mod:`hwtp.training.serve.protocol`): ``/seed_session``, ``/close_session`` and ``/aggregate_metrics``.

NeMo Gym's ``simple_agent`` POSTs ``/seed_session`` before every rollout (its run request: the
dataset row) and its training loop POSTs ``/aggregate_metrics`` with the verify responses of a
batch. hwtp keeps no state per rollout, so a session is acknowledged and nothing is stored; the
metrics are hwtp's outcome rates over the verify responses hwtp answered. Bodies are data, checked
field by field; every refusal is a :class:`~hwtp.training.serve.protocol.RequestError` naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from hwtp.training.serve.protocol import RequestError

#: The key NeMo Gym puts the dataset row's index under in rollouts (``TASK_INDEX_KEY_NAME``).
TASK_INDEX_KEY = "_ng_task_index"
_OUTCOME_RATES = {
    "hwtp/detected_rate": ("detected",),
    "hwtp/passed_rate": ("passed",),
    "hwtp/invalid_rate": ("invalid", "golden_fail"),
}


def _body(data: Any) -> Mapping[str, Any]:
    if not isinstance(data, dict):
        raise RequestError(422, "body: expected a JSON object")
    return data


def seed_session(data: Any) -> dict[str, Any]:
    """Answer to ``/seed_session``: an environment server's ``ResourcesSeedSessionRequest`` (it names
    a ``resources_session_id``) gets that id back; an agent's run request gets ``{}``."""
    body = _body(data)
    if "resources_session_id" not in body:
        return {}
    session = body["resources_session_id"]
    if not isinstance(session, str) or not session:
        raise RequestError(422, "resources_session_id: expected a non-empty string")
    return {"resources_session_id": session}


def close_session(data: Any) -> dict[str, Any]:
    """Answer to ``/close_session`` (``ResourcesCloseSessionRequest``): the id, closed (nothing was kept)."""
    body = _body(data)
    session = body.get("resources_session_id")
    if not isinstance(session, str) or not session:
        raise RequestError(422, "resources_session_id: expected a non-empty string")
    return {"resources_session_id": session}


def _reward(response: Mapping[str, Any], i: int) -> float:
    value = response.get("reward")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RequestError(422, f"verify_responses[{i}].reward: expected a number")
    return float(value)


def _summary(responses: Sequence[Mapping[str, Any]], rewards: Sequence[float]) -> dict[str, float]:
    n = len(rewards)
    out = {"rollouts": float(n), "mean/reward": sum(rewards) / n if n else 0.0}
    for name, outcomes in _OUTCOME_RATES.items():
        out[name] = sum(r.get("hwtp_outcome") in outcomes for r in responses) / n if n else 0.0
    out["hwtp/indeterminate_rate"] = sum(bool(r.get("hwtp_indeterminate")) for r in responses) / n if n else 0.0
    return out


def aggregate_metrics(data: Any) -> dict[str, Any]:
    """Answer to ``/aggregate_metrics`` (``AggregateMetricsRequest``: ``verify_responses``): NeMo Gym's
    ``AggregateMetrics`` shape, with the mean reward and hwtp's outcome rates over all rollouts
    (``agent_metrics``), per dataset row (``group_level_metrics``, by ``_ng_task_index``) and the
    headline ones (``key_metrics``)."""
    body = _body(data)
    responses = body.get("verify_responses")
    if not isinstance(responses, list):
        raise RequestError(422, "verify_responses: expected a list of verify responses")
    for i, r in enumerate(responses):
        if not isinstance(r, dict):
            raise RequestError(422, f"verify_responses[{i}]: expected an object")
    rewards = [_reward(r, i) for i, r in enumerate(responses)]
    groups: dict[Any, list[int]] = {}
    for i, r in enumerate(responses):
        task = r.get(TASK_INDEX_KEY)
        if task is not None and not isinstance(task, (int, str)):
            raise RequestError(422, f"verify_responses[{i}].{TASK_INDEX_KEY}: expected an integer or a string")
        groups.setdefault(task, []).append(i)
    overall = _summary(responses, rewards)
    return {
        "group_level_metrics": [
            {TASK_INDEX_KEY: task, **_summary([responses[i] for i in rows], [rewards[i] for i in rows])}
            for task, rows in groups.items()
            if task is not None
        ],
        "agent_metrics": overall,
        "key_metrics": {k: overall[k] for k in ("mean/reward", "hwtp/detected_rate", "hwtp/invalid_rate")},
    }
