"""``hwtp doctor``: what toolchain was found."""

from __future__ import annotations

import click

from hwtp.errors import ToolchainError
from hwtp.sim import backends, toolchain


@click.command()
def doctor() -> None:
    """Check the toolchain: every simulator backend (Verilator, Icarus), cocotb, C++ compiler, make, ccache."""
    report = toolchain.doctor(backends.probe_all())
    for sim in report.simulators:
        if sim.ok:
            click.echo(f"{sim.name:<10} {sim.version:<10} {sim.path} ({sim.detail})")
        elif sim.required:
            click.echo(f"{sim.name:<10} MISSING    {sim.detail}")
        else:
            click.echo(f"{sim.name:<10} not installed (optional): {sim.detail}")
    click.echo(
        f"cocotb     {report.cocotb_version or 'MISSING':<10} "
        + ("" if report.cocotb_version else "pip install 'cocotb>=2.0'")
    )
    for tool in report.tools:
        state = str(tool.path) if tool.path else ("MISSING" if tool.required else "not installed (optional)")
        version = (tool.version or "")[:60]
        click.echo(f"{tool.name:<10} {state}  {version}".rstrip())
    if not report.ok:
        raise ToolchainError(f"toolchain incomplete: {' '.join(report.missing)}")
    click.echo("ok")
