"""Policies that write test plans: ``openai`` (an OpenAI-compatible endpoint), ``random``
(the built-in offline baseline) and ``replay`` (stored completions). One small interface
(:class:`Policy`), one list of names (``POLICIES``, :func:`check_policy_name`) and one
place that makes a policy from its settings (:func:`make_policy`, used by ``hwtp plan`` and
``hwtp run``).

Every policy returns, for each state, G :class:`Generated` samples: the completion text
exactly as produced and its metadata. The random policy's completion is the YAML of a
constrained-random plan whose expectations come from simulating golden, so it always passes
on golden; its files look exactly like an LLM's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hwtp import yamlio
from hwtp.env import DEFAULT_API_KEY_VAR, DEFAULT_MAX_RESPONSE_BYTES
from hwtp.errors import ConfigError, EndpointAuthError, PolicyError
from hwtp.mutators.mutantset import MutantSet
from hwtp.mutators.stimulus import StimulusConfig, fill_expectations, random_stimulus
from hwtp.plans.files import PLAN_INDEX, Generated, PlanRecord, read_index
from hwtp.plans.format import json_schema, to_data
from hwtp.policy.llm.cache import ResponseCache
from hwtp.policy.llm.chat import ChatRequest, ClientConfig, SamplingParams
from hwtp.policy.llm.client import complete_many
from hwtp.sim.executors.base import Executor, schemata_targets
from hwtp.sim.executors.local import LocalExecutor
from hwtp.sim.job import Evaluation, Limits, compile_plan, plan_cycles


@dataclass(frozen=True)
class PlanRequest:
    """One state to write plans for: its id and the chat prompt."""

    state: str
    messages: list[dict[str, str]]


class Policy(Protocol):
    name: str

    def parameters(self) -> dict[str, Any]:
        """What produced the samples (stored with every completion)."""

    def generate(self, requests: Sequence[PlanRequest], samples: int) -> list[list[Generated]]:
        """``samples`` completions per request, in request order."""


def _seed(base: int, state: str, index: int) -> int:
    digest = hashlib.sha256(f"{base}:{state}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


@dataclass
class RandomPolicy:
    """Seeded constrained-random stimulus with golden's outputs as expectations."""

    mutant_set: MutantSet
    seed: int = 0
    stimulus: StimulusConfig = field(default_factory=StimulusConfig)
    name: str = "random"
    #: Where golden is simulated for the expectations (default: a process on this machine).
    executor: Executor = field(default_factory=LocalExecutor, compare=False, repr=False)

    def parameters(self) -> dict[str, Any]:
        s = self.stimulus
        return {"seed": self.seed, "tests": s.tests, "cycles": s.cycles, "hold": s.hold, "corner": s.corner}

    def generate(self, requests: Sequence[PlanRequest], samples: int) -> list[list[Generated]]:
        design = self.mutant_set.design
        stimuli = [
            [
                random_stimulus(design, _seed(self.seed, r.state, k), self.stimulus, prefix="random")
                for k in range(samples)
            ]
            for r in requests
        ]
        flat = [s for per_state in stimuli for s in per_state]
        evaluations = [
            Evaluation(f"s{i}", compile_plan(s, design), 0, stop_on_fail=False, cycles=plan_cycles(s, design))
            for i, s in enumerate(flat)
        ]
        # golden only: the schemata's first part, in one simulator process
        results = self.executor.run(schemata_targets(self.mutant_set), evaluations, Limits())
        out: list[list[Generated]] = []
        for i, per_state in enumerate(stimuli):
            row = []
            for k, stimulus in enumerate(per_state):
                result = results[f"s{i * samples + k}"]
                if result.status != "pass":
                    row.append(Generated(k, None, error=f"golden simulation {result.status}: {result.reason}"))
                    continue
                plan = fill_expectations(stimulus, design, [t.get("trace", []) for t in result.tests])
                text = yamlio.dump(to_data(plan))
                row.append(Generated(k, text, finish_reason="stop", model="hwtp-random"))
            out.append(row)
        return out


@dataclass
class ReplayPolicy:
    """Replays the completions stored by an earlier ``hwtp plan`` (``--from DIR``)."""

    source: Path
    name: str = "replay"

    def parameters(self) -> dict[str, Any]:
        return {"from": self.source.name}

    def generate(self, requests: Sequence[PlanRequest], samples: int) -> list[list[Generated]]:
        index = self.source / PLAN_INDEX
        if not index.is_file():
            raise PolicyError(f"--from {self.source}: no {PLAN_INDEX} (not an hwtp plan folder)")
        stored: dict[tuple[str, int], PlanRecord] = {
            (rec.state, rec.sample): rec for _, rec in read_index(index, PolicyError)
        }
        out = []
        for r in requests:
            row = []
            for k in range(samples):
                rec = stored.get((r.state, k))
                if rec is None:
                    row.append(Generated(k, None, error=f"no stored completion for {r.state} sample {k}"))
                else:
                    g = rec.generated
                    row.append(Generated(k, g.text, g.finish_reason, g.usage, 0.0, g.model, True, rec.error))
            out.append(row)
        return out


@dataclass
class OpenAIPolicy:
    """An OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp, TGI, hosted APIs)."""

    config: ClientConfig
    params: SamplingParams
    cache_folder: Path | None = None
    refresh: bool = False
    name: str = "openai"

    def parameters(self) -> dict[str, Any]:
        p = self.params
        return {
            "model": self.config.model,
            "temperature": p.temperature,
            "top_p": p.top_p,
            "max_tokens": p.max_tokens,
            "seed": p.seed,
            "stop": list(p.stop),
            "structured": p.response_format is not None,
        }

    def generate(self, requests: Sequence[PlanRequest], samples: int) -> list[list[Generated]]:
        chat = [ChatRequest(r.messages, self.params, n=samples) for r in requests]
        with ResponseCache(self.cache_folder) as cache:
            results = complete_many(self.config, chat, cache=cache, refresh=self.refresh)
        for result in results:
            if isinstance(result.error, EndpointAuthError):
                raise EndpointAuthError(str(result.error))  # a wrong key: nothing else can work
        out = []
        for result in results:
            got = {c.index: c for c in result.completions}
            row = []
            for k in range(samples):
                c = got.get(k)
                if c is None:
                    reason = _failure_reason(result.error)
                    row.append(Generated(k, None, error=reason, unavailable=True))
                    continue
                usage = (
                    {"prompt_tokens": c.usage.prompt_tokens, "completion_tokens": c.usage.completion_tokens}
                    if c.usage
                    else None
                )
                row.append(Generated(k, c.text, c.finish_reason, usage, c.latency_s, c.model, c.from_cache))
            out.append(row)
        return out


def _failure_reason(error: Exception | None) -> str:
    """Why a request produced no sample, without the partial-success suffix."""
    if error is None:
        return "the endpoint returned no completion"
    cause = error.__cause__ if isinstance(error.__cause__, PolicyError) else None
    return str(cause or error)


POLICIES = ("random", "openai", "replay")


def check_policy_name(name: str) -> str:
    if name not in POLICIES:
        raise ConfigError(f"unknown policy {name!r} (valid: {', '.join(POLICIES)})")
    return name


@dataclass(frozen=True)
class PolicySpec:
    """A policy and its settings, as ``hwtp plan``'s options and ``hwtp run``'s configuration
    give them (:func:`make_policy` makes the policy).

    ``openai`` needs ``endpoint`` and ``model`` (``timeout`` is each request's total deadline;
    ``structured`` asks for JSON matching the plan schema); ``replay`` needs ``replay_from``
    (an earlier ``hwtp plan`` folder); ``random`` is seeded by ``seed``.
    """

    name: str = "random"
    seed: int = 0
    replay_from: Path | str | None = None
    endpoint: str | None = None
    model: str | None = None
    api_key_env: str = DEFAULT_API_KEY_VAR
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    structured: bool = False
    concurrency: int = 8
    timeout: float = 300.0
    retries: int = 5
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    refresh: bool = False


def make_policy(spec: PolicySpec, mutant_set: MutantSet, executor: Executor | None = None) -> Policy:
    """The policy ``spec`` names, with its settings; the offline policy simulates golden on
    ``executor`` (default: a process on this machine)."""
    check_policy_name(spec.name)
    if spec.name == "random":
        return RandomPolicy(mutant_set, seed=spec.seed, executor=executor or LocalExecutor())
    if spec.name == "replay":
        if spec.replay_from is None:
            raise ConfigError("--policy replay needs --from DIR (an earlier hwtp plan output)")
        return ReplayPolicy(Path(spec.replay_from))
    if not spec.endpoint or not spec.model:
        raise ConfigError("--policy openai needs --endpoint URL and --model NAME")
    response_format = (
        {"type": "json_schema", "json_schema": {"name": "test_plan", "schema": json_schema()}}
        if spec.structured
        else None
    )
    params = SamplingParams(
        temperature=spec.temperature,
        top_p=spec.top_p,
        max_tokens=spec.max_tokens,
        seed=spec.seed,
        stop=tuple(spec.stop),
        response_format=response_format,
    )
    client = ClientConfig(
        endpoint=spec.endpoint,
        model=spec.model,
        api_key_env=spec.api_key_env,
        concurrency=spec.concurrency,
        read_timeout=spec.timeout,
        request_timeout=spec.timeout,
        max_retries=spec.retries,
        max_response_bytes=spec.max_response_bytes,
    )
    return OpenAIPolicy(client, params, refresh=spec.refresh)
