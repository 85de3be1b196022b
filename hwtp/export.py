"""``hwtp export``: scored samples as training batches for external trainers.

Formats (README, "Export formats"):

- ``jsonl``: the base record of DESIGN.md, one line per (state, plan) sample: ``prompt``
  (chat messages exactly as sent), ``completion`` (exactly as received), ``reward``,
  ``advantage``, ``group``, ``design``, ``state``, ``plan``, ``outcome``, plus run metadata;
- ``parquet``: the same records (needs the ``parquet`` extra: pyarrow);
- ``trl``, ``verl``, ``openrlhf``, ``nemo-rl``: prompt datasets for online trainers, one row
  per state, whose ground truth names what a reward function needs to score a completion
  later (design, state, mutant set hash), never the answer.

``--batch-size N`` writes shards that never cut a group in half, and a manifest with each
shard's record count and sha256.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwtp import __version__
from hwtp.errors import ConfigError

FORMATS = ("jsonl", "parquet", "trl", "verl", "openrlhf", "nemo-rl")
_ABS_PATH = re.compile(r"(?<![\w.])/(?:[\w.+-]+/)+([\w.+-]+)")


@dataclass(frozen=True)
class ExportOptions:
    format: str = "jsonl"
    batch_size: int | None = None
    metadata: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ConfigError(f"--format {self.format!r}: valid formats are {', '.join(FORMATS)}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ConfigError("--batch-size must be at least 1")


def scrub(value: Any) -> Any:
    """Replace absolute paths in strings by their last component (no local paths in exports)."""
    if isinstance(value, str):
        return _ABS_PATH.sub(lambda m: m.group(1), value)
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def base_records(
    advantaged: Sequence[dict[str, Any]], plans: dict[str, dict[str, Any]], metadata: dict[str, Any]
) -> list[dict[str, Any]]:
    """Join advantage records with the plan records of ``hwtp plan`` (prompt and completion)."""
    out = []
    for r in advantaged:
        plan = plans.get(str(r["plan"]), {})
        out.append(
            scrub(
                {
                    "prompt": plan.get("prompt"),
                    "completion": plan.get("completion"),
                    "reward": r["reward"],
                    "advantage": r["advantage"],
                    "group": r["group"],
                    "design": r["design"],
                    "state": r["state"],
                    "plan": r["plan"],
                    "outcome": r["outcome"],
                    "detail": r.get("detail"),
                    "mutant_set": r.get("mutant_set", ""),
                    "model": plan.get("model"),
                    "policy": plan.get("policy"),
                    "meta": metadata,
                }
            )
        )
    return out


def ground_truth(record: dict[str, Any]) -> dict[str, Any]:
    return {"design": record["design"], "state": record["state"], "mutant_set": record["mutant_set"]}


def prompt_rows(records: Sequence[dict[str, Any]], fmt: str) -> list[dict[str, Any]]:
    """One row per (design, state) prompt, shaped for the trainer ``fmt``."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        if r["prompt"] is None:
            raise ConfigError(
                f"plan {r['plan']} has no stored prompt: trainer formats need plans from `hwtp plan` "
                "(pass --plans PLANDIR) or a run folder"
            )
        seen.setdefault((r["design"], r["state"]), r)
    rows = []
    for r in seen.values():
        truth = ground_truth(r)
        if fmt == "trl":
            rows.append({"prompt": r["prompt"], "design": r["design"], "state": r["state"], "ground_truth": truth})
        elif fmt == "verl":
            rows.append(
                {
                    "data_source": f"hwtp/{r['design']}",
                    "prompt": r["prompt"],
                    "ability": "hardware-test-planning",
                    "reward_model": {"style": "rule", "ground_truth": json.dumps(truth, sort_keys=True)},
                    "extra_info": {"design": r["design"], "state": r["state"], "group": r["group"]},
                }
            )
        elif fmt == "openrlhf":
            rows.append({"input": r["prompt"], "label": json.dumps(truth, sort_keys=True)})
        else:  # nemo-rl
            rows.append({"input": r["prompt"], "output": json.dumps(truth, sort_keys=True), "task_name": "hwtp"})
    return rows


def shard(records: Sequence[dict[str, Any]], batch_size: int | None, key: str = "group") -> list[list[dict[str, Any]]]:
    """Split into shards of about ``batch_size`` records without cutting a group in half."""
    if not batch_size:
        return [list(records)]
    groups: dict[Any, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(r.get(key, id(r)), []).append(r)
    shards: list[list[dict[str, Any]]] = [[]]
    for members in groups.values():
        if shards[-1] and len(shards[-1]) + len(members) > batch_size:
            shards.append([])
        shards[-1].extend(members)
    return [s for s in shards if s]


def _jsonl(rows: Iterable[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def _parquet(rows: list[dict[str, Any]], path: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ConfigError("parquet output needs pyarrow: pip install 'hwtp[parquet]'") from exc
    table = pa.Table.from_pylist([{k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in r.items()}
                                  for r in rows])
    pq.write_table(table, path)


def write_export(records: Sequence[dict[str, Any]], options: ExportOptions, out: Path) -> Path:
    """Write the export; returns the manifest path. ``out`` is a folder."""
    rows = list(records) if options.format in ("jsonl", "parquet") else prompt_rows(records, options.format)
    key = "group" if options.format in ("jsonl", "parquet") else "_none"
    out.mkdir(parents=True, exist_ok=True)
    suffix = "parquet" if options.format == "parquet" else "jsonl"
    entries: list[dict[str, Any]] = []
    for i, part in enumerate(shard(rows, options.batch_size, key)):
        path = out / f"{options.format}-{i:05d}.{suffix}"
        if suffix == "parquet":
            _parquet(part, path)
        else:
            path.write_bytes(_jsonl(part))
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        groups = len({r.get("group") for r in part}) if key == "group" else None
        entries.append({"file": path.name, "records": len(part), "groups": groups, "sha256": digest})
    manifest = {
        "format": options.format,
        "hwtp_version": __version__,
        "records": sum(e["records"] for e in entries),
        "shards": entries,
        "metadata": dict(options.metadata),
    }
    path = out / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
