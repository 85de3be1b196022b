"""Click commands, one module per stage; :func:`register` adds them all to the group."""

from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Add every command to ``group``, in the order ``hwtp --help`` lists them."""
    from hwtp.cli.commands import (
        advantage,
        ci,
        designs,
        doctor,
        learn,
        mutate,
        plan,
        report,
        run,
        schema,
        score,
        serve,
        sim,
    )
    from hwtp.cli.commands import eval as eval_

    for command in (
        doctor.doctor,
        designs.designs,
        schema.schema,
        sim.sim,
        mutate.mutate,
        mutate.show,
        mutate.apply,
        score.score_command,
        plan.plan_command,
        advantage.advantage_command,
        advantage.export_command,
        run.run_command,
        run.status_command,
        ci.ci,
        ci.export_tests_command,
        serve.serve_command,
        report.report_command,
        eval_.eval_command,
        eval_.compare_command,
        learn.learn_command,
    ):
        group.add_command(command)
