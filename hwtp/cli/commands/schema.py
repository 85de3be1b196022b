"""``hwtp schema``: JSON Schemas of hwtp's formats."""

from __future__ import annotations

import json

import click

from hwtp.plans.format import json_schema


@click.command()
@click.argument("what", type=click.Choice(["plan"]))
def schema(what: str) -> None:
    """Print the JSON Schema of a format (plan: test plan format v1)."""
    click.echo(json.dumps(json_schema(), indent=2))
