"""``hwtp ci`` (and ``hwtp ci init``) and ``hwtp export-tests``: gate verification CI."""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path

import click

from hwtp import env
from hwtp.ci import baseline, reports, shards
from hwtp.ci.config import FORMAL, TIMEOUTS_AS, CiConfig
from hwtp.ci.exporttests import design_near, export_tests
from hwtp.ci.mutation import CiReport, MutantResult, run_ci
from hwtp.ci.sarif import sarif
from hwtp.ci.starter import write_all, write_starter
from hwtp.cli.commands.options import design_options, resolve_design, trust_option
from hwtp.config import CONFIG_NAME, load_ci, locate
from hwtp.errors import EXIT_GATE, ConfigError
from hwtp.progress import PLAIN_SECONDS, Progress

_FILE = click.Path(dir_okay=False, path_type=Path)


def _overrides(config: CiConfig, count: int | None, operators: str | None, seed: int | None,
               min_score: float | None, since: str | None, jobs: int | None, timeout: float | None,
               include_plans: tuple[Path, ...], shared: bool | None = None,
               timeouts_as: str | None = None, diagnose: bool | None = None,
               formal: str | None = None) -> CiConfig:
    changes: dict[str, object] = {}
    if count is not None:
        changes["n"] = count or None
    if operators is not None:
        changes["operators"] = tuple(o.strip() for o in operators.split(",") if o.strip())
    for name, value in (("seed", seed), ("min_score", min_score), ("since", since), ("jobs", jobs),
                        ("timeout_s", timeout), ("shared", shared), ("timeouts_as", timeouts_as),
                        ("diagnose", diagnose), ("formal", formal)):
        if value is not None:
            changes[name] = value
    config = replace(config, **changes)  # type: ignore[arg-type]
    for path in include_plans:
        config = config.with_plans_module(path)
    return config


class _Progress:
    """Mutants tested, with rate and time left (:mod:`hwtp.progress`); in a log, a line at
    least every 30 s even while no mutant finishes (hanging mutants are not silence)."""

    def __init__(self) -> None:
        self.bar: Progress | None = None
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.told = 0  # results told
        self.ran = 0  # states shared processes finished

    def start(self, total: int) -> None:
        self.bar = Progress(total, "testing mutants")
        threading.Thread(target=self._beat, daemon=True).start()

    def _beat(self) -> None:
        while not self.stop.wait(PLAIN_SECONDS):
            bar = self.bar
            if bar is not None:
                bar.to(bar.done)  # a plain line when none was written for PLAIN_SECONDS

    def __call__(self, result: MutantResult) -> None:
        if self.bar is not None:
            with self.lock:
                self.told += 1
                self.bar.to(max(self.told, self.bar.done))

    def advance(self, states: int) -> None:
        """States a shared process finished (its results come later, once checked)."""
        if self.bar is not None:
            with self.lock:
                self.ran += states
                self.bar.to(max(self.told, min(self.ran, self.bar.total - 1)))

    def close(self) -> None:
        self.stop.set()
        if self.bar is not None:
            self.bar.close()


def _outputs(f: click.decorators.FC) -> click.decorators.FC:
    """The report options of ``hwtp ci`` and ``hwtp ci merge``."""
    options = [
        click.option("--junit", type=_FILE, help="Write JUnit XML (one test case per mutant; survivors fail)."),
        click.option("--markdown", type=_FILE, help="Write a Markdown summary (e.g. $GITHUB_STEP_SUMMARY)."),
        click.option("--lcov", type=_FILE, help="Write an lcov tracefile: mutants killed/survived per source line."),
        click.option("--json", "json_out", type=_FILE, help="Write the full report as JSON (a shard's: for merge)."),
        click.option("--sarif", "sarif_out", type=_FILE, help="Write SARIF 2.1.0: survivors for code scanning."),
        click.option("--baseline", "baseline_in", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     help="Accept the survivors this file lists: the gate fails only on new ones."),
        click.option("--write-baseline", type=_FILE, help="Write today's survivors as a baseline file."),
        click.option("--annotations/--no-annotations", default=None,
                     help="Print GitHub workflow annotations for survivors. [default: when $GITHUB_ACTIONS]"),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _finish(ctx: click.Context, report: CiReport, junit: Path | None, markdown: Path | None, lcov: Path | None,
            json_out: Path | None, sarif_out: Path | None, baseline_in: Path | None, write_baseline: Path | None,
            annotations: bool | None, gate: bool = True) -> None:
    """Check the baseline, write the reports, print the summary, exit by the gate."""
    if baseline_in is not None:
        report = replace(report, baseline=baseline.check(report, baseline.load(baseline_in), str(baseline_in)))
    base = Path.cwd()
    outputs = [(junit, lambda: reports.junit(report)), (markdown, lambda: reports.markdown(report)),
               (lcov, lambda: reports.lcov(report, base)), (json_out, lambda: reports.json_report(report)),
               (sarif_out, lambda: sarif(report, base)),
               (write_baseline, lambda: baseline.render(report.survivors))]
    for path, render in outputs:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render(), encoding="utf-8")
    if annotations is None:
        annotations = env.get(env.GITHUB_ACTIONS_VAR) == "true"
    if annotations:
        click.echo(reports.github_annotations(report, base), nl=False)
    click.echo(reports.survivors_table(report))
    click.echo(reports.summary(report))
    if gate and not report.gate_passed:
        ctx.exit(EXIT_GATE)


@click.group("ci", invoke_without_command=True)
@click.option("--config", "config_paths", type=click.Path(path_type=Path), multiple=True,
              help=f"The hwtp.yaml to use (a folder means its hwtp.yaml; default {CONFIG_NAME}). Repeatable: "
                   "one run each (e.g. what `hwtp ci init --all` wrote), report files named after each.")
@click.option("-n", "count", type=int, help="How many mutants (0: every site). [hwtp.yaml mutation.n]")
@click.option("--operators", help="Comma-separated operator families or names. [mutation.operators]")
@click.option("--seed", type=int, help="Mutant selection seed. [mutation.seed]")
@click.option("--min-score", type=float, help="Exit 1 when the score is below this (0..1). [min_score]")
@click.option("--since", metavar="GITREV", help="Only mutate lines changed since this git revision.")
@click.option("-j", "--jobs", type=int, help="Simulator processes at once. [jobs]")
@click.option("--timeout", type=float, help="Seconds per mutant; a mutant over it is indeterminate. [timeout]")
@click.option("--timeouts-as", type=click.Choice(TIMEOUTS_AS),
              help="Count timeouts as killed, survived, or leave them out of the score. [timeouts_as]")
@click.option("--shared/--no-shared", default=None,
              help="Many mutants per simulator process (checked sound), or one process each. [shared]")
@click.option("--verify", is_flag=True, help="Check the shared process against a process per mutant again.")
@click.option("--diagnose/--no-diagnose", default=None,
              help="Say for each survivor whether its tests lacked stimulus or checking (activation probes "
                   "in the build, outputs compared with golden's). [diagnose]")
@click.option("--formal", type=click.Choice(FORMAL),
              help="Check survivors for equivalence with Yosys; proved ones are out of the score. "
                   "[mutation.formal, default auto: when Yosys is installed]")
@click.option("--shard", metavar="I/N", help="Run the I-th of N slices of the mutants (write --json; then "
              "hwtp ci merge).")
@_outputs
@click.option("--include-plans", type=click.Path(exists=True, dir_okay=False, path_type=Path), multiple=True,
              help="Also run this cocotb module (from hwtp export-tests): the score it adds. Repeatable.")
@trust_option
@click.pass_context
def ci(ctx: click.Context, config_paths: tuple[Path, ...], count: int | None, operators: str | None, seed: int | None,
       min_score: float | None, since: str | None, jobs: int | None, timeout: float | None,
       timeouts_as: str | None, shared: bool | None, verify: bool, diagnose: bool | None, formal: str | None,
       shard: str | None,
       junit: Path | None, markdown: Path | None, lcov: Path | None, json_out: Path | None,
       sarif_out: Path | None, baseline_in: Path | None, write_baseline: Path | None, annotations: bool | None,
       include_plans: tuple[Path, ...]) -> None:
    """Mutation-test your cocotb testbench and gate CI on the score.

    Injects the mutants of `hwtp mutate` into the design (one schemata build), runs your
    unchanged tests on golden, then on the mutants: many per simulator process when that gives
    what a process per mutant gives (checked), else one process each. Exit 0 when the score
    reaches min_score (and no survivor is new to --baseline), 1 otherwise, 2 when the tests fail
    on golden or the config is wrong. `hwtp ci init` writes a starter hwtp.yaml; `hwtp ci merge`
    combines --shard runs. Several --config: one run each, in turn; exit 1 when any misses its gate.
    """
    if ctx.invoked_subcommand is not None:
        return
    paths = config_paths or (Path(CONFIG_NAME),)
    several = len(paths) > 1
    if several and (shard or baseline_in or write_baseline or include_plans):
        raise ConfigError("--shard, --baseline, --write-baseline and --include-plans take one --config")
    part = shards.parse_shard(shard) if shard is not None else None
    if part is not None and json_out is None:
        raise ConfigError("--shard needs --json FILE: hwtp ci merge combines the shards' JSON reports")
    configs = [_overrides(load_ci(path), count, operators, seed, min_score, since, jobs, timeout,
                          include_plans, shared, timeouts_as, diagnose, formal) for path in paths]  # all checked first
    missed = []
    for path, config in zip(paths, configs, strict=True):
        if several:
            click.echo(f"== {config.source}")
        progress = _Progress()
        try:
            report = run_ci(config, progress=progress, on_mutants=progress.start, shard=part, verify=verify,
                            note=lambda text: click.echo(f"hwtp ci: {text}", err=True), advance=progress.advance)
        finally:
            progress.close()
        if part is not None:
            click.echo(f"shard {part[0]}/{part[1]}: {len(report.mutants)} of {len(report.order)} mutants; "
                       "the gate applies to the merged report (hwtp ci merge)")
        owner = path if several else None
        _finish(ctx, report, _each(junit, owner), _each(markdown, owner), _each(lcov, owner), _each(json_out, owner),
                _each(sarif_out, owner), baseline_in, write_baseline, annotations, gate=part is None and not several)
        if not report.gate_passed:
            missed.append(config.source)
    if several:
        click.echo(f"{len(paths) - len(missed)} of {len(paths)} configs reached their gate"
                   + (f"; missed: {', '.join(missed)}" if missed else ""))
        if missed:
            ctx.exit(EXIT_GATE)


def _each(out: Path | None, config: Path | None) -> Path | None:
    """A report file of one of several configs (``config``; None: the only one): ``r.json`` for
    ``hwtp-rx.yaml`` is ``r-hwtp-rx.json``."""
    if out is None or config is None:
        return out
    return out.with_name(f"{out.stem}-{locate(config).stem}{out.suffix}")


@ci.command("merge")
@click.argument("shard_reports", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=CONFIG_NAME,
              show_default=True, help="The run's hwtp.yaml (where mutant files are; else here).")
@click.option("--min-score", type=float, help="Override the shards' min_score (0..1).")
@_outputs
@click.pass_context
def merge(ctx: click.Context, shard_reports: tuple[Path, ...], config_path: Path, min_score: float | None,
          junit: Path | None, markdown: Path | None, lcov: Path | None, json_out: Path | None,
          sarif_out: Path | None, baseline_in: Path | None, write_baseline: Path | None,
          annotations: bool | None) -> None:
    """Combine the JSON reports of `hwtp ci --shard I/N` runs into the report of the whole run.

    Score, gate and every report are those an unsharded run gives (wall-clock times aside).
    """
    root = load_ci(config_path).root if locate(config_path).is_file() else Path.cwd()
    report = shards.merge(shard_reports, root)
    if min_score is not None:
        if not 0.0 <= min_score <= 1.0:
            raise ConfigError("--min-score must be from 0 to 1")
        report = replace(report, min_score=min_score)
    _finish(ctx, report, junit, markdown, lcov, json_out, sarif_out, baseline_in, write_baseline, annotations)


@ci.command("init")
@click.argument("folder", type=click.Path(file_okay=False, exists=True, path_type=Path), default=".")
@click.option("--force", is_flag=True, help="Overwrite an existing hwtp.yaml.")
@click.option("--flow", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="The runner script or cocotb Makefile to read, when the folder has several testbenches.")
@click.option("-o", "--output", "name", default=CONFIG_NAME, show_default=True,
              help="The file name to write in the project folder (one per testbench; hwtp ci --config NAME).")
@click.option("--all", "every", is_flag=True,
              help="One config per cocotb testbench found (hwtp-<folder>.yaml each); hwtp ci --config each.")
def init(folder: Path, force: bool, flow: Path | None, name: str, every: bool) -> None:
    """Write a commented starter hwtp.yaml for the project in FOLDER (default: here).

    Reads the project's cocotb runner script (cocotb_tools.runner; parsed, never run) or else
    its cocotb Makefile; what they do not give is found by looking at the folder. Whatever could
    not be read is printed with its file:line and the hwtp.yaml key to fill in by hand. With
    several testbenches: choose one with --flow, or --all for one config file each.
    """
    if every and (flow is not None or name != CONFIG_NAME):
        raise ConfigError("--all writes one config per testbench, named hwtp-<folder>.yaml: not with --flow or -o")
    written = write_all(folder, force) if every else [write_starter(folder, force, flow, name)]
    here = Path.cwd().resolve()
    for path, found in written:
        origin = f" from {found.origin}" if found.origin else ""
        click.echo(f"wrote {path}{origin}: {len(found.sources)} RTL files, top {found.top or '(not found)'}, "
                   f"tests {', '.join(found.modules) or '(none found)'}")
        for note in found.notes:
            click.echo(f"note: {note}")
        for unknown in found.unknown:
            click.echo(f"not understood: {unknown}")
    configs = "".join("" if path == here / CONFIG_NAME else f" --config {os.path.relpath(path, here)}"
                      for path, _ in written)
    click.echo(f"check {'them' if len(written) > 1 else 'it'}, then run `hwtp ci{configs}`")


@click.command("export-tests")
@click.argument("plans", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--out", required=True, type=_FILE, help="Module to write, e.g. test_hwtp_plans.py.")
@click.option("--design", "design_ref", help="Design the plans are for (shipped name, folder, or Verilog "
              "file). Default: the design folder the first plan sits in, else hwtp.yaml's design.")
@design_options
@trust_option
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=CONFIG_NAME,
              show_default=True, help="hwtp.yaml whose design to use when no --design is given and "
              "none is found near the plans.")
def export_tests_command(plans: tuple[Path, ...], out: Path, design_ref: str | None, top: str | None,
                         clock_spec: str | None, reset_spec: str | None, config_path: Path) -> None:
    """Write test PLANS as a standalone cocotb test module (no hwtp needed to run it)."""

    if design_ref is not None:
        design = resolve_design(design_ref, top, clock_spec, reset_spec)
    elif (near := design_near(plans[0])) is not None:
        design = resolve_design(str(near))
    elif locate(config_path).is_file():
        design = load_ci(config_path).load_design()
    else:
        raise ConfigError(f"{plans[0]}: cannot tell which design the plans are for; pass --design")
    count, tests = export_tests(design, list(plans), out)
    click.echo(f"wrote {out}: {tests} cocotb tests from {count} plan{'s' if count > 1 else ''} "
               f"for {design.name} (run it with COCOTB_TEST_MODULES={out.stem})")
