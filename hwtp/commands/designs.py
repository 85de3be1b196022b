"""``hwtp designs``: list the shipped designs."""

from __future__ import annotations

import json

import click

from hwtp.design import Port, load_shipped


def _port_text(p: Port) -> str:
    width = f"[{p.width - 1}:0]" if p.width > 1 else ""
    arrow = {"input": "in", "output": "out", "inout": "io"}[p.direction]
    return f"{arrow} {'signed ' if p.signed else ''}{p.name}{width}"


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON (name, kind, ports, clock, reset).")
def designs(as_json: bool) -> None:
    """List the shipped designs with their kind and ports."""
    loaded = load_shipped()
    if as_json:
        click.echo(json.dumps([d.as_dict() for d in loaded], indent=2))
        return
    for d in loaded:
        click.echo(f"{d.name:<22} {d.kind:<13} {', '.join(_port_text(p) for p in d.ports)}")
