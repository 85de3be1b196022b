"""``hwtp doctor``: what toolchain was found."""

from __future__ import annotations

import click

from hwtp.errors import ToolchainError
from hwtp.sim import toolchain


@click.command()
def doctor() -> None:
    """Check the simulator toolchain (Verilator, cocotb, C++ compiler, make, ccache, Icarus)."""
    report = toolchain.doctor()
    if report.verilator:
        v = report.verilator
        click.echo(f"verilator  {v.version_text:<10} {v.executable} ({v.source})")
    else:
        click.echo(f"verilator  MISSING    {report.verilator_problem}")
    click.echo(
        f"cocotb     {report.cocotb_version or 'MISSING':<10} "
        + ("" if report.cocotb_version else "pip install 'cocotb>=2.0'")
    )
    for tool in report.tools:
        optional = tool.name in ("ccache", "icarus")
        state = str(tool.path) if tool.path else ("not installed (optional)" if optional else "MISSING")
        version = (tool.version or "")[:60]
        click.echo(f"{tool.name:<10} {state}  {version}".rstrip())
    if not report.ok:
        missing = [t.name for t in report.tools if t.path is None and t.name in ("c++", "make")]
        hint = report.verilator_problem or ""
        if missing:
            hint += f" missing: {', '.join(missing)} (Debian: apt-get install g++ make)"
        if not report.cocotb_version:
            hint += " missing: cocotb (pip install 'cocotb>=2.0')"
        raise ToolchainError(f"toolchain incomplete: {hint.strip()}")
    click.echo("ok")
