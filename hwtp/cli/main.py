"""The ``hwtp`` command line: a click group whose commands live in :mod:`hwtp.cli.commands`.

Commands parse options, call one library function and print. Errors are mapped to one-line
messages and exit codes here, once (docs/reference/commands.md, exit codes).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
import traceback
from typing import Any

import click

from hwtp import __version__
from hwtp.cli.commands import register
from hwtp.errors import EXIT_INPUT, HwtpError
from hwtp.sim import procs


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="hwtp")
@click.option("-v", "--verbose", is_flag=True, help="Show tracebacks and debug output.")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """hwtp: hardware test plans, mutants, rewards and GRPO-SMu advantages."""
    ctx.ensure_object(dict)
    ctx.obj["verbose"] = verbose


register(cli)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script: run the CLI and map errors to exit codes."""
    args = sys.argv[1:] if argv is None else argv
    verbose = "-v" in args or "--verbose" in args
    procs.reset()
    previous = _on_signals()
    try:
        code = _main(args, verbose)
    finally:
        if previous is not None:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
    if argv is None and code in (130, 128 + signal.SIGTERM):
        _leave(code)
    return code


def _main(args: list[str], verbose: bool) -> int:
    try:
        rv = cli.main(args=args, prog_name="hwtp", standalone_mode=False)
    except HwtpError as exc:
        if verbose:
            traceback.print_exc()
        click.echo(f"hwtp: error: {exc}", err=True)
        return exc.exit_code
    except OSError as exc:  # a file hwtp reads or writes that no check refused first: no traceback
        if verbose:
            traceback.print_exc()
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"hwtp: error: {where}{exc.strerror or exc}", err=True)
        return EXIT_INPUT
    except click.exceptions.Abort:
        procs.stop_all()
        click.echo("hwtp: aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return EXIT_INPUT if exc.exit_code == 2 else exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt:
        procs.stop_all()
        click.echo("hwtp: interrupted", err=True)
        return 130
    except _Terminated:
        procs.stop_all()
        click.echo("hwtp: terminated", err=True)
        return 128 + signal.SIGTERM
    return rv if isinstance(rv, int) else 0


def _leave(code: int) -> None:
    """End an interrupted console command now: exit handlers run (warm pools close) and the
    output is flushed, but Python's own shutdown is skipped. Its final garbage collection of
    everything loaded takes 1-2 s on a busy machine; the children and temporary folders are
    already gone when this runs."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


class _Terminated(BaseException):
    """SIGTERM arrived: unwind like an interrupt, so child processes and temporary folders go."""


def _raise_terminated(signum: int, frame: object) -> None:
    procs.stop_now()
    raise _Terminated


def _raise_interrupt(signum: int, frame: object) -> None:
    procs.stop_now()
    raise KeyboardInterrupt


def _on_signals() -> dict[int, Any] | None:
    """In the main thread: Ctrl-C and SIGTERM kill every child process at once (in the handler,
    so nothing that unwinds waits for one) and raise :class:`KeyboardInterrupt` /
    :class:`_Terminated`; returns the old handlers."""
    if threading.current_thread() is not threading.main_thread():
        return None
    old: dict[int, Any] = {signal.SIGTERM: signal.signal(signal.SIGTERM, _raise_terminated)}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when Ctrl-C is ignored
        old[signal.SIGINT] = signal.signal(signal.SIGINT, _raise_interrupt)
    return old


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
