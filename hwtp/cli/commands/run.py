"""``hwtp run`` and ``hwtp status``: the whole loop on a resumable run folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from hwtp import outputs
from hwtp.cli.commands.executors import executor_options
from hwtp.cli.commands.options import (
    OUTPUT_FILE,
    OUTPUT_FOLDER,
    designs_dir_option,
    endpoint_options,
    reward_scheme_options,
    trust_option,
)
from hwtp.config import CONFIG_NAME, load_run
from hwtp.errors import DesignError, PolicyUnavailable
from hwtp.progress import Tasks, reporting
from hwtp.run import loop
from hwtp.run.config import STAGES, resolve
from hwtp.sim.executors.choice import make_executor
from hwtp.training.export import FORMATS

_DEFAULT_CONFIG = Path(CONFIG_NAME)


class Progress:
    """The run's events on stderr: a line per design and stage, counted work through
    :class:`hwtp.progress.Tasks` (a bar with rate and time left on a TTY, plain lines otherwise)."""

    def __init__(self) -> None:
        self.tasks = Tasks()

    def __call__(self, kind: str, **data: Any) -> None:
        if kind == "progress":
            self.tasks(f"  {data['design']}: {data['stage']}", data["done"], data["total"])
            return
        self.tasks.close()
        if kind == "design":
            click.echo(f"[{data['index'] + 1}/{data['total']}] {data['ref']}", err=True)
        elif kind == "stage":
            click.echo(f"  {data['design']}: {data['stage']}", err=True)
        elif kind == "note":
            click.echo(f"  {data['design']}: {data['text']}", err=True)


def print_summary(summary: dict[str, Any]) -> None:
    rows = [*summary["designs"].items(), ("overall", summary["overall"])]
    click.echo(
        f"{'design':<22}{'samples':>8}{'golden pass':>12}{'detect':>8}{'mean r':>8}"
        f"{'zero-adv state':>15}{'design':>8}  rewards"
    )
    for name, n in rows:
        zero = n.get("zero_advantage_groups", {})
        hist = " ".join(f"{k}:{v}" for k, v in n["reward_histogram"].items())
        click.echo(
            f"{name:<22}{n['samples']:>8}{n['golden_pass_rate']:>12.0%}{n['detection_rate']:>8.0%}"
            f"{n['mean_reward']:>8.2f}{zero.get('state', 0):>15.0%}{zero.get('design', 0):>8.0%}  {hist}"
        )
    o = summary["overall"]
    rate = f"{o['evaluations_per_s']:.0f} evaluations/s" if o.get("evaluations_per_s") else "no new simulations"
    c = summary["counters"]
    click.echo(
        f"{rate}; simulations {c.get('simulations', 0)} (+{c.get('simulations_ingested', 0)} recovered), "
        f"policy samples {c.get('policy_samples', 0)}"
        + (f" ({c['policy_truncated']} truncated, finish_reason=length)" if c.get("policy_truncated") else "")
        + f", LLM tokens {o.get('llm_tokens', 0)}"
    )


@click.command("run")
@click.argument("designs", nargs=-1)
@click.option("-o", "--out", "rundir", required=True, type=OUTPUT_FOLDER)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Configuration file (section 'run'); default ./hwtp.yaml when present.",
)
@click.option("--states", type=int, help="Mutant states per design (plus golden). [8]")
@click.option("-G", "samples", type=int, help="Plans per state. [8]")
@click.option("--seed", type=int)
@click.option("--witness-cycles", type=int)
@click.option("--policy", type=click.Choice(["random", "openai", "replay"]))
@click.option("--from", "replay_from")
@click.option("--preset")
@click.option("--group-by", type=click.Choice(["state", "design", "batch"]))
@click.option("--format", "formats", multiple=True, type=click.Choice(FORMATS), help="Export format (repeatable).")
@click.option("--batch-size", type=int)
@click.option("-j", "--jobs", type=int)
@click.option("--max-response-bytes", type=int, help="Largest endpoint response read. [4194304]")
@click.option("--dry-run", is_flag=True, help="Print the resolved configuration and the planned work; run nothing.")
@click.option("--force-new-stage", type=click.Choice(STAGES), help="Accept a changed configuration; redo from STAGE.")
@click.option("--json", "json_out", type=OUTPUT_FILE, help="Write the summary here.")
@executor_options
@reward_scheme_options
@endpoint_options
@trust_option
@designs_dir_option
def run_command(
    designs: tuple[str, ...],
    rundir: Path,
    config_file: Path | None,
    dry_run: bool,
    force_new_stage: str | None,
    json_out: Path | None,
    executor: str,
    ray_address: str | None,
    ray_cpus: float | None,
    ray_chunk: int | None,
    **options: Any,
) -> None:
    """The whole loop: mutate, plan, score, advantage and export, for each DESIGN (default:
    every shipped design) into RUNDIR. Rerun the same command to resume."""
    path = config_file or (_DEFAULT_CONFIG if _DEFAULT_CONFIG.is_file() else None)
    file_values = load_run(path) if path else {}
    if options["policy"] is None and options["endpoint"] and "policy" not in file_values:
        options["policy"] = "openai"
    if options.get("reference_suite") is not None:
        options["reference_suite"] = str(options["reference_suite"])
    config = resolve(file_values, {"designs": designs, **options})
    try:
        loop.preflight(config)  # before anything is written: a wrong name leaves no run behind
    except DesignError as exc:
        where = None if designs else getattr(file_values, "where", {}).get("designs")
        if where:
            raise DesignError(f"{where}: {exc}") from exc
        raise
    if dry_run:
        click.echo(json.dumps(loop.dry_run(config), indent=2))
        return
    runner = make_executor(executor, ray_address, config.jobs, cpus=ray_cpus, chunk=ray_chunk)
    progress = Progress()
    try:
        with reporting(progress.tasks):  # the witness search inside the mutate stage
            summary = loop.run(config, rundir, force_new_stage, progress, runner)
    finally:
        runner.close()
    progress.tasks.close()
    print_summary(summary)
    if json_out:
        outputs.write_text(json_out, json.dumps(summary, indent=2) + "\n")
    stop = summary.get("incomplete")
    if stop:
        later = f"; not started: {', '.join(stop['not_started'])}" if stop["not_started"] else ""
        raise PolicyUnavailable(
            f"planning {stop['design']} could not finish: {stop['failed']} samples could not be produced "
            f"({stop['missing']} of {stop['total']} still missing): {stop['reason']}. Nothing was scored, "
            f"advantaged or exported for {stop['design']}{later}; rerun the same command to ask for the "
            f"missing samples"
        )
    click.echo(f"exports in {rundir / 'export'}")


@click.command("status")
@click.argument("rundir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True)
def status_command(rundir: Path, as_json: bool) -> None:
    """Per design and stage: done/total, failures, and the run's numbers."""
    report = loop.status(rundir)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(f"{'design':<22}{'mutate':>8}{'plan':>12}{'score evals':>12}{'failures':>9}{'adv':>5}{'export':>7}")
    for name, s in report["stages"].items():
        plan = f"{s['plan']['done']}/{s['plan']['total']}"
        click.echo(
            f"{name:<22}{'done' if s['mutate']['done'] else '-':>8}{plan:>12}{s['score']['done']:>12}"
            f"{s['score']['failures'] + s['plan']['invalid']:>9}{'yes' if s['advantage'] else '-':>5}"
            f"{'yes' if s['export'] else '-':>7}"
        )
    if report["summary"]["designs"]:
        print_summary(report["summary"])
