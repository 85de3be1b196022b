"""``hwtp ci --shard I/N`` and ``hwtp ci merge``: one run split over CI jobs, and put back together.

Shard ``I`` of ``N`` runs every ``N``-th valid mutant starting from the ``I``-th (the mutants and
their order come from ``hwtp mutate`` with the same seed, so every job agrees on them without
talking to the others) and writes its JSON report, which also lists every valid mutant's id.
``merge`` checks that the reports are the ``N`` shards of one run (same design, seed, settings,
each shard once, every mutant once) and returns the report of the whole run: its mutants in the
unsharded order, so that its score, gate and every rendering (JUnit, Markdown, lcov, JSON) are
those of an unsharded run, apart from wall-clock times (the longest shard's are kept).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from hwtp import yamlio
from hwtp.ci.mutation import CiReport
from hwtp.errors import ConfigError

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
#: Fields every shard of one run has in common.
_SAME = ("design", "top", "seed", "since", "min_score", "test_modules", "timeouts_as", "rejected")


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` (1 <= I <= N) as (I, N); a clear error otherwise."""
    m = _SHARD.match(text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise ConfigError(f"--shard {text!r}: expected I/N with 1 <= I <= N, e.g. 2/4")
    return int(m.group(1)), int(m.group(2))


def _load(path: Path) -> dict[str, Any]:
    text = yamlio.read_text(path, ConfigError)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: not JSON ({exc.msg})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("shard"), dict):
        raise ConfigError(f"{path}: not the JSON report of a sharded hwtp ci run (hwtp ci --shard I/N --json FILE)")
    return data


def merge(paths: Sequence[Path], root: Path) -> CiReport:
    """The whole run's report from its shards' JSON reports (see the module docstring)."""
    docs = [(p, _load(p)) for p in paths]
    first_path, first = docs[0]
    count = int(first["shard"]["count"])
    order = list(first["shard"]["order"])
    seen: dict[int, Path] = {}
    for path, doc in docs:
        for key in _SAME:
            if doc.get(key) != first.get(key):
                raise ConfigError(f"{path}: {key} differs from {first_path}: not shards of one run")
        if int(doc["shard"]["count"]) != count or list(doc["shard"]["order"]) != order:
            raise ConfigError(f"{path}: another split of the mutants than {first_path}: not shards of one run")
        index = int(doc["shard"]["index"])
        if index in seen:
            raise ConfigError(f"{path}: shard {index}/{count} is also {seen[index]}")
        seen[index] = path
    missing = sorted(set(range(1, count + 1)) - set(seen))
    if missing:
        raise ConfigError(f"shards missing: {', '.join(f'{i}/{count}' for i in missing)} (give all {count} reports)")
    reports = [CiReport.from_dict(doc, root) for _p, doc in docs]
    by_id = {m.id: m for r in reports for m in r.mutants}
    if sorted(by_id) != sorted(order) or sum(len(r.mutants) for r in reports) != len(order):
        raise ConfigError("the shards do not hold every mutant exactly once")
    base = min(reports, key=lambda r: r.shard or (0, 0))
    return replace(
        base,
        mutants=tuple(by_id[i] for i in order),
        shard=None,
        order=(),
        baseline=None,
        build_seconds=max(r.build_seconds for r in reports),
        build_cached=all(r.build_cached for r in reports),
        seconds=max(r.seconds for r in reports),
        golden=max((r.golden for r in reports), key=lambda g: g.seconds),
        timeout_s=max(r.timeout_s for r in reports),
    )
