"""Options shared by commands that take a design (``--designs-dir``, ``--top``, ``--clock``, ``--reset``)."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click

from hwtp import yamlio
from hwtp.env import ALLOW_SYSTEM_TASKS_VAR, DESIGNS_VAR
from hwtp.errors import ConfigError, OutputError, PlanError
from hwtp.outputs import check_file, check_folder
from hwtp.policy.planning import MAX_SAMPLES
from hwtp.rtl.design import (
    Clock,
    ControlError,
    Design,
    Reset,
    allow_system_tasks,
    load_design,
    reset_of,
    use_designs_dirs,
)

F = TypeVar("F", bound=Callable[..., Any])


class OutputPath(click.Path):
    """A path a command writes (a folder, or a file): checked as the option is read
    (:func:`hwtp.outputs.check_folder` / :func:`~hwtp.outputs.check_file`), so a read-only place or a
    dangling symbolic link is refused, exit 2, before the command does anything."""

    def __init__(self, folder: bool) -> None:
        super().__init__(file_okay=not folder, dir_okay=folder, path_type=Path)
        self.folder = folder

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        if str(path) != "-":
            try:
                (check_folder if self.folder else check_file)(Path(str(path)))
            except OutputError as exc:
                self.fail(str(exc), param, ctx)
        return path


class FiniteFloat(click.FloatRange):
    """A finite number (``nan`` and ``inf`` refused), optionally in a range: the type of every
    number option, so no NaN reaches a run folder, a reward or a request."""

    name = "finite number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


#: Seconds, and other quantities that must be above 0.
POSITIVE = FiniteFloat(min=0, min_open=True)
#: A count of one or more (processes, requests, cycles).
AT_LEAST_ONE = click.IntRange(min=1)
#: Plans per state (``-G``): far above any trainer's group size, and a bound on what one run holds.
SAMPLES = click.IntRange(min=1, max=MAX_SAMPLES)


#: ``-o FOLDER`` / ``--json FILE``: where a command writes, checked before any work.
OUTPUT_FOLDER = OutputPath(folder=True)
OUTPUT_FILE = OutputPath(folder=False)


def _designs_dirs(ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> None:
    if value:
        use_designs_dirs(value)
        ctx.call_on_close(lambda: use_designs_dirs(()))


def designs_dir_option(func: F) -> F:
    """Add ``--designs-dir DIR`` (repeatable): folders of design folders searched first when a
    design is given by name (then ``$HWTP_DESIGNS``, then the shipped designs)."""
    return click.option(
        "--designs-dir",
        multiple=True,
        metavar="DIR",
        expose_value=False,
        callback=_designs_dirs,
        help=f"Find designs named here first (a folder of NAME/design.yaml, e.g. from hwtp designs import); "
        f"then ${DESIGNS_VAR}, then the shipped designs. Repeatable.",
    )(func)


def design_options(func: F) -> F:
    """Add ``--designs-dir`` (designs by name) and ``--top/--clock/--reset`` for designs given
    as a bare Verilog file."""
    func = click.option(
        "--reset",
        "reset_spec",
        metavar="PORT[:low|high[:CYCLES]]",
        help="Bare file: reset port, active level (default: by name, rst_n low, reset high), cycles (default 2).",
    )(func)
    func = click.option(
        "--clock",
        "clock_spec",
        metavar="PORT[:PERIOD_NS]",
        help="Bare file: clock port and period (default 10 ns); 'none' for combinational.",
    )(func)
    func = click.option("--top", help="Bare file: the top module (needed when the file has several).")(func)
    return designs_dir_option(func)


def endpoint_options(func: F) -> F:
    """The OpenAI-compatible endpoint options of ``hwtp run`` and ``hwtp eval`` (each None when
    not given, so the run configuration's defaults and ``hwtp.yaml`` apply)."""
    for option in reversed(
        (
            click.option("--endpoint", help="OpenAI-compatible base URL (policy openai)."),
            click.option("--model"),
            click.option("--api-key-env", help="Environment variable holding the API key."),
            click.option("--temperature", type=FiniteFloat(min=0)),
            click.option("--top-p", type=FiniteFloat(min=0, max=1, min_open=True)),
            click.option("--max-tokens", type=AT_LEAST_ONE),
            click.option("--concurrency", type=AT_LEAST_ONE, help="Endpoint requests in flight."),
            click.option("--timeout", type=POSITIVE, help="Total deadline of one endpoint request, s. [300]"),
            click.option("--retries", type=click.IntRange(min=0), help="Retries of a failed endpoint request. [5]"),
        )
    ):
        func = option(func)
    return func


def _allow(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        allow_system_tasks(True)
        ctx.call_on_close(lambda: allow_system_tasks(None))


def trust_option(func: F) -> F:
    """Add ``--allow-system-tasks``: simulate RTL that runs commands or writes files."""
    return click.option(
        "--allow-system-tasks",
        is_flag=True,
        expose_value=False,
        callback=_allow,
        help=f"Trust the RTL: allow $system, $fopen, DPI imports... (also {ALLOW_SYSTEM_TASKS_VAR}=1).",
    )(func)


def read_stdin(source: str = "<stdin>") -> str:
    """Standard input as text; bytes that are not UTF-8 are refused with their line."""
    stream = getattr(sys.stdin, "buffer", None)
    data = stream.read() if stream is not None else sys.stdin.read().encode("utf-8", "surrogateescape")
    try:
        return yamlio.decode_utf8(data)
    except yamlio.TextDecodeError as exc:
        raise PlanError(f"{source}:{exc.line}: {exc.message}") from exc


def _number(text: str, kind: type[float] | type[int]) -> Any:
    """``text`` as a number, or as given when it is not one (the record refuses it in its words)."""
    try:
        return kind(text)
    except ValueError:
        return text


def parse_clock(spec: str | None) -> Clock | None:
    """``--clock PORT[:PERIOD_NS]`` as a validated :class:`Clock` (10 ns when no period)."""
    if not spec:
        return None
    port, _, period = spec.partition(":")
    try:
        return Clock(port, _number(period, float) if period else 10.0)
    except ControlError as exc:
        raise ConfigError(f"--clock {spec!r}: {exc.key[-1]}: {exc.problem} (e.g. clk:10)") from None


def parse_reset(spec: str | None) -> Reset | None:
    """``--reset PORT[:low|high[:CYCLES]]`` as a validated :class:`Reset`; without a level, the
    level the port's name implies (``rst_n`` low, ``reset`` high), as when it is guessed."""
    if not spec:
        return None
    parts = spec.split(":")
    if len(parts) > 3:
        raise ConfigError(f"--reset {spec!r}: expected PORT[:low|high[:CYCLES]]")
    active = parts[1] if len(parts) > 1 and parts[1] else None
    cycles = _number(parts[2], int) if len(parts) > 2 and parts[2] else 2
    try:
        return reset_of(parts[0], active, cycles)
    except ControlError as exc:
        raise ConfigError(f"--reset {spec!r}: {exc.key[-1]}: {exc.problem} (e.g. rst_n:low:2)") from None


def resolve_design(
    ref: str, top: str | None = None, clock_spec: str | None = None, reset_spec: str | None = None
) -> Design:
    """Load a design from a name (``--designs-dir``, ``$HWTP_DESIGNS``, shipped), a folder, or a
    bare file with the options."""
    if clock_spec == "none":
        design = load_design(ref, top=top, clock=None, reset=None)
        return replace(design, clock=None, reset=None)
    return load_design(ref, top=top, clock=parse_clock(clock_spec), reset=parse_reset(reset_spec))


def reward_scheme_options(func: F) -> F:
    """Add ``--reward-scheme``, ``--reward-penalty`` and ``--reference-suite`` (docs/rewards.md,
    "Reward schemes"); each None when not given."""
    from hwtp.scoring.scheme import DEFAULT_PENALTY, SCHEMES

    for option in reversed(
        (
            click.option(
                "--reward-scheme",
                type=click.Choice(SCHEMES),
                help="smu: 0/1/2 on the plan's own state (default); kill-fraction: 1 + the share of the "
                "design's killable mutants the plan detects; incremental: that share over the mutants "
                "the reference suite does not kill.",
            ),
            click.option(
                "--reward-penalty",
                type=float,
                help=f"incremental: taken from the pass level of a plan that kills nothing new [{DEFAULT_PENALTY}].",
            ),
            click.option(
                "--reference-suite",
                type=click.Path(path_type=Path),
                help="incremental: a run folder (the design's best plans there) or a plan file or folder.",
            ),
        )
    ):
        func = option(func)
    return func
