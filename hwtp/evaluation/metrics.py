"""Estimators of ``hwtp eval``: pass@k, Wilson intervals for rates, bootstrap over designs."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

#: z of a two-sided 95% interval.
Z95 = 1.959963984540054


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of one problem with ``n`` samples of which ``c`` are correct:
    ``1 - C(n-c, k) / C(n, k)`` (the chance that k of the n samples, drawn without
    replacement, hold at least one correct one)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def wilson(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a binomial rate (95% by default); (0, 1) with no trials."""
    if trials <= 0:
        return (0.0, 1.0)
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def bootstrap(
    items: Sequence[T], statistic: Callable[[Sequence[T]], float], resamples: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """The 95% percentile interval of ``statistic`` over ``items`` (designs) resampled with
    replacement, seeded so the same evaluation gives the same interval."""
    if not items:
        return (0.0, 1.0)
    rng = random.Random(seed)
    values = sorted(statistic([items[rng.randrange(len(items))] for _ in items]) for _ in range(resamples))
    low = values[int(0.025 * (resamples - 1))]
    high = values[math.ceil(0.975 * (resamples - 1))]
    return (low, high)
