"""Request bodies of ``hwtp serve`` parsed into scoring items, and results into response bodies.

Two wire shapes:

- ``POST /reward``: OpenRLHF's remote reward model. ``{"query": [...], "prompts": [...],
  "labels": [...]}``; each query is prompt + response as the policy's tokenizer decoded them
  (special tokens kept), each label the ground truth an hwtp export wrote (JSON text or object).
  Answer: ``{"rewards": [...], "scores": [...], "extra_logs": {...}}``, lists in query order.
- ``POST /verify``: a NeMo Gym resources server's verify. The body is a rollout:
  ``responses_create_params``, ``response`` (an OpenAI Responses object whose ``output`` holds the
  assistant's messages) and the dataset row's own fields, here ``ground_truth``. Answer: the body
  echoed with ``reward`` added.

Bodies are data: parsed as JSON, checked field by field, never evaluated. Every refusal is a
:class:`RequestError` that names the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hwtp.rewards import RewardResult, settings
from hwtp.rewards.completion import cut_prompt

#: A ground truth as the scoring core takes it: the export's object or its JSON text.
GroundTruth = Mapping[str, Any] | str
#: One completion to score: its ground truth, its text, and its prompt when known (the core cuts
#: an echoed prompt and refuses the prompt's example plan).
Item = tuple[GroundTruth, str, str | None]


class RequestError(Exception):
    """A request the service refuses: HTTP ``status`` and a message that names the field."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def decode_json(body: bytes) -> Any:
    """The JSON value of a request body (UTF-8); 400 naming the position when it is not JSON."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(400, f"body is not UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RequestError(400, f"body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise RequestError(400, "body is not JSON: nested too deeply") from None
    except ValueError as exc:  # an integer of more digits than Python converts (sys.get_int_max_str_digits)
        raise RequestError(400, f"body is not accepted JSON: {str(exc).split(';')[0]}") from None


def _object(data: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(data, dict):
        raise RequestError(422, f"{what}: expected a JSON object, got {_kind(data)}")
    return data


def _strings(data: Mapping[str, Any], key: str, *, required: bool) -> list[str] | None:
    value = data.get(key)
    if value is None:
        if required:
            raise RequestError(422, f"{key}: missing (a list of strings)")
        return None
    if not isinstance(value, list):
        raise RequestError(422, f"{key}: expected a list of strings, got {_kind(value)}")
    for i, entry in enumerate(value):
        if not isinstance(entry, str):
            raise RequestError(422, f"{key}[{i}]: expected a string, got {_kind(entry)}")
    return value


def _ground_truth(value: Any, where: str) -> GroundTruth:
    """A label or ground truth field: an object, or its JSON text (checked by the scoring core)."""
    if isinstance(value, (dict, str)) and value:
        return value
    raise RequestError(422, f"{where}: expected the ground truth (a JSON object or its text), got {_kind(value)}")


@dataclass(frozen=True)
class RewardRequest:
    """A parsed ``POST /reward`` body."""

    queries: list[str]
    prompts: list[str] | None
    labels: list[GroundTruth]


def parse_reward(data: Any, max_items: int) -> RewardRequest:
    """Check an OpenRLHF body: ``query`` and ``labels`` lists of equal length, optional ``prompts``."""
    body = _object(data, "body")
    queries = _strings(body, "query", required=True)
    assert queries is not None
    prompts = _strings(body, "prompts", required=False)
    raw_labels = body.get("labels")
    if raw_labels is None:
        raise RequestError(422, "labels: missing (one ground truth per query, as the export's label column)")
    if not isinstance(raw_labels, list):
        raise RequestError(422, f"labels: expected a list, got {_kind(raw_labels)}")
    if len(queries) > max_items:
        raise RequestError(413, f"query: {len(queries)} items, more than the limit of {max_items} per request")
    if len(raw_labels) != len(queries):
        raise RequestError(422, f"labels: {len(raw_labels)} entries for {len(queries)} queries")
    if prompts is not None and len(prompts) != len(queries):
        raise RequestError(422, f"prompts: {len(prompts)} entries for {len(queries)} queries")
    labels = [_ground_truth(label, f"labels[{i}]") for i, label in enumerate(raw_labels)]
    return RewardRequest(queries, prompts, labels)


def reward_items(request: RewardRequest) -> list[Item]:
    """One item per query, as :func:`hwtp.rewards.reward_func` makes them: the prompt cut off
    the query (the core then drops trailing special tokens and the prompt's examples)."""
    prompts: Sequence[str | None] = request.prompts or [None] * len(request.queries)
    return [
        (label, cut_prompt(query, prompt), prompt)
        for query, prompt, label in zip(request.queries, prompts, request.labels, strict=True)
    ]


def reward_response(results: Sequence[RewardResult]) -> dict[str, Any]:
    """OpenRLHF's answer, the numbers of :func:`hwtp.rewards.reward_func` as JSON lists:
    ``rewards`` (an indeterminate result counts 0.0), ``scores`` (rewards over the detect level,
    in 0..1 for dynamic filtering), per-sample ``extra_logs`` flags and the ``reward_scheme``."""
    detect = settings().rewards.detect or 1.0
    rewards = [0.0 if r.reward is None else float(r.reward) for r in results]
    return {
        "rewards": rewards,
        "scores": [max(0.0, min(1.0, x / detect)) for x in rewards],
        "extra_logs": {
            "hwtp_invalid": [_flag(r.outcome in ("invalid", "golden_fail")) for r in results],
            "hwtp_detected": [_flag(r.outcome == "detected") for r in results],
            "hwtp_indeterminate": [_flag(r.indeterminate) for r in results],
        },
        "reward_scheme": results[0].scheme if results else settings().reward_scheme().name,
    }


def _flag(value: bool) -> float:
    return 1.0 if value else 0.0


def verify_text(body: Mapping[str, Any]) -> str:
    """The assistant's text in a Responses object: every ``output_text`` of every ``message``
    output, in order (what ``Response.output_text`` gives); reasoning and tool calls skipped."""
    response = _object(body.get("response"), "response")
    output = response.get("output")
    if not isinstance(output, list):
        raise RequestError(422, f"response.output: expected a list of output items, got {_kind(output)}")
    parts: list[str] = []
    for i, item in enumerate(output):
        if not isinstance(item, dict):
            raise RequestError(422, f"response.output[{i}]: expected an object, got {_kind(item)}")
        if item.get("type") != "message":
            continue
        content = item.get("content")
        if not isinstance(content, list):
            raise RequestError(422, f"response.output[{i}].content: expected a list, got {_kind(content)}")
        for j, part in enumerate(content):
            if isinstance(part, dict) and part.get("type") == "output_text":
                text = part.get("text")
                if not isinstance(text, str):
                    raise RequestError(422, f"response.output[{i}].content[{j}].text: expected a string")
                parts.append(text)
    return "".join(parts)


def parse_verify(data: Any) -> tuple[dict[str, Any], Item]:
    """Check a NeMo Gym verify body; the body (to echo) and its one item."""
    body = dict(_object(data, "body"))
    if "responses_create_params" not in body:
        raise RequestError(422, "responses_create_params: missing (the rollout's request)")
    ground_truth = body.get("ground_truth")
    if ground_truth is None:
        raise RequestError(422, "ground_truth: missing (the export's ground truth: design, state, mutant_set)")
    # The response is the assistant's output alone (no prompt to cut), as verl's solution_str.
    return body, (_ground_truth(ground_truth, "ground_truth"), verify_text(body), None)


def verify_response(body: dict[str, Any], result: RewardResult) -> dict[str, Any]:
    """The verify body echoed with ``reward`` (a float, as NeMo Gym's verify response requires:
    an indeterminate result counts 0.0, as for verl, and ``hwtp_indeterminate`` says so) and
    hwtp's outcome and reward scheme."""
    return {
        **body,
        "reward": float(result.reward) if result.reward is not None else 0.0,
        "hwtp_outcome": result.outcome,
        "hwtp_indeterminate": result.reward is None,
        "hwtp_reward_scheme": result.scheme,
    }


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )
