"""Choosing an executor by name (``--executor local|ray``)."""

from __future__ import annotations

import importlib.util

from hwtp.errors import ConfigError
from hwtp.sim.executors.base import EXECUTORS, Executor
from hwtp.sim.executors.local import LocalExecutor
from hwtp.sim.executors.warm import WarmExecutor

RAY_HINT = "--executor ray needs the ray extra: pip install 'hwtp[ray]'"


def require_ray() -> None:
    """A clear :class:`ConfigError` (exit 2) when Ray is not installed."""
    try:
        found = importlib.util.find_spec("ray") is not None
    except ValueError:  # a module set to None in sys.modules
        found = False
    if not found:
        raise ConfigError(RAY_HINT)


def make_executor(
    name: str,
    address: str | None = None,
    jobs: int = 1,
    isolated: bool = False,
    cpus: float | None = None,
    chunk: int | None = None,
    warm: bool = False,
    idle_seconds: float = 300.0,
) -> Executor:
    """``local`` (``jobs`` processes, or one per evaluation with ``isolated``; with ``warm``,
    ``jobs`` processes per mutant set kept alive between calls, stopped after ``idle_seconds``
    without work) or ``ray`` (actors on the cluster at ``address``; ``cpus`` per actor,
    ``chunk`` evaluations per call; its actors are always warm)."""
    if name == "local":
        if address is not None:
            raise ConfigError("--ray-address needs --executor ray")
        if warm:
            if isolated:
                raise ConfigError("warm processes are never isolated")
            return WarmExecutor(workers=jobs, idle_seconds=idle_seconds)
        return LocalExecutor(jobs=jobs, isolated=isolated)
    if name == "ray":
        if isolated:
            raise ConfigError("--isolated runs on the local executor only")
        require_ray()
        # imported on use: it imports ray, the optional ray extra
        from hwtp.sim.executors.ray import RayExecutor

        return RayExecutor(address=address, cpus=cpus, chunk=chunk)
    raise ConfigError(f"unknown executor {name!r} (valid: {', '.join(EXECUTORS)})")
