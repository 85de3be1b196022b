"""``hwtp run``: mutate, plan, score, advantage and export, resumable on the run store.

Every stage reads its input from the store and writes its output in transactions, so a
rerun continues where a previous one stopped (Ctrl-C or ``kill -9`` included) without
losing or repeating work: plans are stored per state as they arrive, every evaluation as
soon as the harness has written it (results left by a killed run are ingested, not
re-simulated), and the later stages are pure functions of the store.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from hwtp.errors import StoreError
from hwtp.mutators import engine, mutantset
from hwtp.mutators.mutantset import GOLDEN
from hwtp.plans.files import PlanInput, plan_input
from hwtp.policy.planning import SampleFailure, failure_reasons, plan_states
from hwtp.policy.policies import Policy, make_policy
from hwtp.policy.prompt import Templates
from hwtp.rtl.design import Design, load_design, shipped_names
from hwtp.run.config import STAGES, RunConfig, changes, first_stage
from hwtp.run.store import AdvantageRow, DesignRow, PlanRow, StateRow, Store, open_store
from hwtp.scoring.scheme import RewardScheme, make_scheme, with_reference
from hwtp.scoring.score import (
    INDETERMINATE,
    RewardLevels,
    SampleResult,
    ScoreConfig,
    assemble,
    prepare,
    rates,
)
from hwtp.sim.executors.base import Executor, schemata_targets
from hwtp.sim.executors.local import LocalExecutor
from hwtp.sim.runner import EvalResult, ResultTail
from hwtp.training.advantage import advantage_records, preset, summarize
from hwtp.training.export import ExportOptions, base_records, check_format_dependencies, write_export

Event = Callable[..., None]


def _quiet(*_args: Any, **_kwargs: Any) -> None:
    return None


def design_refs(config: RunConfig) -> list[str]:
    return list(config.designs) or shipped_names()


def preflight(config: RunConfig) -> list[Design]:
    """Everything checkable before any work, so bad input fails at once and leaves nothing in
    the run folder: the export formats' optional dependencies and every design reference."""
    check_format_dependencies(config.formats)
    return [load_design(ref) for ref in design_refs(config)]


def check_config(store: Store, config: RunConfig, force: str | None) -> None:
    """Refuse a changed configuration unless ``force`` names a stage early enough to redo it."""
    old = store.get_meta("config")
    new = config.fingerprint()
    if old is None or not store.finished_stages():  # nothing done yet: nothing to protect
        store.set_meta("config", new)
        return
    diff = changes(old, new)
    if not diff and force is None:
        return
    if diff:
        stage = first_stage(diff)
        what = "; ".join(f"{k}: {a!r} -> {b!r}" for k, a, b in diff)
        if force is None or STAGES.index(force) > STAGES.index(stage):
            raise StoreError(
                f"{store.root}: the configuration changed ({what}); rerun with "
                f"--force-new-stage {stage} to redo from {stage}, or use a new run folder"
            )
    store.reset_stages(STAGES[STAGES.index(force or "export") :])
    if force == "mutate":
        store.forget_designs()
    store.set_meta("config", new)


def mutate_stage(store: Store, ref: str, config: RunConfig, on_event: Event) -> mutantset.MutantSet:
    design = load_design(ref)
    row = store.design_row(design.name)
    mutdir = store.root / "designs" / design.name / "mutants"
    if row and store.stage_done(design.name, "mutate") and (mutdir / mutantset.MUTANTS_JSON).is_file():
        return mutantset.load(mutdir)
    on_event("stage", design=design.name, stage="mutate")
    result = engine.mutate(
        design,
        engine.MutationConfig(
            n=config.states, seed=config.seed, jobs=config.jobs, witness_cycles=config.witness_cycles, formal="auto"
        ),
    )
    mutantset.write(result, mutdir)
    states = [StateRow(GOLDEN, 0), *(StateRow(m.id, m.index) for m in result.states)]  # non-terminating left out
    if result.nonterminating:
        on_event("note", design=design.name, text=f"{len(result.nonterminating)} non-terminating mutant(s) left out")
        store.bump("nonterminating_mutants", len(result.nonterminating))
    if result.proved_equivalent:  # hwtp.mutators.formal: no plan can detect them, so they are no states
        on_event("note", design=design.name,
                 text=f"{len(result.proved_equivalent)} mutant(s) proved equivalent by Yosys left out")
        store.bump("equivalent_mutants", len(result.proved_equivalent))
    relative = str(mutdir.relative_to(store.root))
    row = DesignRow(design.name, ref, design.content_hash, relative, result.set_hash)
    store.put_design(row, states)
    return mutantset.load(mutdir)


def run_policy(config: RunConfig, mutant_set: mutantset.MutantSet, executor: Executor | None = None) -> Policy:
    """The configured policy (:func:`hwtp.policy.policies.make_policy`), simulating on
    ``executor`` (default: this machine, ``config.jobs`` processes)."""
    return make_policy(config.policy_spec(), mutant_set, executor or LocalExecutor(config.jobs))


def plan_stage(
    store: Store, mutant_set: mutantset.MutantSet, config: RunConfig, on_event: Event, executor: Executor | None = None
) -> list[SampleFailure]:
    """Store G plans per state. Returns the samples the policy could not produce (an endpoint
    that failed after its retries): they get no record, planning of the design stops after
    the chunk that had them, and the stage is not done, so a rerun asks for them again."""
    name = mutant_set.design.name
    if store.stage_done(name, "plan"):
        return []
    have = store.plan_keys(name)
    states = store.states(name)
    missing = [s for s in states if any((s, k) not in have for k in range(config.samples))]
    policy = run_policy(config, mutant_set, executor)
    templates = Templates.load()
    # Chunks: one batched simulation for the offline policies; `concurrency` concurrent
    # requests for an endpoint. Each chunk is stored in one transaction as it completes.
    size = max(1, config.concurrency) if config.policy == "openai" else max(1, len(missing))
    failures: list[SampleFailure] = []
    for start in range(0, len(missing), size):
        chunk = missing[start : start + size]
        on_event("progress", design=name, stage="plan", done=len(states) - len(missing) + start, total=len(states))
        records = plan_states(mutant_set, chunk, config.samples, policy, templates, failures)
        rows = [PlanRow(name, r.state, r.sample, r.plan, r) for r in records if (r.state, r.sample) not in have]
        store.put_plans(rows)
        store.bump("policy_samples", len(rows))
        fresh = [r for r in records if not r.generated.from_cache and r.generated.usage]
        if fresh:
            store.bump("llm_completions", len(fresh))
            store.bump("llm_tokens", sum(sum((r.generated.usage or {}).values()) for r in fresh))
        truncated = sum(1 for r in rows if r.record.generated.finish_reason == "length")
        if truncated:
            store.bump("policy_truncated", truncated)
        if failures:  # the endpoint failed after its retries: asking on would only wait again
            return failures
    store.finish_stage(name, "plan")
    return []


def plan_inputs(store: Store, design: str) -> list[PlanInput]:
    return [plan_input(row.record) for row in store.plans(design)]


def _ingest_leftovers(store: Store, design: str, workdir: Path, wanted: set[str]) -> int:
    """Results written by a simulator of a killed run: stored, not simulated again."""
    count = 0
    for path in sorted(workdir.rglob("results.jsonl")):
        tail = ResultTail(path)
        for result in tail.poll():
            if result.id in wanted and store.put_evaluation(design, result):
                count += 1
    if workdir.exists():
        shutil.rmtree(workdir)
    return count


def score_stage(
    store: Store, mutant_set: mutantset.MutantSet, config: RunConfig, on_event: Event, executor: Executor | None = None
) -> float:
    """Score the stored plans (on ``executor``, default this machine); returns the seconds
    spent simulating in this invocation. Each result is stored as it arrives, whichever
    executor ran it, so a killed run resumes with only the missing evaluations."""
    name = mutant_set.design.name
    if store.stage_done(name, "score"):
        return 0.0
    score_config = ScoreConfig(jobs=config.jobs, scheme=run_scheme(config, mutant_set))
    prepared = prepare(mutant_set, plan_inputs(store, name), score_config)
    workdir = store.root / "work" / name
    store.bump("simulations_ingested", _ingest_leftovers(store, name, workdir, set(prepared.evaluations)))
    stored = store.evaluations(name)
    pending = [ev for key, ev in prepared.evaluations.items() if key not in stored]
    seconds = 0.0
    if pending:
        total, done = len(prepared.evaluations), len(prepared.evaluations) - len(pending)
        on_event("progress", design=name, stage="score", done=done, total=total)
        def keep(result: EvalResult) -> None:  # called from the simulator-watch threads
            store.put_evaluation(name, result, counter="simulations")

        def tick(n: int) -> None:
            nonlocal done
            done += n
            on_event("progress", design=name, stage="score", done=done, total=total)

        start = time.perf_counter()
        schemata = schemata_targets(mutant_set)
        workdir.mkdir(parents=True, exist_ok=True)
        (executor or LocalExecutor(config.jobs)).run(
            schemata, pending, score_config.limits, progress=tick, on_result=keep, workdir=workdir
        )
        seconds = time.perf_counter() - start
        shutil.rmtree(workdir, ignore_errors=True)
    with contextlib.suppress(OSError):
        workdir.parent.rmdir()  # the work folder, once empty
    store.put_samples(name, assemble(prepared, store.evaluations(name), RewardLevels()))
    return seconds


def run_scheme(config: RunConfig, mutant_set: mutantset.MutantSet | None = None) -> RewardScheme:
    """The run's reward scheme; with ``mutant_set``, with the design's reference suite (incremental)."""
    reference = Path(config.reference_suite) if config.reference_suite else None
    scheme = make_scheme(config.reward_scheme, config.reward_penalty, reference)
    return scheme if mutant_set is None else with_reference(scheme, reference, mutant_set)


def score_doc(
    store: Store, design: str, samples: list[SampleResult], scheme: RewardScheme | None = None
) -> dict[str, Any]:
    """``design``'s samples in the scores JSON shape (``hwtp score --json``)."""
    row = store.design_row(design)
    return {
        "design": design,
        "mutant_set": row.set_hash if row else "",
        "rewards": RewardLevels().as_dict(),
        "reward_scheme": (scheme or RewardScheme()).as_dict(),
        "results": [s.as_dict() for s in samples],
    }


def score_docs(store: Store, designs: list[str], scheme: RewardScheme | None = None) -> list[dict[str, Any]]:
    return [score_doc(store, d, store.samples(d), scheme) for d in designs]


def advantage_stage(store: Store, designs: list[str], config: RunConfig) -> list[dict[str, Any]]:
    docs = score_docs(store, designs, run_scheme(config))
    records = advantage_records(docs, preset(config.preset), by=config.group_by)  # type: ignore[arg-type]
    hashes = {d["design"]: d["mutant_set"] for d in docs}
    for r in records:
        r["mutant_set"] = hashes[r["design"]]
    store.put_advantages(
        [AdvantageRow(r["design"], r["plan"], r["state"], r["group"], float(r["advantage"])) for r in records], designs
    )
    return records


def export_stage(store: Store, designs: list[str], config: RunConfig, records: list[dict[str, Any]]) -> None:
    plans = {(row.design, row.plan): row.record for d in designs for row in store.plans(d)}
    metadata = {
        "preset": config.preset,
        "group_by": config.group_by,
        "seed": config.seed,
        "policy": config.policy,
        "reward_scheme": run_scheme(config).as_dict(),
    }
    rows = base_records(records, plans, metadata)
    for fmt in config.formats:
        out = store.root / "export" / fmt
        if out.exists():
            shutil.rmtree(out)
        manifest = write_export(rows, ExportOptions(fmt, config.batch_size, tuple(metadata.items())), out)
        store.put_export(fmt, json.loads(manifest.read_text(encoding="utf-8")), designs)


def run(
    config: RunConfig,
    rundir: Path,
    force: str | None = None,
    on_event: Event = _quiet,
    executor: Executor | None = None,
) -> dict[str, Any]:
    """The whole loop on ``rundir`` (simulating on ``executor``, default this machine); returns
    the summary (see :func:`summary`), with ``incomplete`` (see :func:`incomplete_planning`)
    when the policy could not produce every sample of a design: the run stops there."""
    preflight(config)
    executor = executor or LocalExecutor(config.jobs)
    with open_store(rundir) as store:
        check_config(store, config, force)
        names: list[str] = []
        seconds = 0.0
        refs = design_refs(config)
        for i, ref in enumerate(refs):
            on_event("design", index=i, total=len(refs), ref=ref)
            mutant_set = mutate_stage(store, ref, config, on_event)
            failures = plan_stage(store, mutant_set, config, on_event, executor)
            if failures:  # nothing downstream for it, no later design: see incomplete_planning
                return summary(store, names, config, seconds) | {
                    "incomplete": incomplete_planning(store, mutant_set.design.name, failures, config, refs[i + 1 :])
                }
            names.append(mutant_set.design.name)
            seconds += score_stage(store, mutant_set, config, on_event, executor)
        on_event("stage", design="*", stage="advantage")
        records = advantage_stage(store, names, config)
        on_event("stage", design="*", stage="export")
        export_stage(store, names, config, records)
        store.set_meta("designs", names)
        return summary(store, names, config, seconds)


def incomplete_planning(
    store: Store, design: str, failures: list[SampleFailure], config: RunConfig, later: list[str]
) -> dict[str, Any]:
    """What a run stopped by the policy reports: the design whose samples could not all be
    produced, how many are missing and why, and the designs not started. Designs before it
    are scored; nothing is advantaged or exported until a rerun has every sample."""
    total = len(store.states(design)) * config.samples
    missing = total - len(store.plan_keys(design))
    return {
        "design": design,
        "failed": len(failures),
        "missing": missing,
        "total": total,
        "reason": failure_reasons(failures),
        "not_started": later,
    }


def summary(store: Store, designs: list[str], config: RunConfig, sim_seconds: float = 0.0) -> dict[str, Any]:
    """Per design and overall: golden pass rate, detection rate, mean reward, reward
    histogram, zero-advantage groups by state vs design, evaluations/s, LLM tokens."""
    samples = {d: store.samples(d) for d in designs}
    docs = {d: score_doc(store, d, samples[d]) for d in designs}
    cfg = preset(config.preset)
    per_design = {d: _numbers([samples[d]], summarize([docs[d]], cfg) if samples[d] else None) for d in designs}
    some = [d for d in designs if samples[d]]
    overall = _numbers([samples[d] for d in designs], summarize([docs[d] for d in some], cfg) if some else None)
    counters = store.counters()
    simulated = counters.get("simulations", 0)
    overall["evaluations_per_s"] = round(simulated / sim_seconds, 1) if sim_seconds else None
    overall["llm_tokens"] = counters.get("llm_tokens", 0)
    return {"designs": per_design, "overall": overall, "counters": counters}


def _numbers(by_design: list[list[SampleResult]], zero: dict[str, Any] | None) -> dict[str, Any]:
    """The summary numbers of the samples of some designs; the rates are the scorer's own
    (:func:`hwtp.scoring.score.rates`, plans counted per design)."""
    results = [r for rs in by_design for r in rs]
    golden, detect = rates(by_design)
    hist: dict[str, int] = {}
    for r in results:
        hist[f"{r.reward:g}"] = hist.get(f"{r.reward:g}", 0) + 1
    return {
        "samples": len(results),
        "golden_pass_rate": golden,
        "detection_rate": detect,
        "mean_reward": sum(r.reward for r in results) / len(results) if results else 0.0,
        "reward_histogram": dict(sorted(hist.items())),
        "zero_advantage_groups": {k: round(v.share, 4) for k, v in zero.items()} if zero else {},
    }


def status(rundir: Path) -> dict[str, Any]:
    """Per design and stage: done/total and failures, plus the summary numbers."""
    with open_store(rundir, readonly=True) as store:
        raw = store.get_meta("config")
        if raw is None:
            raise StoreError(f"{rundir}: no run has started here")
        config = RunConfig(**{**raw, "designs": tuple(raw["designs"]), "formats": tuple(raw["formats"])})
        names = store.get_meta("designs") or [load_design(r).name for r in design_refs(config)]
        out: dict[str, Any] = {}
        for name in names:
            states = store.states(name)
            plans = store.plans(name)
            samples = store.samples(name)
            out[name] = {
                "mutate": {"done": store.stage_done(name, "mutate"), "states": len(states)},
                "plan": {
                    "done": len(plans),
                    "total": len(states) * config.samples,
                    "invalid": sum(1 for p in plans if p.record.error),
                },
                "score": {
                    "done": store.evaluation_count(name),
                    "samples": len(samples),
                    "failures": sum(1 for s in samples if s.outcome in INDETERMINATE),
                },
                "advantage": store.stage_done(name, "advantage"),
                "export": store.stage_done(name, "export"),
            }
        return {"stages": out, "summary": summary(store, [n for n in names if store.samples(n)], config)}


def dry_run(config: RunConfig) -> dict[str, Any]:
    """The resolved configuration and the planned amount of work."""
    refs = design_refs(config)
    designs = preflight(config)
    states = len(designs) * (config.states + 1)
    requests = states if config.policy == "openai" else 0
    evaluations = len(designs) * config.samples * (1 + 2 * config.states)
    return {
        "config": replace(config, designs=tuple(refs)).fingerprint() | {"jobs": config.jobs},
        "work": {
            "designs": len(designs),
            "states": states,
            "plans": states * config.samples,
            "llm_requests": requests,
            "evaluations_at_most": evaluations,
        },
    }
