"""Ground truth of a reward request: which design, state and mutant set a completion is scored on.

It is what ``hwtp export`` writes for online trainers (``{"design", "state", "mutant_set"}``,
as a dict or as JSON text); never the answer. A malformed ground truth is a
:class:`~hwtp.errors.RewardError`, never a reward of 0.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hwtp.errors import RewardError

#: What a ground truth may be: the export's dict or its JSON text.
GroundTruthLike = Mapping[str, Any] | str | bytes
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_HASH = re.compile(r"^[0-9a-f]{64}$")
_MAX_TEXT = 4096
_KEYS = ("design", "state", "mutant_set")


@dataclass(frozen=True)
class GroundTruth:
    design: str
    state: str
    mutant_set: str  # sha256 of the mutant set (hwtp.mutators.mutantset.set_hash)

    def as_dict(self) -> dict[str, str]:
        return {"design": self.design, "state": self.state, "mutant_set": self.mutant_set}


def parse_truth(value: Any) -> GroundTruth:
    """A :class:`GroundTruth` from the export's dict or JSON text; anything else is refused."""
    data: Any = value
    if isinstance(data, bytes):
        data = data.decode("utf-8", errors="replace")
    if isinstance(data, str):
        if len(data) > _MAX_TEXT:
            raise RewardError(f"ground truth is {len(data)} characters long; expected a short JSON object")
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise RewardError(f"ground truth is not JSON: {exc}; expected an object with {', '.join(_KEYS)}") from None
    if data.__class__ is not dict and not isinstance(data, Mapping):
        raise RewardError(
            f"ground truth must be an object with keys {', '.join(_KEYS)} (as hwtp export writes), "
            f"not {type(data).__name__}"
        )
    design, state, mutant_set = texts = (data.get("design"), data.get("state"), data.get("mutant_set"))
    if design.__class__ is not str or state.__class__ is not str or mutant_set.__class__ is not str:
        missing = [k for k in _KEYS if k not in data]
        if missing:
            raise RewardError(f"ground truth lacks {', '.join(missing)} (keys: {', '.join(sorted(map(str, data)))})")
        for key, text in zip(_KEYS, texts, strict=True):
            if not isinstance(text, str):
                raise RewardError(f"ground truth {key} must be text, not {type(text).__name__}")
    return _checked(design, state, mutant_set)


@functools.lru_cache(maxsize=4096)
def _checked(design: str, state: str, mutant_set: str) -> GroundTruth:
    """The ground truth of three texts, checked (kept: a batch names few states, many times)."""
    if not _NAME.match(design):
        raise RewardError(f"ground truth design {design[:80]!r} is not a design name")
    if not _NAME.match(state):
        raise RewardError(f"ground truth state {state[:80]!r} is not a state name (golden or a mutant id)")
    if not _HASH.match(mutant_set):
        raise RewardError(f"ground truth mutant_set {mutant_set[:80]!r} is not a mutant set hash (64 hex digits)")
    return GroundTruth(design, state, mutant_set)
