"""``hwtp serve``: the reward service (OpenRLHF ``/reward``, NeMo Gym ``/verify``) on warm simulators."""

from __future__ import annotations

import importlib.util
import ipaddress
import os
from pathlib import Path

import click

from hwtp import env
from hwtp.cli.commands.executors import executor_options
from hwtp.cli.commands.options import reward_scheme_options
from hwtp.errors import ConfigError
from hwtp.sim.executors.choice import require_ray
from hwtp.training.serve.limits import REQUEST_TIMEOUT_S

_EXTRA_HINT = "hwtp serve needs the serve extra: pip install 'hwtp[serve]' (Starlette and uvicorn)"


def _require_extra() -> None:
    missing = [name for name in ("starlette", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(f"{_EXTRA_HINT}; missing: {', '.join(missing)}")


def _token(token_env: str | None) -> tuple[str | None, str | None]:
    """(token, variable): from ``--token-env`` (which must then be set), else the default variable."""
    if token_env:
        value = env.get(token_env)
        if value is None:
            raise ConfigError(f"--token-env {token_env}: the variable is not set (or empty)")
        return value, token_env
    value = env.get(env.SERVE_TOKEN_VAR)
    return (value, env.SERVE_TOKEN_VAR) if value else (None, None)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _open_warning(host: str) -> str:
    """What ``hwtp serve`` prints when it listens beyond this machine with no token."""
    var = env.SERVE_TOKEN_VAR
    return (
        f"hwtp serve: WARNING: listening on {host}, reachable from other machines, WITHOUT a token: anyone who "
        f"can reach this port can use your simulators. Set one: export {var}=$(openssl rand -hex 32) "
        f"(or --token-env NAME), and send 'Authorization: Bearer <token>'; or bind 127.0.0.1."
    )


@click.command("serve")
@click.argument("states", nargs=-1, type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to bind (keep it local unless a token is set)."
)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="Port; 0 picks a free one."
)
@click.option(
    "--token-env",
    metavar="NAME",
    help=f"Environment variable holding a bearer token that every request but /health must send "
    f"(default: {env.SERVE_TOKEN_VAR} when set).",
)
@click.option(
    "--workers", type=click.IntRange(1), help="Simulator processes per warm pool (one pool per design and mutant set)."
)
@click.option(
    "--max-body-bytes",
    type=click.IntRange(1),
    default=16 * 1024 * 1024,
    show_default=True,
    help="Larger bodies get 413.",
)
@click.option(
    "--max-items",
    type=click.IntRange(1),
    default=1024,
    show_default=True,
    help="Completions per request (413 past it).",
)
@click.option("--concurrency", type=click.IntRange(1), default=8, show_default=True, help="Requests scored at once.")
@click.option(
    "--queue",
    type=click.IntRange(0),
    default=64,
    show_default=True,
    help="Requests waiting for a slot; past it 503 + Retry-After.",
)
@click.option(
    "--request-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=REQUEST_TIMEOUT_S,
    show_default=True,
    help="Seconds a request may take (504 past it; under OpenRLHF's 180 s client timeout).",
)
@click.option(
    "--read-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    help="Seconds a client may take to send a request (headers and body); slower connections are closed.",
)
@click.option(
    "--threads", type=click.IntRange(1), default=2, show_default=True, help="Scoring threads (batches scored at once)."
)
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="warning",
    show_default=True,
)
@executor_options
@reward_scheme_options
def serve_command(
    states: tuple[Path, ...],
    host: str,
    port: int,
    token_env: str | None,
    workers: int | None,
    max_body_bytes: int,
    max_items: int,
    concurrency: int,
    queue: int,
    request_timeout: float,
    read_timeout: float,
    threads: int,
    log_level: str,
    executor: str,
    ray_address: str | None,
    ray_cpus: float | None,
    ray_chunk: int | None,
    reward_scheme: str | None,
    reward_penalty: float | None,
    reference_suite: Path | None,
) -> None:
    """Serve rewards over HTTP from warm simulators until SIGTERM or Ctrl-C.

    STATES are run folders (hwtp run -o) or hwtp mutate output folders, as in $HWTP_STATES (used
    when none are given). POST /reward takes OpenRLHF's remote reward body, POST /verify NeMo
    Gym's verify body; GET /health and GET /metrics report. A stop lets accepted requests finish.
    """
    _require_extra()
    from hwtp.scoring.scheme import make_scheme

    make_scheme(reward_scheme, reward_penalty, reference_suite)  # refused before anything starts
    if executor == "ray":
        require_ray()
    elif ray_address or ray_cpus or ray_chunk:
        raise ConfigError("--ray-address, --ray-cpus and --ray-chunk need --executor ray")
    # imported on use: the service needs the optional serve extra (starlette, uvicorn)
    from hwtp import rewards
    from hwtp.sim import warm
    from hwtp.training.serve import server
    from hwtp.training.serve.app import create_app
    from hwtp.training.serve.limits import ServeLimits

    folders = [str(p) for p in states]
    if not folders:
        folders = [p for p in (env.get(env.STATES_VAR) or "").split(os.pathsep) if p]
    if not folders:
        raise ConfigError(f"no states: name run folders or hwtp mutate outputs, or set {env.STATES_VAR}")
    for folder in folders:
        if not Path(folder).is_dir():
            raise ConfigError(f"states folder {folder}: not found")
    token, token_var = _token(token_env)
    rewards.configure(
        states=folders,
        workers=workers,
        executor=executor,
        ray_address=ray_address,
        ray_cpus=ray_cpus,
        ray_chunk=ray_chunk,
        reward_scheme=reward_scheme,
        penalty=reward_penalty,
        reference=reference_suite,
    )
    scheme = rewards.settings().reward_scheme()  # $HWTP_REWARD_SCHEME when no option says
    limits = ServeLimits(
        max_body_bytes=max_body_bytes,
        max_items=max_items,
        concurrency=concurrency,
        queue=queue,
        request_timeout_s=request_timeout,
        read_timeout_s=read_timeout,
        scoring_threads=threads,
    )

    def shutdown() -> None:
        warm.close_all()
        rewards.reset()  # also stops the Ray actors of --executor ray

    app = create_app(
        rewards.score_completions,
        limits,
        token=token,
        states=folders,
        on_shutdown=shutdown,
        executor_stats=rewards.executor_stats,
    )
    try:
        sock = server.bind(host, port)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    auth = f"bearer token from ${token_var}" if token_var else "no token"

    def started() -> None:
        click.echo(
            f"hwtp serve: listening on http://{shown}:{bound_port} ({auth}; {len(folders)} states folder(s); "
            f"reward scheme {scheme.name})"
        )

    if token is None and not _loopback(bound_host):
        click.echo(_open_warning(shown), err=True)
    server.run(app, sock, log_level=log_level, on_started=started, read_timeout=limits.read_timeout_s)
    click.echo("hwtp serve: stopped")
