"""Content identity of a design and deterministic train/validation/test splits by design.

A design's split is a pure function of its identity (the sha256 of its RTL texts, sorted,
line endings normalised: file names, spec and folder name do not count) and the split
settings (ratios, salt): adding or removing designs never moves another one, and two
designs with the same RTL are one design (``hwtp designs import`` keeps only one), so the
same RTL can never sit in two splits.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwtp.errors import ConfigError
from hwtp.rtl.design import Design, designs_in, load_design

SPLITS = ("train", "validation", "test")
SPLITS_JSON = "splits.json"
DEFAULT_RATIOS = (0.8, 0.1, 0.1)
DEFAULT_SALT = "hwtp"


def content_identity(texts: Iterable[str]) -> str:
    """sha256 of RTL texts, order and line endings ignored: what makes two designs the same."""
    h = hashlib.sha256()
    for text in sorted(t.replace("\r\n", "\n") for t in texts):
        h.update(f"{len(text)}\0".encode())
        h.update(text.encode("utf-8", errors="surrogatepass"))
    return h.hexdigest()


def design_identity(design: Design) -> str:
    return content_identity(s.text for s in design.sources)


@dataclass(frozen=True)
class SplitSettings:
    """Shares of train, validation and test (summing to 1) and the salt of the hash."""

    ratios: tuple[float, float, float] = DEFAULT_RATIOS
    salt: str = DEFAULT_SALT

    def __post_init__(self) -> None:
        if len(self.ratios) != 3 or any(r < 0 for r in self.ratios) or abs(sum(self.ratios) - 1) > 1e-9:
            raise ConfigError(f"split ratios {self.ratios}: expected three shares >= 0 summing to 1, e.g. 0.8,0.1,0.1")

    def as_dict(self) -> dict[str, Any]:
        return {"ratios": list(self.ratios), "salt": self.salt}


def parse_ratios(text: str) -> tuple[float, float, float]:
    """``0.8,0.1,0.1`` (or ``80,10,10``: normalised) as three shares."""
    try:
        parts = [float(p) for p in text.split(",")]
    except ValueError:
        raise ConfigError(f"--ratios {text!r}: expected three numbers, e.g. 0.8,0.1,0.1") from None
    if len(parts) != 3 or any(p < 0 for p in parts) or sum(parts) <= 0:
        raise ConfigError(f"--ratios {text!r}: expected three numbers >= 0, e.g. 0.8,0.1,0.1")
    total = sum(parts)
    return (parts[0] / total, parts[1] / total, parts[2] / total)


def assign(identity: str, settings: SplitSettings) -> str:
    """The split of a design of this identity: its salted hash read as a number in [0, 1)."""
    digest = hashlib.sha256(f"{settings.salt}\0{identity}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    edge = 0.0
    for name, share in zip(SPLITS, settings.ratios, strict=True):
        edge += share
        if u < edge:
            return name
    return SPLITS[-1]


def load_settings(folder: Path) -> SplitSettings:
    """The settings ``hwtp designs split`` recorded in ``folder/splits.json``, else the defaults."""
    path = folder / SPLITS_JSON
    if not path.is_file():
        return SplitSettings()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return SplitSettings(tuple(float(r) for r in data["ratios"]), str(data["salt"]))  # type: ignore[arg-type]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: malformed ({exc}); delete it and run hwtp designs split again") from exc


def split_folder(folder: Path, settings: SplitSettings | None = None) -> dict[str, list[str]]:
    """Every design folder in ``folder`` by split (names sorted)."""
    settings = settings or load_settings(folder)
    out: dict[str, list[str]] = {s: [] for s in SPLITS}
    for name in designs_in(folder):
        out[assign(design_identity(load_design(folder / name)), settings)].append(name)
    return out


def write_splits(folder: Path, settings: SplitSettings) -> dict[str, list[str]]:
    """Split ``folder``'s designs and record the result (and its settings) in ``splits.json``."""
    splits = split_folder(folder, settings)
    doc = settings.as_dict() | {"splits": splits}
    path = folder / SPLITS_JSON
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return splits


def designs_of(folders: Sequence[Path], split: str) -> list[str]:
    """Names of the designs of ``split`` in these folders of designs (each with its own settings)."""
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r} (valid: {', '.join(SPLITS)})")
    if not folders:
        raise ConfigError("a split needs --designs-dir (or HWTP_DESIGNS): the folder of designs to split")
    names: list[str] = []
    for folder in folders:
        names.extend(n for n in split_folder(folder)[split] if n not in names)
    return names
