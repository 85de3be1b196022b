"""``hwtp report``: a self-contained HTML report of runs, scores files and ``hwtp ci`` reports."""

from __future__ import annotations

from pathlib import Path

import click

from hwtp import outputs
from hwtp.cli.commands.options import OUTPUT_FILE


@click.command("report")
@click.argument("sources", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", "out", required=True, type=OUTPUT_FILE,
              help="The HTML file to write.")
@click.option("--root", type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="Folder a hwtp ci report's source paths are relative to (default: here, then the report's).")
def report_command(sources: tuple[Path, ...], out: Path, root: Path | None) -> None:
    """Write one HTML page (no network needed to view it) for SOURCES: run folders, scores JSON
    files (hwtp score --json) or hwtp ci JSON reports; several are compared side by side."""
    # matplotlib takes ~0.5 s to import: only when this command runs, not at every hwtp start
    from hwtp.report.data import load_source
    from hwtp.report.render import render

    views = [load_source(path, root) for path in sources]
    outputs.write_text(outputs.make_folder(out.parent) / out.name, render(views))
    click.echo(f"wrote {out}", err=True)
