"""``hwtp learn``: warm start, GRPO arms, held-out evaluation, ``OUT/results.json``.

One tokenizer (it depends only on the data) and one warm start, SFT-trained from the first
seed (or one per seed, ``shared_warm_start=False``). Per seed the warm start is evaluated once
(the start every arm shares), then each arm trains a copy of it with the same states, seed and
budget and is evaluated again. These evaluations and trainings are independent units, run in
``jobs`` processes at once.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hwtp.training.learn.data import DataConfig, DesignData, State, prepare_design, sft_rows
from hwtp.training.learn.evaluate import EvalConfig, evaluate
from hwtp.training.learn.grpo import DEFAULT_ARMS, Arm, GRPOSettings, train_arm
from hwtp.training.learn.model import ModelConfig, build_model, build_tokenizer, parameter_count
from hwtp.training.learn.sft import SFTConfig, train_sft
from hwtp.training.learn.stats import interval

#: results.json's format version.
FORMAT = 1
RESULTS = "results.json"
#: The metrics compared before and after (results.json "summary").
METRICS = ("golden_pass", "detection", "invalid")


@dataclass(frozen=True)
class LearnConfig:
    designs: tuple[str, ...]
    held_out_designs: tuple[str, ...] = ()
    seeds: tuple[int, ...] = (0, 1, 2)
    arms: tuple[Arm, ...] = DEFAULT_ARMS
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    grpo: GRPOSettings = field(default_factory=GRPOSettings)
    evaluation: EvalConfig = field(default_factory=EvalConfig)
    sft_plans_per_state: int = 16
    shared_warm_start: bool = True  # one SFT (of the first seed) for every seed: seeds vary GRPO only
    workers: int = 2  # simulator processes per reward pool
    jobs: int = 1  # processes that train arms and evaluate at once

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["arms"] = [a.as_dict() for a in self.arms]
        return out


def _load() -> dict[str, Any]:
    try:
        return {"loadavg": list(os.getloadavg()), "cpus": os.cpu_count()}
    except OSError:
        return {"cpus": os.cpu_count()}


def cpu_seconds() -> float:
    """CPU seconds of this process and its reaped children (the reward workers, once closed)."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _eval_all(
    model: Any, tokenizer: Any, splits: dict[str, list[State]], config: EvalConfig, seed: int
) -> dict[str, Any]:
    return {name: evaluate(model, tokenizer, states, config, seed) for name, states in splits.items() if states}


def summarize_runs(runs: Sequence[dict[str, Any]], arms: Sequence[Arm]) -> dict[str, Any]:
    """Per arm and split: each metric before and after, and its change, across seeds."""
    out: dict[str, Any] = {}
    for arm in arms:
        per_split: dict[str, Any] = {}
        for split in runs[0]["before"] if runs else ():
            rows: dict[str, Any] = {}
            for metric in METRICS:
                before = [r["before"][split][metric] for r in runs]
                after = [r["arms"][arm.name]["after"][split][metric] for r in runs]
                rows[metric] = {
                    "before": interval(before),
                    "after": interval(after),
                    "change": interval([a - b for a, b in zip(after, before, strict=True)]),
                }
            per_split[split] = rows
        zero = [sum(s.get("zero_advantage_groups", 0.0) for s in r["arms"][arm.name]["steps"]) for r in runs]
        steps = [max(1, len(r["arms"][arm.name]["steps"])) for r in runs]
        per_split["zero_advantage_groups"] = interval([z / n for z, n in zip(zero, steps, strict=True)])
        out[arm.name] = per_split
    return out


def run(config: LearnConfig, out: Path, progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """The whole experiment; writes and returns ``OUT/results.json``'s content."""
    import torch

    import hwtp.rewards
    from hwtp.training.learn.plot import plot_results

    torch.set_num_threads(1)  # one thread: on a shared 2-core machine a second one mostly waits
    out.mkdir(parents=True, exist_ok=True)
    started, cpu_started = time.perf_counter(), cpu_seconds()
    states_root = out / "states"
    designs: list[DesignData] = []
    for name in config.designs:
        progress(f"states of {name}")
        designs.append(prepare_design(name, states_root, config.data))
    for name in config.held_out_designs:
        progress(f"states of held-out design {name}")
        designs.append(prepare_design(name, states_root, config.data, held_out_design=True))
    hwtp.rewards.configure(states=[states_root], workers=config.workers)
    train_states = [s for d in designs for s in d.split("train")]
    splits = {
        "held_out": [s for d in designs for s in d.split("held_out")],
        "held_out_design": [s for d in designs for s in d.split("held_out_design")],
        "train": train_states,
    }
    texts = [s.prompt for d in designs for s in d.states] + [p for d in designs for p in d.plans]
    tokenizer = build_tokenizer(texts, config.model.vocab)
    saved = out / "warm-start" / f"seed-{config.seeds[0]}" / "tokenizer.json"
    if saved.is_file():  # a reused warm start keeps the tokenizer it was trained with
        from transformers import PreTrainedTokenizerFast

        tokenizer = PreTrainedTokenizerFast.from_pretrained(saved.parent)
        tokenizer.padding_side = "left"
    lengths = [len(tokenizer(s.prompt, add_special_tokens=False)["input_ids"]) for d in designs for s in d.states]
    results: dict[str, Any] = {
        "format": FORMAT,
        "kind": "hwtp-learn",
        "config": config.as_dict(),
        "designs": {
            d.design: {
                "train_states": len(d.split("train")),
                "held_out_states": len(d.split("held_out")) + len(d.split("held_out_design")),
                "weak_plans": len(d.plans),
                "held_out_design": d.design in config.held_out_designs,
            }
            for d in designs
        },
        "tokenizer": {"vocab": len(tokenizer), "longest_prompt_tokens": max(lengths)},
        "machine": {"platform": platform.platform(), **_load()},
        "runs": [],
    }
    warm_starts: dict[int, dict[str, Any]] = {}
    try:
        for sft_seed in dict.fromkeys(_sft_seed(config, seed) for seed in config.seeds):
            warm = out / "warm-start" / f"seed-{sft_seed}"
            if (warm / "config.json").is_file():  # OUT holds this warm start already: reuse it
                progress(f"reusing the warm start in {warm}")
                model = _load_model(warm)
                warm_starts[sft_seed] = {"seed": sft_seed, "reused": str(warm)}
            else:
                progress(f"warm start (SFT) of seed {sft_seed}")
                model = build_model(tokenizer, config.model, sft_seed)
                t0, c0 = time.perf_counter(), time.process_time()
                rows = sft_rows(designs, config.sft_plans_per_state, sft_seed)
                losses = train_sft(model, tokenizer, rows, config.sft, sft_seed)
                warm_starts[sft_seed] = {
                    "seed": sft_seed,
                    "rows": len(rows),
                    "loss": losses,
                    "seconds": time.perf_counter() - t0,
                    "cpu_seconds": time.process_time() - c0,
                }
                model.save_pretrained(warm)
                tokenizer.save_pretrained(warm)
            results["model"] = {"parameters": parameter_count(model), **config.model.as_dict()}
            del model
        entries: dict[int, dict[str, Any]] = {
            s: {"seed": s, "sft": warm_starts[_sft_seed(config, s)], "arms": {}} for s in config.seeds
        }
        results["unfinished"] = list(entries.values())  # written as it goes: a stopped run keeps what it measured
        units = [Unit(seed, None) for seed in config.seeds]
        units += [Unit(seed, arm) for seed in config.seeds for arm in config.arms]
        job = Job(config, out, train_states, splits)
        for unit, measured in _run_units(job, units, progress):
            entry = entries[unit.seed]
            if unit.arm is None:
                entry["before"], entry["eval_seconds"] = measured["after"], measured["eval_seconds"]
            else:
                entry["arms"][unit.arm.name] = measured
            if "before" in entry and len(entry["arms"]) == len(config.arms):
                results["runs"].append(entry)
                results["runs"].sort(key=lambda r: config.seeds.index(r["seed"]))
                results["unfinished"] = [e for e in results["unfinished"] if e is not entry]
                results["summary"] = summarize_runs(results["runs"], config.arms)
            results["seconds"] = time.perf_counter() - started
            _write(out, results)
        del results["unfinished"]
    finally:
        hwtp.rewards.reset()
    results["machine"]["load_after"] = _load().get("loadavg")
    results["seconds"] = time.perf_counter() - started
    results["cpu_seconds"] = cpu_seconds() - cpu_started
    results["picture"] = plot_results(results, out).name
    _write(out, results)
    return results


def _sft_seed(config: LearnConfig, seed: int) -> int:
    return config.seeds[0] if config.shared_warm_start else seed


@dataclass(frozen=True)
class Unit:
    """One piece of work: evaluate a seed's warm start (``arm`` None), or train and evaluate one arm."""

    seed: int
    arm: Arm | None

    @property
    def name(self) -> str:
        return f"seed {self.seed}: " + ("warm start evaluated" if self.arm is None else f"{self.arm.name} trained")


@dataclass(frozen=True)
class Job:
    """What every unit of one experiment shares (picklable: units may run in other processes)."""

    config: LearnConfig
    out: Path
    train_states: list[State]
    splits: dict[str, list[State]]


def _start_worker(job: Job) -> None:
    """A unit process: one torch thread and its own reward pools on the experiment's states."""
    import torch

    import hwtp.rewards

    torch.set_num_threads(1)
    hwtp.rewards.configure(states=[job.out / "states"], workers=job.config.workers)


def run_unit(job: Job, unit: Unit) -> dict[str, Any]:
    """Do ``unit``: the evaluation of a warm start, or an arm's training and its evaluation."""
    from transformers import PreTrainedTokenizerFast

    config = job.config
    warm = job.out / "warm-start" / f"seed-{_sft_seed(config, unit.seed)}"
    tokenizer = PreTrainedTokenizerFast.from_pretrained(warm)
    tokenizer.padding_side = "left"
    measured: dict[str, Any]
    if unit.arm is None:
        policy, measured = _load_model(warm), {}
    else:
        workdir = job.out / "trainer" / f"seed-{unit.seed}-{unit.arm.name}"
        policy, measured = train_arm(warm, tokenizer, job.train_states, unit.arm, config.grpo, unit.seed, workdir)
    t0 = time.perf_counter()
    measured["after"] = _eval_all(policy, tokenizer, job.splits, config.evaluation, unit.seed)
    measured["eval_seconds"] = time.perf_counter() - t0
    measured["loadavg"] = _load().get("loadavg")
    return measured


def _run_units(job: Job, units: Sequence[Unit], progress: Callable[[str], None]) -> Any:
    """Yield (unit, what it measured) as units finish: in this process with ``jobs`` 1, else in
    ``jobs`` spawned processes (each one torch thread: two processes use two cores, where one
    process with two threads mostly waits on a shared machine)."""
    jobs = min(job.config.jobs, len(units))
    if jobs <= 1:
        for unit in units:
            progress(f"{unit.name.split(':')[0]}: {'evaluating the warm start' if unit.arm is None else unit.arm.name}")
            yield unit, run_unit(job, unit)
        return
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    import hwtp.rewards

    hwtp.rewards.reset()  # the pools live in the unit processes
    progress(f"{len(units)} units in {jobs} processes")
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_start_worker, initargs=(job,)) as pool:
        pending = {pool.submit(run_unit, job, unit): unit for unit in units}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                unit = pending.pop(future)
                measured = future.result()
                progress(unit.name)
                yield unit, measured


def _load_model(folder: Path) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, dtype="float32")


def _write(out: Path, results: dict[str, Any]) -> None:
    tmp = out / (RESULTS + ".tmp")
    tmp.write_text(json.dumps(results, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    tmp.replace(out / RESULTS)
