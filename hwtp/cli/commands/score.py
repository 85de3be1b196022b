"""``hwtp score``: rewards for plans x states, with a kill matrix."""

from __future__ import annotations

import json
import math
from pathlib import Path

import click

from hwtp import outputs
from hwtp.cli.commands.executors import executor_options
from hwtp.cli.commands.options import (
    AT_LEAST_ONE,
    OUTPUT_FILE,
    POSITIVE,
    read_stdin,
    reward_scheme_options,
    trust_option,
)
from hwtp.mutators import mutantset
from hwtp.mutators.mutantset import GOLDEN
from hwtp.plans.files import read_plans
from hwtp.progress import progress
from hwtp.scoring.scheme import make_scheme, with_reference
from hwtp.scoring.score import Outcome, RewardLevels, ScoreConfig, Scores, score
from hwtp.sim.cpus import usable_cpus
from hwtp.sim.executors.choice import make_executor
from hwtp.sim.job import Limits

_CELL = {
    Outcome.PASSED: ".",
    Outcome.DETECTED: "K",
    Outcome.GOLDEN_FAIL: "F",
    Outcome.INVALID: "I",
    Outcome.TIMEOUT: "T",
    Outcome.ERROR: "E",
}


def _levels(_ctx: click.Context, _param: click.Parameter, text: str) -> RewardLevels:
    """``--reward-levels``, read as the option is (before any work): three finite numbers."""
    try:
        levels = [float(x) for x in text.split(",")]
        invalid, golden_pass, detect = levels
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected three numbers INVALID,PASS,DETECT") from None
    for name, value in zip(("INVALID", "PASS", "DETECT"), levels, strict=True):
        if not math.isfinite(value):
            raise click.BadParameter(f"{text!r}: {name} is {value}, not a finite number")
    return RewardLevels(invalid, golden_pass, detect)


def kill_matrix(scores: Scores) -> str:
    """Plans x states: . passed, K detected, F golden-fail, I invalid, T timeout, E error."""
    cells = {(r.plan, r.state): _CELL[r.outcome] for r in scores.results}
    width = max((len(p) for p in scores.plans), default=4)
    states = [s for s in scores.states if any((p, s) in cells for p in scores.plans)]
    lines = [f"{'':<{width}}  " + "".join("g" if s == GOLDEN else "m" for s in states)]
    for plan in scores.plans:
        lines.append(f"{plan:<{width}}  " + "".join(cells.get((plan, s), " ") for s in states))
    return "\n".join(lines)


@click.command("score")
@click.argument("mutdir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--plans",
    "plan_refs",
    multiple=True,
    required=True,
    help="Plan file, folder of plans (or hwtp plan output), or '-' for stdin. Repeatable.",
)
@click.option("--states", default="all", show_default=True, help="all, golden, or comma-separated mutant ids.")
@click.option("--full-matrix", is_flag=True, help="Score plans from hwtp plan on every state too.")
@click.option("--json", "json_out", type=OUTPUT_FILE, help="Write scores JSON here.")
@click.option("-j", "--jobs", type=AT_LEAST_ONE, default=usable_cpus(), show_default=True)
@click.option("--isolated", is_flag=True, help="Run each evaluation in its own simulator process.")
@click.option(
    "--max-cycles", type=AT_LEAST_ONE, default=100_000, show_default=True, help="Simulated cycles per evaluation."
)
@click.option(
    "--timeout",
    "wall_s",
    type=POSITIVE,
    default=30.0,
    show_default=True,
    help="Wall-clock s per evaluation (simulator start-up not counted).",
)
@click.option(
    "--startup-timeout",
    "startup_s",
    type=POSITIVE,
    default=60.0,
    show_default=True,
    help=(
        "CPU s for a simulator process to start, until the harness is ready "
        "(a wall-clock backstop of 10x + 30 s catches one that is stuck or starved)."
    ),
)
@click.option(
    "--reward-levels", default="0,1,2", show_default=True, callback=_levels, help="Rewards INVALID,PASS,DETECT."
)
@click.option("--sim", "simulator", default="verilator", show_default=True)
@click.option(
    "--diagnose",
    is_flag=True,
    help="Also say per (plan, mutant) whether the mutant was activated, "
    "propagated to an output and detected (a build with activation probes; rewards unchanged).",
)
@reward_scheme_options
@executor_options
@trust_option
def score_command(
    mutdir: Path,
    plan_refs: tuple[str, ...],
    states: str,
    full_matrix: bool,
    json_out: Path | None,
    jobs: int,
    isolated: bool,
    max_cycles: int,
    wall_s: float,
    startup_s: float,
    reward_levels: RewardLevels,
    simulator: str,
    diagnose: bool,
    executor: str,
    ray_address: str | None,
    ray_cpus: float | None,
    ray_chunk: int | None,
    reward_scheme: str | None,
    reward_penalty: float | None,
    reference_suite: Path | None,
) -> None:
    """Score test plans on the golden design and its mutants (MUTDIR from hwtp mutate)."""
    stdin = read_stdin() if "-" in plan_refs else None
    scheme = make_scheme(reward_scheme, reward_penalty, reference_suite)  # bad options fail before loading
    mutant_set = mutantset.load(mutdir)
    scheme = with_reference(scheme, reference_suite, mutant_set)
    plans = read_plans(list(plan_refs), stdin)
    wanted = None if states == "all" else tuple(s.strip() for s in states.split(",") if s.strip())
    config = ScoreConfig(
        states=wanted,
        full_matrix=full_matrix,
        jobs=jobs,
        isolated=isolated,
        limits=Limits(max_cycles=max_cycles, wall_s=wall_s, startup_s=startup_s),
        rewards=reward_levels,
        simulator=simulator,
        diagnose=diagnose,
        scheme=scheme,
    )
    runner = make_executor(executor, ray_address, config.jobs, isolated, ray_cpus, ray_chunk)
    total = len(plans) * (1 + len(mutant_set.valid))
    try:
        with progress(total, "scoring") as tick:
            scores = score(mutant_set, plans, config, progress=tick, executor=runner)
    finally:
        runner.close()
    if json_out:
        outputs.write_text(json_out, json.dumps(scores.as_dict(), indent=2) + "\n")
    click.echo(kill_matrix(scores))
    rate = scores.evaluations / scores.seconds if scores.seconds else 0.0
    click.echo(
        f"{scores.design}: {len(scores.results)} samples, {scores.evaluations} evaluations in "
        f"{scores.seconds:.2f} s ({rate:.0f}/s); golden pass rate {scores.golden_pass_rate:.0%}, "
        f"mutation detection rate {scores.detection_rate:.0%}"
        + (f"; reward scheme {scheme.name}" if scheme.dense else "")
    )
    invalid = [r for r in scores.results if r.outcome == Outcome.INVALID]
    for r in {r.plan: r for r in invalid}.values():
        click.echo(f"invalid {r.plan}: {(r.detail or {}).get('reason')}")
