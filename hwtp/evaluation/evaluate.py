"""``hwtp eval``: G plans per state from a policy on each design, scored, and the numbers a
paper reports: golden pass rate and mutation detection rate (``hwtp.scoring.score.rates``) per design
and overall, pass@k for k <= G, intervals, invalid-plan reasons, tokens and latency.

Per design: its mutant set (``hwtp.mutators.engine``, deterministic in the seed, kept in
``OUT/mutants/NAME`` and reused while the design and settings are the same, so two policies
evaluated into two folders with the same settings meet the same mutants), the policy's plans
(``hwtp.policy.planning.plan_states`` through ``hwtp.policy.policies.make_policy``; written to
``OUT/plans/NAME``, a folder ``--policy replay --from OUT/plans`` re-reads), then every sample
scored on its own state and golden by the reward core (``hwtp.rewards.score_completions`` on
warm simulator pools), so a sample's outcome is exactly the reward a trainer gets for it.
"""

from __future__ import annotations

import contextlib
import json
import re
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hwtp.errors import ConfigError, HwtpError
from hwtp.evaluation.metrics import bootstrap, pass_at_k, wilson
from hwtp.evaluation.render import markdown
from hwtp.mutators import engine
from hwtp.mutators.mutantset import GOLDEN, MUTANTS_JSON, MutantSet, load, write
from hwtp.plans.files import Generated, PlanRecord
from hwtp.policy.planning import SampleFailure, plan_states, write_plans
from hwtp.policy.policies import PlanRequest, Policy
from hwtp.policy.prompt import Templates
from hwtp.rewards import core
from hwtp.rtl.design import Design
from hwtp.run.config import RunConfig
from hwtp.run.loop import run_policy
from hwtp.scoring.score import Outcome, SampleResult, passed_golden, rates
from hwtp.sim.executors.base import Executor

EVAL_JSON = "eval.json"
EVAL_MD = "eval.md"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class EvalConfig:
    """What ``hwtp eval`` does: ``hwtp run``'s configuration (designs, states, G, seed, witness
    cycles and the policy's settings; the advantage and export fields are not used) and the
    split the designs came from (recorded)."""

    run: RunConfig = field(default_factory=RunConfig)
    split: str | None = None

    @property
    def samples(self) -> int:
        return self.run.samples

    def settings(self) -> dict[str, Any]:
        """What the numbers depend on (recorded with them; a comparison warns when they differ)."""
        data = self.run.fingerprint()
        for key in ("designs", "preset", "group_by", "formats", "batch_size", "api_key_env"):
            data.pop(key, None)
        return data | {"split": self.split}


class _Timed:
    """A policy whose ``generate`` wall time is added up: the model's own time, which the
    hwtp overhead excludes."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.name = policy.name
        self.seconds = 0.0

    def parameters(self) -> dict[str, Any]:
        return self.policy.parameters()

    def generate(self, requests: Sequence[PlanRequest], samples: int) -> list[list[Generated]]:
        start = time.perf_counter()
        try:
            return self.policy.generate(requests, samples)
        finally:
            self.seconds += time.perf_counter() - start


def mutant_set_for(design: Design, config: EvalConfig, folder: Path) -> MutantSet:
    """The design's mutant set in ``folder``, made once per (design, states, seed, witness cycles)."""
    run = config.run
    key = {"design_hash": design.content_hash, "n": run.states, "seed": run.seed, "w": run.witness_cycles}
    stamp = folder / "eval-mutants.json"
    if (folder / MUTANTS_JSON).is_file() and stamp.is_file():
        try:
            if json.loads(stamp.read_text(encoding="utf-8")) == key:
                return load(folder)
        except (OSError, ValueError, HwtpError):
            pass
    result = engine.mutate(
        design,
        engine.MutationConfig(n=run.states, seed=run.seed, jobs=run.jobs, witness_cycles=run.witness_cycles),
    )
    write(result, folder)
    stamp.write_text(json.dumps(key) + "\n", encoding="utf-8")
    return load(folder)


def _policy(config: EvalConfig, mutant_set: MutantSet, executor: Executor | None = None) -> Policy:
    """``hwtp run``'s policy; a replay folder may hold one ``hwtp plan`` folder per design."""
    run = config.run
    if run.replay_from is not None:
        per_design = Path(run.replay_from) / mutant_set.design.name
        if per_design.is_dir():
            run = replace(run, replay_from=str(per_design))
    return run_policy(run, mutant_set, executor)


_NUMBERS = re.compile(r"\d+")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def reason_kind(reason: str) -> str:
    """An invalid plan's reason with its particulars (numbers, quoted names, the source prefix)
    taken out, so reasons of one kind are counted together."""
    text = reason.split(": ", 1)[1] if reason.startswith(("completion:", "reference:")) else reason
    text = _QUOTED.sub("'…'", _NUMBERS.sub("N", text))
    return text[:100]


@dataclass
class DesignEval:
    name: str
    mutant_set: str
    records: list[PlanRecord]
    results: list[SampleResult]
    failures: list[SampleFailure]
    policy_seconds: float
    hwtp_seconds: float
    mutate_seconds: float
    equivalent: set[str] = field(default_factory=set)


def evaluate_design(
    design: Design, config: EvalConfig, outdir: Path, templates: Templates, executor: Executor | None = None
) -> DesignEval:
    """One design: its mutant set (made or reused), the policy's samples, and their rewards from
    a scorer holding that set (nothing read back from disk), simulated on ``executor`` (default:
    the one the reward settings name, closed at the end)."""
    start = time.perf_counter()
    mutant_set = mutant_set_for(design, config, outdir / "mutants" / design.name)
    mutate_seconds = time.perf_counter() - start
    start = time.perf_counter()
    states = [GOLDEN, *(m.id for m in mutant_set.states)]
    policy = _Timed(_policy(config, mutant_set, executor))
    failures: list[SampleFailure] = []
    records = plan_states(mutant_set, states, config.samples, policy, templates, failures)
    write_plans(records, outdir / "plans" / design.name, per_state_files=False)  # plans.jsonl: replayable
    digest = mutant_set.set_hash
    scored = [r for r in records if r.generated.text is not None]
    with core.Scorer(core.settings(), executor, [mutant_set]) as scorer:
        rewards = scorer.score_completions(
            [({"design": design.name, "state": r.state, "mutant_set": digest}, r.generated.text or "") for r in scored]
        )
    by_key = {(r.state, r.sample): w for r, w in zip(scored, rewards, strict=True)}
    results = []
    for r in records:
        w = by_key.get((r.state, r.sample))
        if w is None:  # the policy produced no text: an invalid sample with the policy's reason
            detail = {"reason": r.error or r.generated.error or "no completion"}
            results.append(SampleResult(r.plan, r.state, Outcome.INVALID, 0.0, detail, w))
        else:
            results.append(SampleResult(r.plan, r.state, Outcome(w.outcome), w.reward or 0.0, w.detail, w.ceiling))
    total = time.perf_counter() - start
    equivalent = {m.id for m in mutant_set.valid if m.klass == engine.MutantClass.EQUIVALENT}
    return DesignEval(
        design.name,
        digest,
        records,
        results,
        failures,
        policy.seconds,
        total - policy.seconds,
        mutate_seconds,
        equivalent,
    )


def _pass_at(
    results: Sequence[SampleResult], ks: Sequence[int], correct: Any, states: set[str] | None
) -> dict[str, Any]:
    """Mean pass@k over the states (``states``: only these), each state's n its samples."""
    by_state: dict[str, list[bool]] = {}
    for r in results:
        if states is None or r.state in states:
            by_state.setdefault(r.state, []).append(bool(correct(r)))
    out: dict[str, Any] = {}
    for k in ks:
        values = [pass_at_k(len(v), sum(v), k) for v in by_state.values() if len(v) >= k]
        out[str(k)] = statistics.fmean(values) if values else None
    return out


def _counts(results: Sequence[SampleResult]) -> dict[str, int]:
    plans: dict[str, bool] = {}
    mutant = detected = 0
    for r in results:
        plans[r.plan] = plans.get(r.plan, False) or passed_golden(r)
        if r.state != GOLDEN:
            mutant += 1
            detected += r.outcome == Outcome.DETECTED
    return {"plans": len(plans), "golden_passed": sum(plans.values()), "mutant_samples": mutant, "detected": detected}


def _numbers(evals: Sequence[DesignEval], ks: Sequence[int]) -> dict[str, Any]:
    results = [r for e in evals for r in e.results]
    golden, detect = rates([e.results for e in evals])
    counts = _counts(results) if len(evals) == 1 else _sum_counts([_counts(e.results) for e in evals])
    outcomes = Counter(r.outcome.value for r in results)
    invalid = Counter(
        reason_kind(str((r.detail or {}).get("reason", ""))) for r in results if r.outcome == Outcome.INVALID
    )
    mutant_states = {r.state for r in results if r.state != GOLDEN}
    records = [rec for e in evals for rec in e.records]
    usage = [rec.generated.usage or {} for rec in records]
    latencies = sorted(rec.generated.latency_s for rec in records if rec.generated.latency_s > 0)
    samples = len(results)
    policy_s = sum(e.policy_seconds for e in evals)
    hwtp_s = sum(e.hwtp_seconds for e in evals)
    return {
        "samples": samples,
        "golden_pass_rate": golden,
        "detection_rate": detect,
        "counts": counts,
        "wilson95": {
            "golden_pass_rate": list(wilson(counts["golden_passed"], counts["plans"])),
            "detection_rate": list(wilson(counts["detected"], counts["mutant_samples"])),
        },
        "pass_at_k": {
            "golden": _pass_at(results, ks, passed_golden, None),
            "detect": _pass_at(results, ks, lambda r: r.outcome == Outcome.DETECTED, mutant_states),
        },
        "outcomes": dict(sorted(outcomes.items())),
        "invalid_reasons": dict(invalid.most_common(10)),
        "unavailable_samples": sum(len(e.failures) for e in evals),
        "tokens": {
            "prompt": sum(u.get("prompt_tokens", 0) for u in usage),
            "completion": sum(u.get("completion_tokens", 0) for u in usage),
        },
        "latency_s": {
            "mean": statistics.fmean(latencies) if latencies else None,
            "p50": latencies[len(latencies) // 2] if latencies else None,
            "p95": latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))] if latencies else None,
        },
        "seconds": {
            "policy": round(policy_s, 3),
            "hwtp": round(hwtp_s, 3),
            "mutate": round(sum(e.mutate_seconds for e in evals), 3),
        },
        "hwtp_ms_per_sample": round(1000 * hwtp_s / samples, 3) if samples else None,
    }


def _sum_counts(parts: Sequence[dict[str, int]]) -> dict[str, int]:
    return {k: sum(p[k] for p in parts) for k in ("plans", "golden_passed", "mutant_samples", "detected")}


def summarize(evals: Sequence[DesignEval], config: EvalConfig) -> dict[str, Any]:
    """The evaluation document (``eval.json``): per design, overall, and the settings."""
    ks = [k for k in (1, 2, 4, 8, 16, 32, 64) if k <= config.samples]
    if config.samples not in ks:
        ks.append(config.samples)
    overall = _numbers(evals, ks)

    counts = [_counts(e.results) for e in evals]  # per design: the bootstrap resamples these

    def golden_of(sample: Sequence[dict[str, int]]) -> float:
        plans = sum(c["plans"] for c in sample)
        return sum(c["golden_passed"] for c in sample) / plans if plans else 0.0

    def detect_of(sample: Sequence[dict[str, int]]) -> float:
        mutant = sum(c["mutant_samples"] for c in sample)
        return sum(c["detected"] for c in sample) / mutant if mutant else 0.0

    overall["bootstrap95_over_designs"] = {
        "golden_pass_rate": list(bootstrap(counts, golden_of)),
        "detection_rate": list(bootstrap(counts, detect_of)),
    }
    return {
        "version": FORMAT_VERSION,
        "settings": config.settings(),
        "ks": ks,
        "designs": {e.name: _numbers([e], ks) | {"mutant_set": e.mutant_set} for e in evals},
        "overall": overall,
        "intervals": "wilson95: Wilson score interval (samples as independent trials); "
        "bootstrap95_over_designs: percentile interval, 1000 resamples of the designs",
    }


def evaluate(
    designs: Sequence[Design],
    config: EvalConfig,
    outdir: Path,
    progress: Any = None,
    executor: Executor | None = None,
) -> dict[str, Any]:
    """Evaluate the policy of ``config`` on ``designs`` into ``outdir`` (eval.json, eval.md,
    plans/, mutants/); returns the evaluation document. Simulated on ``executor`` (kept open:
    a process that evaluates again, say every N training steps, keeps its warm workers), else
    on one the reward settings name, made for this call and closed at its end."""
    if not designs:
        raise ConfigError("no designs to evaluate")
    names = [d.name for d in designs]
    if len(set(names)) != len(names):
        raise ConfigError(f"two designs of one name: {sorted(n for n in set(names) if names.count(n) > 1)}")
    outdir.mkdir(parents=True, exist_ok=True)
    templates = Templates.load()
    evals = []
    with contextlib.ExitStack() as stack:
        if executor is None:  # one for every design
            executor = stack.enter_context(contextlib.closing(core.executor_for(core.settings())))
        for design in designs:
            evals.append(evaluate_design(design, config, outdir, templates, executor))
            if progress is not None:
                progress(1)
    doc = summarize(evals, config)
    (outdir / EVAL_JSON).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    (outdir / EVAL_MD).write_text(markdown(doc), encoding="utf-8")
    return doc
