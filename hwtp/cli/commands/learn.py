"""``hwtp learn``: the GRPO / GRPO-SMu learning experiment on CPU (:mod:`hwtp.training.learn`)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import click

from hwtp.cli.commands.options import AT_LEAST_ONE, OUTPUT_FOLDER, POSITIVE, FiniteFloat
from hwtp.errors import ConfigError
from hwtp.training.learn.data import PROMPTS
from hwtp.training.learn.grpo import ARMS, DEFAULT_ARMS

#: --quick: one seed, few steps, two small designs.
QUICK_DESIGNS = ("counter_en_load", "adder_carry")
QUICK = {"steps": 12, "sft_steps": 100}


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(v for value in values for v in value.split(",") if v)


@click.command("learn")
@click.argument("designs", nargs=-1)
@click.option("--designs", "more", multiple=True, help="More designs (comma-separated); same as the arguments.")
@click.option("--held-out-design", multiple=True, help="Designs only evaluated, never trained on (comma-separated).")
@click.option("-o", "--out", type=OUTPUT_FOLDER, required=True, help="Output folder.")
@click.option("--steps", type=AT_LEAST_ONE, help="GRPO steps per arm and seed.  [default: 30; --quick 12]")
@click.option("--seeds", default=None, help="Comma-separated seeds.  [default: 0,1,2; --quick 0]")
@click.option("--quick", is_flag=True, help="One seed, few steps, two small designs, a shorter warm start.")
@click.option("--sft-steps", type=AT_LEAST_ONE, help="Warm-start (SFT) steps.  [default: 200; --quick 100]")
@click.option("--lr", type=POSITIVE, help="GRPO learning rate.  [default: 5e-4]")
@click.option("--beta", type=FiniteFloat(min=0), help="KL coefficient to the warm start.  [default: 0.02]")
@click.option("--temperature", type=POSITIVE, help="Sampling temperature in training.  [default: 1.0]")
@click.option("-G", "--generations", type=AT_LEAST_ONE, help="Completions per prompt.  [default: 8]")
@click.option("--prompts", type=AT_LEAST_ONE, help="Prompts (states) per GRPO step.  [default: 4]")
@click.option("--eval-samples", type=AT_LEAST_ONE, help="Plans per state in evaluation.  [default: 2]")
@click.option("--held-out", type=AT_LEAST_ONE, help="Held-out mutants per design.  [default: 16]")
@click.option("--train-mutants", type=AT_LEAST_ONE, help="Training mutants per design.  [default: 12]")
@click.option("--weak-plans", type=AT_LEAST_ONE, help="Weak plans per design for the warm start.  [default: 8]")
@click.option("--max-completion", type=AT_LEAST_ONE, help="Longest completion in tokens.  [default: 128]")
@click.option(
    "--shared-warm-start/--warm-start-per-seed",
    default=True,
    show_default=True,
    help="One warm start (the first seed's) for every seed, so seeds vary GRPO only; or one SFT per seed.",
)
@click.option(
    "--prompt",
    type=click.Choice(PROMPTS),
    help="What a prompt shows: the lines that differ from golden, or the whole RTL.  [default: diff]",
)
@click.option(
    "--arms",
    help=f"Comma-separated arms to run, of {', '.join(a.name for a in ARMS)}.  "
    f"[default: {','.join(a.name for a in DEFAULT_ARMS)}]",
)
@click.option("--workers", type=AT_LEAST_ONE, default=2, show_default=True, help="Simulator processes per reward pool.")
@click.option(
    "-j",
    "--jobs",
    type=AT_LEAST_ONE,
    default=2,
    show_default=True,
    help="Processes training arms at once (one torch thread each).",
)
def learn_command(
    designs: tuple[str, ...],
    more: tuple[str, ...],
    held_out_design: tuple[str, ...],
    out: Path,
    steps: int | None,
    seeds: str | None,
    quick: bool,
    sft_steps: int | None,
    lr: float | None,
    beta: float | None,
    temperature: float | None,
    generations: int | None,
    prompts: int | None,
    eval_samples: int | None,
    held_out: int | None,
    train_mutants: int | None,
    weak_plans: int | None,
    max_completion: int | None,
    shared_warm_start: bool,
    prompt: str | None,
    arms: str | None,
    workers: int,
    jobs: int,
) -> None:
    """Warm-start a small model on weak plans, train it with GRPO on hwtp rewards per state and
    per design (GRPO-SMu), and evaluate both on held-out mutants: OUT/results.json and
    OUT/learning_curves.png (``hwtp report OUT`` shows them). Needs ``hwtp[trl]``; CPU only."""
    from hwtp.training.learn import require_trainer

    require_trainer()
    from hwtp.training.learn.experiment import LearnConfig, run

    names = _split(designs) + _split(more) or (QUICK_DESIGNS if quick else ())
    if not names:
        raise ConfigError("hwtp learn: name at least one design (or give --quick)")
    try:
        seed_list = tuple(int(s) for s in (seeds or ("0" if quick else "0,1,2")).split(",") if s.strip())
    except ValueError as exc:
        raise ConfigError(f"--seeds {seeds!r}: expected comma-separated integers") from exc
    if not seed_list:
        raise ConfigError("--seeds: at least one seed")
    for name, value in (
        ("--steps", steps),
        ("--sft-steps", sft_steps),
        ("-G", generations),
        ("--prompts", prompts),
        ("--eval-samples", eval_samples),
        ("--held-out", held_out),
        ("--train-mutants", train_mutants),
        ("--weak-plans", weak_plans),
        ("--max-completion", max_completion),
    ):
        if value is not None and value < 1:
            raise ConfigError(f"{name} {value}: at least 1")
    if generations is not None and generations < 2:
        raise ConfigError(f"-G {generations}: GRPO needs at least 2 completions per prompt")
    by_name = {a.name: a for a in ARMS}
    arm_names = _split((arms,)) if arms else tuple(a.name for a in DEFAULT_ARMS)
    unknown = [a for a in arm_names if a not in by_name]
    if unknown or not arm_names:
        raise ConfigError(f"--arms {arms!r}: unknown arm(s) {', '.join(unknown)} (valid: {', '.join(by_name)})")
    config = LearnConfig(
        designs=names,
        arms=tuple(by_name[a] for a in dict.fromkeys(arm_names)),
        held_out_designs=_split(held_out_design),
        seeds=seed_list,
        workers=workers,
        jobs=jobs,
        shared_warm_start=shared_warm_start,
    )
    given: dict[str, Any] = {
        "steps": steps if steps is not None else (QUICK["steps"] if quick else None),
        "lr": lr,
        "beta": beta,
        "temperature": temperature,
        "generations": generations,
        "prompts": prompts,
        "max_completion": max_completion,
    }
    grpo = dataclasses.replace(config.grpo, **{k: v for k, v in given.items() if v is not None})
    sft = dataclasses.replace(config.sft, steps=sft_steps or (QUICK["sft_steps"] if quick else config.sft.steps))
    evaluation = dataclasses.replace(
        config.evaluation,
        samples=eval_samples or config.evaluation.samples,
        max_new_tokens=max_completion or config.evaluation.max_new_tokens,
    )
    data = dataclasses.replace(
        config.data,
        held_out=held_out or config.data.held_out,
        train_mutants=train_mutants or config.data.train_mutants,
        weak_plans=weak_plans or config.data.weak_plans,
        prompt=prompt or config.data.prompt,
    )
    config = dataclasses.replace(config, grpo=grpo, sft=sft, evaluation=evaluation, data=data)
    start = time.monotonic()

    def progress(message: str) -> None:
        click.echo(f"[{time.monotonic() - start:6.0f} s] {message}", err=True)

    results = run(config, out, progress)
    click.echo(summary_table(results))
    click.echo(f"results in {out / 'results.json'}; picture {out / results['picture']}")


def summary_table(results: dict[str, object]) -> str:
    """The before/after table of a results.json (markdown)."""
    from hwtp.training.learn.report import table

    return table(results)
