"""Configuration of ``hwtp run``: typed, frozen, loadable from ``hwtp.yaml`` (section ``run``).

Every field is also a command-line option; the command line wins over the file. The fields
that change results are the run's fingerprint, stored in the run folder: a changed
configuration is refused with what changed (or accepted with ``--force-new-stage``).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from hwtp import yamlio
from hwtp.errors import ConfigError

STAGES = ("mutate", "plan", "score", "advantage", "export")


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
    jobs: int = os.cpu_count() or 1  # not part of the fingerprint: does not change results
    concurrency: int = 8  # not part of the fingerprint

    def __post_init__(self) -> None:
        if self.states < 1 or self.samples < 1:
            raise ConfigError("--states and -G must be at least 1")
        if self.policy not in ("random", "openai", "replay"):
            raise ConfigError(f"policy {self.policy!r}: valid policies are random, openai, replay")
        if self.policy == "openai" and not (self.endpoint and self.model):
            raise ConfigError("policy openai needs an endpoint and a model (--endpoint URL --model NAME)")
        if self.policy == "replay" and not self.replay_from:
            raise ConfigError("policy replay needs --from DIR")
        if self.group_by not in ("state", "design", "batch"):
            raise ConfigError(f"group_by {self.group_by!r}: valid values are state, design, batch")

    def fingerprint(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("jobs")
        data.pop("concurrency")
        data["designs"] = list(self.designs)
        data["formats"] = list(self.formats)
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
    "formats": "export",
    "batch_size": "export",
}
_FILE_ALIASES = {"G": "samples", "group-by": "group_by", "format": "formats", "from": "replay_from"}


def load_file(path: Path) -> dict[str, Any]:
    """The ``run`` section of a config file, checked field by field (file:line: field: problem)."""
    try:
        located = yamlio.load(path.read_text(encoding="utf-8"))
    except yamlio.YamlLoadError as exc:
        raise ConfigError(f"{path}:{exc.line or 1}: {exc.message}") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    data = located.data or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping")
    section = data.get("run", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{path}:{located.line_of(('run',))}: run: expected a mapping")
    known = {f.name: f for f in fields(RunConfig)}
    out: dict[str, Any] = {}
    for raw_key, value in section.items():
        key = _FILE_ALIASES.get(raw_key, raw_key.replace("-", "_"))
        where = f"{path}:{located.line_of(('run', raw_key))}: run.{raw_key}"
        if key not in known:
            raise ConfigError(f"{where}: unknown field (valid: {', '.join(sorted(known))})")
        out[key] = _coerce(where, key, value)
    return out


def _coerce(where: str, key: str, value: Any) -> Any:
    if key in ("designs", "formats"):
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise ConfigError(f"{where}: expected a list of names")
        return tuple(items)
    expected = {
        "states": int,
        "samples": int,
        "seed": int,
        "witness_cycles": int,
        "jobs": int,
        "concurrency": int,
        "temperature": float,
        "top_p": float,
        "max_tokens": int,
        "batch_size": int,
    }.get(key, str)
    if value is None and key in ("endpoint", "model", "max_tokens", "replay_from", "batch_size"):
        return None
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, expected) or isinstance(value, bool):
        raise ConfigError(f"{where}: expected {expected.__name__}, got {value!r}")
    return value


def resolve(file_values: dict[str, Any], cli_values: dict[str, Any]) -> RunConfig:
    """Defaults < file < command line (``None`` on the command line means not given)."""
    merged = dict(file_values)
    merged.update({k: v for k, v in cli_values.items() if v is not None and v != ()})
    return RunConfig(**merged)


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    return [(k, old.get(k), new.get(k)) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]


def first_stage(changed: list[tuple[str, Any, Any]]) -> str:
    return min((FIELD_STAGE.get(k, "mutate") for k, _, _ in changed), key=STAGES.index)
