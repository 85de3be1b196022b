"""``hwtp doctor``: what toolchain was found."""

from __future__ import annotations

import shutil
import subprocess

import click

from hwtp.errors import ToolchainError
from hwtp.sim import backends, toolchain

_COROUTINE = "#include <coroutine>\nint main() { return 0; }\n"


def _timing() -> str:
    """Whether designs with ``#`` delays can be built (Verilator ``--timing``: C++20 coroutines)."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        return "timing     no C++ compiler: designs with # delays cannot be built with --timing"
    try:
        proc = subprocess.run(
            [compiler, "-std=c++20", "-fcoroutines", "-fsyntax-only", "-x", "c++", "-"],
            input=_COROUTINE,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"timing     cannot check {compiler}: {exc}"
    if proc.returncode == 0:
        return (
            "timing     ok: designs with # delays build with hwtp.yaml build.args "
            "[--timing] (hwtp adds -fcoroutines; its default build has no --timing)"
        )
    return (
        f"timing     {compiler} has no C++20 coroutines (-fcoroutines): designs with # delays cannot be "
        "built; install g++ >= 10 or keep delays out of the RTL"
    )


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
    click.echo(_timing())
    if not report.ok:
        raise ToolchainError(f"toolchain incomplete: {' '.join(report.missing)}")
    click.echo("ok")
