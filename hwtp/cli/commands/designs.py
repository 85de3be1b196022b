"""``hwtp designs``: list designs; ``designs import`` (bring your own) and ``designs split``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from hwtp.cli.commands.options import designs_dir_option, trust_option
from hwtp.corpus import importer, sources, splits
from hwtp.errors import ConfigError
from hwtp.progress import progress
from hwtp.rtl.design import Port, known_designs, load_design, search_path
from hwtp.sim.cpus import usable_cpus


def _port_text(p: Port) -> str:
    width = f"[{p.width - 1}:0]" if p.width > 1 else ""
    arrow = {"input": "in", "output": "out", "inout": "io"}[p.direction]
    return f"{arrow} {'signed ' if p.signed else ''}{p.name}{width}"


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (name, kind, ports, clock, reset).")
@click.option("--split", type=click.Choice(splits.SPLITS), help="Only the designs of this split of --designs-dir.")
@click.option("--names", is_flag=True, help="Print only the names, one a line (e.g. for hwtp run $(...)).")
@designs_dir_option
@click.pass_context
def designs(ctx: click.Context, as_json: bool, split: str | None, names: bool) -> None:
    """List the designs found by name (--designs-dir, $HWTP_DESIGNS, the shipped ones) with
    their kind and ports; `import` brings your own, `split` splits them by content."""
    if ctx.invoked_subcommand is not None:
        return
    if split is not None:
        dirs = [d for d, origin in search_path() if origin != "shipped"]
        wanted = splits.designs_of(dirs, split)
        found = [(n, p) for n, p in known_designs() if n in set(wanted)]
    else:
        found = known_designs()
    if names:
        click.echo("\n".join(n for n, _ in found))
        return
    loaded = [load_design(path) for _, path in found]
    if as_json:
        click.echo(json.dumps([d.as_dict() for d in loaded], indent=2))
        return
    for d in loaded:
        click.echo(f"{d.name:<22} {d.kind:<13} {', '.join(_port_text(p) for p in d.ports)}")


def _patterns(values: tuple[str, ...], default: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(p.strip() for v in values for p in v.split(",") if p.strip()) or default


@designs.command("import")
@click.argument("srcs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("-o", "--out", "outdir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--rtl",
    multiple=True,
    help="RTL file patterns (comma-separated or repeated); with {name} each file is a design "
    f"(e.g. '{{name}}_ref.sv'). [{','.join(sources.DEFAULT_RTL)}]",
)
@click.option(
    "--spec",
    multiple=True,
    help="Spec file patterns, in order of preference; {name} pairs with --rtl's "
    f"(e.g. '{{name}}_prompt.txt'). [{','.join(sources.DEFAULT_SPEC)}]",
)
@click.option(
    "--exclude",
    multiple=True,
    help=f"Files that are never RTL (testbenches). [{','.join(sources.DEFAULT_EXCLUDE)}]",
)
@click.option("-j", "--jobs", type=click.IntRange(1), default=usable_cpus(), show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the reference plan (offline policy).")
@click.option("--require-spec", is_flag=True, help="Reject designs without a spec.")
@click.option("--allow-constant", is_flag=True, help="Keep designs whose outputs never change under random stimulus.")
@click.option("--force", is_flag=True, help="Decide every design again (ignore import.json).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@trust_option
def import_command(
    srcs: tuple[Path, ...],
    outdir: Path,
    rtl: tuple[str, ...],
    spec: tuple[str, ...],
    exclude: tuple[str, ...],
    jobs: int,
    seed: int,
    require_spec: bool,
    allow_constant: bool,
    force: bool,
    as_json: bool,
) -> None:
    """Turn folders of RTL (with specs beside), RTL files, or CSV/JSONL manifests SRCS into
    design folders in OUT, with a reference plan checked on golden. Rerun to resume; the
    summary (imported, rejected with the reason, duplicates) is OUT/import.json."""
    patterns = sources.Patterns(
        _patterns(rtl, sources.DEFAULT_RTL),
        _patterns(spec, sources.DEFAULT_SPEC),
        _patterns(exclude, sources.DEFAULT_EXCLUDE),
    )
    candidates = sources.discover(list(srcs), patterns)
    for c in candidates:
        if c.excluded and not as_json:
            names = ", ".join(p.name for p in c.excluded)
            click.echo(f"note: {c.origin}: left out as testbenches: {names} (--exclude to change)", err=True)
    if not candidates:
        raise ConfigError(f"no RTL found in {', '.join(map(str, srcs))} (patterns: {', '.join(patterns.rtl)})")
    config = importer.ImportConfig(jobs, seed, require_spec, allow_constant, force)
    with progress(len(candidates), "importing") as bar:
        summary = importer.import_designs(candidates, outdir, config, bar)
    doc = summary.as_dict()
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    for e in summary.entries:
        if e.status == importer.Status.REJECTED:
            click.echo(f"rejected  {e.origin}: {e.reason.value if e.reason else ''}: {e.detail}")
        elif e.status == importer.Status.DUPLICATE:
            click.echo(f"duplicate {e.origin}: same RTL as {e.detail}")
    counts = doc["counts"]
    resumed = summary.count(importer.Status.IMPORTED, resumed=True)
    click.echo(
        f"{counts['imported']} imported ({resumed} already there), {counts['rejected']} rejected, "
        f"{counts['duplicate']} duplicates in {summary.seconds:.1f} s; summary in {outdir / importer.SUMMARY}"
    )


@designs.command("split")
@click.argument("folder", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--ratios", default="0.8,0.1,0.1", show_default=True, help="Shares of train,validation,test.")
@click.option("--salt", default=splits.DEFAULT_SALT, show_default=True, help="Salt of the hash (another split).")
@click.option("--json", "as_json", is_flag=True, help="Print the splits as JSON.")
def split_command(folder: Path, ratios: str, salt: str, as_json: bool) -> None:
    """Split FOLDER's designs into train, validation and test by a hash of their RTL: a design
    never moves when others are added. Writes FOLDER/splits.json; `hwtp designs --split NAME`,
    `hwtp eval --split NAME` read it."""
    settings = splits.SplitSettings(splits.parse_ratios(ratios), salt)
    result = splits.write_splits(folder, settings)
    if as_json:
        click.echo(json.dumps(settings.as_dict() | {"splits": result}, indent=2))
        return
    for name in splits.SPLITS:
        click.echo(f"{name:<11} {len(result[name]):>5} designs")
    click.echo(f"written to {folder / splits.SPLITS_JSON}")
