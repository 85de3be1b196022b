"""Repetitions of a benchmark's measurements and their summary, shared by the scripts in bench/.

Each figure a benchmark prints is the median of at least three repetitions with its range
(min..max); a ratio is taken inside each repetition (baseline and hwtp measured back to back,
their order swapped on every other repetition so load drift hits both) and then summarised the
same way. The machine's load average is printed at the start and the end of the run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

MIN_REPS = 3
T = TypeVar("T")


@dataclass(frozen=True)
class Spread:
    """Values of one figure over the repetitions."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    def show(self, spec: str = ".2f", unit: str = "") -> str:
        """``median unit (min..max)``, e.g. ``12.9x (12.1..13.6)``."""
        return f"{self.median:{spec}}{unit} ({self.low:{spec}}..{self.high:{spec}})"


def spread(values: Sequence[float]) -> Spread:
    if not values:
        raise ValueError("no repetitions to summarise")
    return Spread(tuple(values))


def ratios(numerators: Sequence[float], denominators: Sequence[float]) -> Spread:
    """The ratio of each repetition's pair, summarised (never the ratio of two medians)."""
    if len(numerators) != len(denominators):
        raise ValueError("ratios need one pair per repetition")
    return spread([n / d for n, d in zip(numerators, denominators, strict=True)])


def add_reps_argument(parser: argparse.ArgumentParser, default: int = MIN_REPS) -> None:
    parser.add_argument(
        "--reps", type=_reps, default=default, help=f"repetitions, interleaved (at least {MIN_REPS}; default {default})"
    )


def _reps(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < MIN_REPS:
        raise argparse.ArgumentTypeError(f"at least {MIN_REPS} repetitions, for a spread (got {value})")
    return value


def interleaved(reps: int, runs: Mapping[str, Callable[[], T]]) -> dict[str, list[T]]:
    """Run every measurement once per repetition, in the given order on even repetitions and in
    reverse on odd ones; return each one's results in repetition order."""
    names = list(runs)
    out: dict[str, list[T]] = {name: [] for name in names}
    for rep in range(reps):
        for name in names if rep % 2 == 0 else reversed(names):
            out[name].append(runs[name]())
    return out


Clock = tuple[float, float]  # (wall seconds, CPU seconds of this process, all its threads)


def clock() -> Clock:
    """Now, on both clocks: CPU time is what a benchmark's own code costs, far less sensitive
    than wall time to other work on the machine."""
    return time.perf_counter(), time.process_time()


def since(start: Clock) -> Clock:
    wall, cpu = clock()
    return wall - start[0], cpu - start[1]


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} / {five:.1f} / {fifteen:.1f} (1 / 5 / 15 min) on {os.cpu_count()} cores"


@contextmanager
def load_report(title: str) -> Iterator[None]:
    """Print the title and the load average, run the benchmark, print the load average again."""
    print(f"{title}\nload average at start: {load_average()}", flush=True)
    yield
    print(f"load average at end: {load_average()}", flush=True)


@contextmanager
def private_cache(prefix: str = "hwtp-bench-cache-") -> Iterator[Path]:
    """An empty hwtp cache folder (``HWTP_CACHE_DIR``) for the block: builds, mutant
    validation and recorded verdicts start from nothing and leave nothing for later rows."""
    saved = os.environ.get("HWTP_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        os.environ["HWTP_CACHE_DIR"] = tmp
        try:
            yield Path(tmp)
        finally:
            if saved is None:
                os.environ.pop("HWTP_CACHE_DIR", None)
            else:
                os.environ["HWTP_CACHE_DIR"] = saved
