"""Configuration of ``hwtp run``: typed, frozen, loadable from ``hwtp.yaml`` (section ``run``,
handed over by :mod:`hwtp.config`, which reads the file).

Every field is also a command-line option; the command line wins over the file. The fields
that change results are the run's fingerprint, stored in the run folder: a changed
configuration is refused with what changed (or accepted with ``--force-new-stage``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from hwtp import yamlio
from hwtp.env import DEFAULT_MAX_RESPONSE_BYTES
from hwtp.errors import ConfigError
from hwtp.policy.planning import MAX_SAMPLES
from hwtp.scoring.scheme import DEFAULT_PENALTY, SMU, check_name
from hwtp.sim.cpus import usable_cpus
from hwtp.training.advantage import PRESETS
from hwtp.training.export import FORMATS

if TYPE_CHECKING:
    from hwtp.policy.policies import PolicySpec

STAGES = ("mutate", "plan", "score", "advantage", "export")
POLICIES = ("random", "openai", "replay")
GROUPINGS = ("state", "design", "batch")


class FieldError(ConfigError):
    """A configuration value that is wrong on its own or with others; ``field`` names it."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{_OPTIONS.get(field, '--' + field.replace('_', '-'))}: {problem}")
        self.field = field
        self.problem = problem


#: How an endpoint is reached (bounds, retries): never what it produces, so not fingerprinted.
_NOT_FINGERPRINTED = ("timeout", "retries", "max_response_bytes")
_OPTIONS = {"samples": "-G", "replay_from": "--from", "formats": "--format", "jobs": "-j"}


def check_url(url: str) -> str | None:
    """What is wrong with an endpoint URL (None: a well-formed http(s) URL)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError as exc:
        return f"{url!r} is not a valid URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{url!r} is not an http(s) URL, e.g. http://127.0.0.1:8000/v1"
    if any(c.isspace() for c in url):
        return f"{url!r} contains white space"
    return None


def check_field(key: str, value: Any) -> str | None:
    """What is wrong with one field's value on its own (None: nothing)."""

    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value}"
    at_least_one = ("states", "samples", "witness_cycles", "jobs", "concurrency", "batch_size", "max_tokens")
    if key in at_least_one and value is not None and value < 1:
        return f"must be at least 1, got {value}"
    if key == "samples" and value > MAX_SAMPLES:
        return f"must be at most {MAX_SAMPLES} plans per state, got {value}"
    if key == "policy" and value not in POLICIES:
        return f"unknown policy {value!r} (valid: {', '.join(POLICIES)})"
    if key == "group_by" and value not in GROUPINGS:
        return f"unknown grouping {value!r} (valid: {', '.join(GROUPINGS)})"
    if key == "preset" and value not in PRESETS:
        return f"unknown advantage preset {value!r} (valid: {', '.join(PRESETS)})"
    if key == "formats":
        if not value:
            return "name at least one export format"
        bad = [f for f in value if f not in FORMATS]
        if bad:
            return f"unknown export format {bad[0]!r} (valid: {', '.join(FORMATS)})"
    if key == "timeout" and not value > 0:
        return f"must be above 0 seconds, got {value}"
    if key == "retries" and value < 0:
        return f"must be at least 0, got {value}"
    if key == "max_response_bytes" and value < 1:
        return f"must be at least 1, got {value}"
    if key == "temperature" and value < 0:
        return f"must be at least 0, got {value}"
    if key == "reward_scheme":
        return check_name(value)
    if key == "reward_penalty" and not value >= 0:
        return f"must be at least 0, got {value}"
    if key == "top_p" and not 0 < value <= 1:
        return f"must be above 0 and at most 1, got {value}"
    return None


@dataclass(frozen=True)
class RunConfig:
    """What ``hwtp run`` does."""

    designs: tuple[str, ...] = ()  # shipped names, folders or files; empty: every shipped design
    states: int = 8  # mutants per design (plus golden)
    samples: int = 8  # G: plans per state
    seed: int = 0
    witness_cycles: int = 1000  # witness-search budget per mutant (killability)
    policy: str = "random"  # random, openai or replay
    endpoint: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int | None = None
    replay_from: str | None = None
    preset: str = "grpo-smu"
    group_by: str = "design"
    formats: tuple[str, ...] = ("jsonl",)
    batch_size: int | None = None
    jobs: int = usable_cpus()  # not part of the fingerprint: does not change results
    concurrency: int = 8  # not part of the fingerprint
    timeout: float = 300.0  # total deadline of one endpoint request, s; not part of the fingerprint
    retries: int = 5  # retries of a failed endpoint request; not part of the fingerprint
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES  # not part of the fingerprint
    reward_scheme: str = SMU  # hwtp.scoring.scheme: smu, kill-fraction or incremental
    reward_penalty: float = DEFAULT_PENALTY  # incremental: a plan that kills nothing new
    reference_suite: str | None = None  # incremental: a run folder or plans (the design's suite)

    def __post_init__(self) -> None:
        for f in fields(self):
            problem = check_field(f.name, getattr(self, f.name))
            if problem:
                raise FieldError(f.name, problem)
        if self.policy == "openai":
            if not (self.endpoint and self.model):
                raise FieldError("policy", "policy openai needs an endpoint and a model (--endpoint URL --model NAME)")
            problem = check_url(self.endpoint)
            if problem:
                raise FieldError("endpoint", problem)
        if self.policy == "replay" and not self.replay_from:
            raise FieldError("policy", "policy replay needs --from DIR")
        if self.reward_scheme == "incremental" and not self.reference_suite:
            raise FieldError("reward_scheme", "incremental needs --reference-suite PATH (a run folder or plans)")
        if self.reference_suite and self.reward_scheme != "incremental":
            raise FieldError("reference_suite", f"only the incremental scheme has one, not {self.reward_scheme!r}")

    def policy_spec(self) -> PolicySpec:
        """The configured policy's settings (a run's stop words, output format and cache are
        the policy's defaults)."""
        from hwtp.policy.policies import PolicySpec

        return PolicySpec(
            self.policy,
            seed=self.seed,
            replay_from=self.replay_from,
            endpoint=self.endpoint,
            model=self.model,
            api_key_env=self.api_key_env,
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
            concurrency=self.concurrency,
            timeout=self.timeout,
            retries=self.retries,
            max_response_bytes=self.max_response_bytes,
        )

    def fingerprint(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("jobs")
        data.pop("concurrency")
        for name in _NOT_FINGERPRINTED:
            data.pop(name)
        data["designs"] = list(self.designs)
        data["formats"] = list(self.formats)
        if self.reward_scheme == SMU:  # runs made before reward schemes keep their fingerprint
            for name in ("reward_scheme", "reward_penalty", "reference_suite"):
                data.pop(name)
        return data


#: The first stage each field affects (a change there redoes that stage and the later ones).
FIELD_STAGE = {
    "designs": "mutate",
    "states": "mutate",
    "seed": "mutate",
    "witness_cycles": "mutate",
    "samples": "plan",
    "policy": "plan",
    "endpoint": "plan",
    "model": "plan",
    "api_key_env": "plan",
    "temperature": "plan",
    "top_p": "plan",
    "max_tokens": "plan",
    "replay_from": "plan",
    "preset": "advantage",
    "group_by": "advantage",
    "reward_scheme": "score",
    "reward_penalty": "score",
    "reference_suite": "score",
    "formats": "export",
    "batch_size": "export",
}
_FILE_ALIASES = {"G": "samples", "group-by": "group_by", "format": "formats", "from": "replay_from"}


class FileValues(dict[str, Any]):
    """Values of a config file's ``run`` section; ``where[field]`` is ``file:line: run.key``."""

    def __init__(self, values: dict[str, Any], where: dict[str, str]) -> None:
        super().__init__(values)
        self.where = where


def from_document(path: Path, located: yamlio.Located) -> FileValues:
    """The ``run`` section of ``hwtp.yaml`` as :mod:`hwtp.config` loaded it, checked field by
    field (file:line: run.field: problem)."""
    section = located.data.get("run") or {}
    if not isinstance(section, dict):
        raise yamlio.located_error(ConfigError, path, located, ("run",), "expected a mapping")
    known = {f.name: f for f in fields(RunConfig)}
    out: dict[str, Any] = {}
    where_of: dict[str, str] = {}
    for raw_key, value in section.items():
        key = _FILE_ALIASES.get(raw_key, raw_key.replace("-", "_"))
        where = yamlio.place(path, located, ("run", raw_key))
        if key not in known:
            raise ConfigError(f"{where}: unknown field (valid: {', '.join(sorted(known))})")
        out[key] = _coerce(where, key, value)
        problem = check_field(key, out[key])
        if problem:
            raise ConfigError(f"{where}: {problem}")
        where_of[key] = where
    return FileValues(out, where_of)


def _coerce(where: str, key: str, value: Any) -> Any:
    if key in ("designs", "formats"):
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
            raise ConfigError(f"{where}: expected a list of names")
        return tuple(items)
    expected = {
        "states": int,
        "samples": int,
        "seed": int,
        "witness_cycles": int,
        "jobs": int,
        "concurrency": int,
        "retries": int,
        "max_response_bytes": int,
        "timeout": float,
        "temperature": float,
        "top_p": float,
        "max_tokens": int,
        "batch_size": int,
        "reward_penalty": float,
    }.get(key, str)
    if value is None and key in ("endpoint", "model", "max_tokens", "replay_from", "batch_size", "reference_suite"):
        return None
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, expected) or isinstance(value, bool):
        raise ConfigError(f"{where}: expected {expected.__name__}, got {value!r}")
    return value


def resolve(file_values: dict[str, Any], cli_values: dict[str, Any]) -> RunConfig:
    """Defaults < file < command line (``None`` on the command line means not given).

    A problem with a value that came from the file names the file, line and field.
    """
    given = {k: v for k, v in cli_values.items() if v is not None and v != ()}
    merged = dict(file_values)
    merged.update(given)
    try:
        return RunConfig(**merged)
    except FieldError as exc:
        where = getattr(file_values, "where", {}).get(exc.field)
        if where and exc.field not in given:
            raise ConfigError(f"{where}: {exc.problem}") from exc
        raise


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    return [(k, old.get(k), new.get(k)) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]


def first_stage(changed: list[tuple[str, Any, Any]]) -> str:
    return min((FIELD_STAGE.get(k, "mutate") for k, _, _ in changed), key=STAGES.index)
