"""``hwtp eval``: a policy on a split, golden pass and detection rates; ``hwtp eval-compare``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from hwtp.cli.commands.options import (
    AT_LEAST_ONE,
    OUTPUT_FOLDER,
    SAMPLES,
    designs_dir_option,
    endpoint_options,
    trust_option,
)
from hwtp.corpus.splits import SPLITS, designs_of
from hwtp.errors import ConfigError
from hwtp.evaluation import render
from hwtp.evaluation.evaluate import EVAL_JSON, EVAL_MD, EvalConfig, evaluate
from hwtp.policy.policies import POLICIES
from hwtp.progress import progress
from hwtp.rtl.design import known_designs, load_design, search_path
from hwtp.run.config import RunConfig


@click.command("eval")
@click.argument("designs", nargs=-1)
@click.option("-o", "--out", "outdir", required=True, type=OUTPUT_FOLDER)
@click.option("--split", type=click.Choice(SPLITS), help="Every design of this split of --designs-dir.")
@click.option("--policy", type=click.Choice(POLICIES), help="[random; openai with --endpoint]")
@click.option("-G", "samples", type=SAMPLES, help="Plans per state. [8]")
@click.option("--states", type=int, help="Mutants per design (plus golden). [8]")
@click.option("--seed", type=int, help="[0]")
@click.option("--witness-cycles", type=int, help="Witness-search budget per mutant. [1000]")
@click.option(
    "--from", "replay_from", help="Replay: an hwtp plan folder, or one per design (e.g. an eval's OUT/plans)."
)
@click.option("-j", "--jobs", type=AT_LEAST_ONE, help="Simulator processes. [CPUs]")
@click.option("--json", "as_json", is_flag=True, help="Print eval.json instead of the Markdown.")
@designs_dir_option
@endpoint_options
@trust_option
def eval_command(
    designs: tuple[str, ...],
    outdir: Path,
    split: str | None,
    as_json: bool,
    **options: object,
) -> None:
    """Evaluate a policy on DESIGNS (or --split of --designs-dir): G plans per state, scored;
    golden pass and mutation detection rates per design and overall, pass@k, intervals,
    invalid-plan reasons, tokens and latency. Writes OUT/eval.json and OUT/eval.md.
    `hwtp eval-compare A B` puts two evaluations side by side."""
    names = list(designs)
    if split is not None:
        dirs = [d for d, origin in search_path() if origin != "shipped"]
        names += [n for n in designs_of(dirs, split) if n not in names]
    if not names:
        raise ConfigError("name DESIGNS or a --split of --designs-dir")
    if options["policy"] is None and options["endpoint"]:
        options["policy"] = "openai"
    run = RunConfig(**{k: v for k, v in options.items() if v is not None})  # type: ignore[arg-type]
    config = EvalConfig(run, split)
    paths = dict(known_designs())
    loaded = [load_design(paths.get(n, n)) for n in names]
    with progress(len(loaded), "evaluating designs") as bar:
        doc = evaluate(loaded, config, outdir, bar)
    if as_json:
        click.echo(json.dumps(doc, indent=2))
    else:
        click.echo((outdir / EVAL_MD).read_text(encoding="utf-8"))
    click.echo(f"written {outdir / EVAL_JSON} and {outdir / EVAL_MD}", err=True)


@click.command("eval-compare")
@click.argument("a", type=click.Path(exists=True, path_type=Path))
@click.argument("b", type=click.Path(exists=True, path_type=Path))
@click.option("--labels", default="A,B", show_default=True, help="Names of the two columns (e.g. base,trained).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), help="Write the comparison here.")
def compare_command(a: Path, b: Path, labels: str, json_out: Path | None) -> None:
    """Two evaluations (eval folders or eval.json files) side by side, B minus A, in Markdown."""
    parts = [p.strip() for p in labels.split(",")]
    if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        raise ConfigError(f"--labels {labels!r}: expected two different names, e.g. base,trained")
    doc = render.compare(render.load_eval(a), render.load_eval(b), (parts[0], parts[1]))
    if json_out is not None:
        json_out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    click.echo(render.compare_markdown(doc))
