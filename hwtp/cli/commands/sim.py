"""``hwtp sim``: run one test plan on one design."""

from __future__ import annotations

import json
from pathlib import Path

import click

from hwtp import outputs
from hwtp.cli.commands.options import OUTPUT_FILE, design_options, read_stdin, resolve_design, trust_option
from hwtp.errors import EXIT_GATE, DesignError, PlanError, SimulationError
from hwtp.plans.format import load_plan_file, parse_plan
from hwtp.sim.backends import DEFAULT_BACKEND, backend_names
from hwtp.sim.simulate import SimReport, describe_mismatch, simulate


@click.command()
@click.argument("design")
@click.argument("plan", required=False)
@design_options
@click.option(
    "--json",
    "json_out",
    type=OUTPUT_FILE,
    help="Also write the report as JSON to this file ('-' for stdout).",
)
@click.option(
    "--sim", "simulator", type=click.Choice(backend_names()), default=DEFAULT_BACKEND, show_default=True,
    help="Simulator backend.",
)
@trust_option
@click.pass_context
def sim(
    ctx: click.Context,
    design: str,
    plan: str | None,
    top: str | None,
    clock_spec: str | None,
    reset_spec: str | None,
    json_out: Path | None,
    simulator: str,
) -> None:
    """Run test PLAN on DESIGN (a shipped name, a design folder, or a Verilog file with --top).

    PLAN defaults to the design's plans/reference.yaml; '-' reads it from stdin.
    Exit 0 when the plan passes, 1 when it fails, 2 when the plan or design is invalid.
    """
    loaded = resolve_design(design, top, clock_spec, reset_spec)
    if plan == "-":
        parsed = parse_plan(read_stdin(), source="<stdin>")
    else:
        path = Path(plan) if plan else loaded.root / "plans" / "reference.yaml"
        if plan is None and not path.is_file():
            raise PlanError(f"design {loaded.name} has no plans/reference.yaml; give a PLAN")
        parsed = load_plan_file(path)
    report = simulate(loaded, parsed, simulator=simulator)
    if json_out is not None:
        text = json.dumps(report.as_dict(), indent=2)
        if str(json_out) == "-":
            click.echo(text)
        else:
            outputs.write_text(json_out, text + "\n")
    if str(json_out) != "-":
        _print_report(report)
    if report.status == "error" and report.fault == "design":  # $finish, $fatal, a combinational loop
        raise DesignError(f"{loaded.name}: {report.reason}")
    if report.status == "error":
        raise SimulationError(f"simulation of {loaded.name} failed: {report.reason}")
    if not report.passed:
        ctx.exit(EXIT_GATE)


def _print_report(report: SimReport) -> None:
    for test in report.tests:
        m = test.get("mismatch")
        if test.get("passed"):
            click.echo(f"  PASS  {test['name']}")
        elif m:
            click.echo(f"  FAIL  {test['name']}: {describe_mismatch(m)}")
        else:
            click.echo(f"  ----  {test['name']}: not run ({report.status})")
    built = "cached build" if report.build_cached else f"built in {report.build_seconds:.1f} s"
    passed = sum(1 for t in report.tests if t.get("passed"))
    verdict = {"pass": "PASS", "fail": "FAIL"}.get(report.status, report.status.upper())
    click.echo(
        f"{verdict}: {report.design}, {passed}/{len(report.tests)} tests passed "
        f"({built}, simulated in {report.sim_seconds:.2f} s)"
    )
    if report.reason and report.status != "error":
        click.echo(f"  reason: {report.reason}")
