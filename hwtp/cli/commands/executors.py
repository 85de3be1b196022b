"""``--executor local|ray`` and the Ray options, shared by ``hwtp score``, ``hwtp run`` and ``hwtp serve``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from hwtp.sim.executors.base import EXECUTORS

F = TypeVar("F", bound=Callable[..., Any])


def executor_options(func: F) -> F:
    """Add ``--executor``, ``--ray-address``, ``--ray-cpus`` and ``--ray-chunk``."""
    func = click.option(
        "--ray-chunk",
        type=click.IntRange(1),
        help="Evaluations per Ray actor call. [64]",
    )(func)
    func = click.option(
        "--ray-cpus",
        type=click.FloatRange(min=0, min_open=True),
        help="CPUs per Ray actor (one warm simulator each; fractions allowed). [1]",
    )(func)
    func = click.option(
        "--ray-address",
        metavar="ADDR",
        help="Ray cluster to join (host:port, ray://host:port or auto); default: the Ray job this "
        "process runs in, else a new local Ray instance.",
    )(func)
    return click.option(
        "--executor",
        type=click.Choice(EXECUTORS),
        default="local",
        show_default=True,
        help="Where simulations run: local processes, or warm simulator workers in Ray actors (hwtp[ray]).",
    )(func)
