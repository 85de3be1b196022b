"""Click commands, one module per stage; :func:`register` adds them all to the group."""

from __future__ import annotations

import importlib

import click

# (module, attribute) of every command; each module owns the commands of one stage.
_COMMANDS: tuple[tuple[str, str], ...] = (
    ("hwtp.commands.doctor", "doctor"),
    ("hwtp.commands.designs", "designs"),
    ("hwtp.commands.schema", "schema"),
    ("hwtp.commands.sim", "sim"),
    ("hwtp.commands.mutate", "mutate"),
    ("hwtp.commands.mutate", "show"),
    ("hwtp.commands.mutate", "apply"),
    ("hwtp.commands.score", "score_command"),
    ("hwtp.commands.plan", "plan_command"),
    ("hwtp.commands.advantage", "advantage_command"),
    ("hwtp.commands.advantage", "export_command"),
    ("hwtp.commands.run", "run_command"),
    ("hwtp.commands.run", "status_command"),
    ("hwtp.commands.ci", "ci"),
    ("hwtp.commands.ci", "export_tests_command"),
    ("hwtp.commands.serve", "serve_command"),
    ("hwtp.commands.report", "report_command"),
    ("hwtp.commands.eval", "eval_command"),
    ("hwtp.commands.eval", "compare_command"),
    ("hwtp.commands.learn", "learn_command"),
)


def register(group: click.Group) -> None:
    """Add every command of :data:`_COMMANDS` to ``group``."""
    for module_name, attr in _COMMANDS:
        module = importlib.import_module(module_name)
        group.add_command(getattr(module, attr))
