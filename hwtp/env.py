"""The one place hwtp reads environment variables and default paths.

Every variable hwtp honours is listed here, so messages can name it and users can find it.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Overrides the build/response cache folder (default: the user cache dir).
CACHE_DIR_VAR = "HWTP_CACHE_DIR"
#: Points at a Verilator to use instead of the one found automatically.
VERILATOR_VAR = "HWTP_VERILATOR"
#: ``1`` lets designs call system tasks that run commands or write files (``$system``, ``$fopen``...).
ALLOW_SYSTEM_TASKS_VAR = "HWTP_ALLOW_SYSTEM_TASKS"
#: Folders (``os.pathsep``-separated) where reward functions find mutant sets: run folders or ``hwtp mutate`` outputs.
STATES_VAR = "HWTP_STATES"
#: Folders (``os.pathsep``-separated) of design folders, searched by name after ``--designs-dir``, before shipped.
DESIGNS_VAR = "HWTP_DESIGNS"
#: Simulator processes per warm pool (one pool per design and mutant set) of the reward functions.
REWARD_WORKERS_VAR = "HWTP_REWARD_WORKERS"
#: Where the reward functions simulate (``local`` or ``ray``) unless ``configure(executor=...)`` says.
REWARD_EXECUTOR_VAR = "HWTP_REWARD_EXECUTOR"
#: The reward scheme of the reward functions (``smu``, ``kill-fraction``, ``incremental``) unless ``configure`` says.
REWARD_SCHEME_VAR = "HWTP_REWARD_SCHEME"
#: The incremental scheme's penalty for a plan that kills nothing new, unless ``configure`` says.
REWARD_PENALTY_VAR = "HWTP_REWARD_PENALTY"
#: The incremental scheme's reference suite (a run folder or plans) unless ``configure`` says.
REWARD_REFERENCE_VAR = "HWTP_REWARD_REFERENCE"
#: Bounds of one schemata build: ``MUTANTS`` or ``MUTANTS,BYTES`` (hwtp.mutators.mutantset.part_bounds).
SCHEMATA_PART_VAR = "HWTP_SCHEMATA_PART"
#: Warm simulator processes kept alive across every pool (default :data:`DEFAULT_WARM_PROCESSES`):
#: past it, starting one stops the idlest elsewhere (hwtp.sim.warm).
WARM_PROCESSES_VAR = "HWTP_WARM_PROCESSES"
#: About 50 MB each (resident, the embedded designs), so about 3 GB at most; idle ones cost no CPU.
DEFAULT_WARM_PROCESSES = 64
#: Bearer token that ``hwtp serve`` requires when set (``--token-env`` names another variable).
SERVE_TOKEN_VAR = "HWTP_SERVE_TOKEN"  # noqa: S105 (the variable's name, not a token)
#: Default variable holding the API key of an OpenAI-compatible endpoint.
DEFAULT_API_KEY_VAR = "OPENAI_API_KEY"
#: Default cap on an endpoint's response body (bytes): far above any plan, far below a memory problem.
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024


def get(name: str) -> str | None:
    """Return the value of environment variable ``name``, or None when unset or empty."""
    value = os.environ.get(name)
    return value if value else None


def cache_dir() -> Path:
    """The root cache folder: ``$HWTP_CACHE_DIR``, else ``$XDG_CACHE_HOME/hwtp``, else ``~/.cache/hwtp``."""
    explicit = get(CACHE_DIR_VAR)
    if explicit:
        return Path(explicit).expanduser()
    xdg = get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "hwtp"


def api_key(var: str = DEFAULT_API_KEY_VAR) -> str | None:
    """The API key held in environment variable ``var`` (never logged or stored)."""
    return get(var)


def allow_system_tasks() -> bool:
    """Whether ``$HWTP_ALLOW_SYSTEM_TASKS`` opts in to RTL that runs commands or writes files."""
    return (get(ALLOW_SYSTEM_TASKS_VAR) or "").strip().lower() in ("1", "true", "yes")


def designs_path() -> list[Path]:
    """The folders of ``$HWTP_DESIGNS``, in order (each holds design folders ``NAME/design.yaml``)."""
    return [Path(p).expanduser() for p in (get(DESIGNS_VAR) or "").split(os.pathsep) if p.strip()]


def path_entries() -> list[str]:
    """The entries of ``$PATH``."""
    return [p for p in os.environ.get("PATH", "").split(os.pathsep) if p]


def base_environment() -> dict[str, str]:
    """A copy of the process environment, for building a subprocess environment."""
    return dict(os.environ)


#: Set by the host for the simulator process: path of the job file the harness runs.
JOB_VAR = "HWTP_JOB"
#: Set by the host for the simulator process: path of the JSON-lines results file.
RESULTS_VAR = "HWTP_RESULTS"
#: Set by the host for a warm simulator process: the Unix socket it takes evaluations from.
WARM_VAR = "HWTP_WARM"
#: Set by ``hwtp ci`` for a shared simulator process: its job file (:mod:`hwtp.ci.sharedtests`).
CI_SHARED_VAR = "HWTP_CI_SHARED"
#: Set by ``hwtp ci`` to observe the user's tests (activation, propagation): its job file (:mod:`hwtp.ci.observe`).
CI_OBSERVE_VAR = "HWTP_CI_OBSERVE"
#: ``true`` on GitHub Actions: ``hwtp ci`` prints workflow annotations for survivors.
GITHUB_ACTIONS_VAR = "GITHUB_ACTIONS"
