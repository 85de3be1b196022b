"""Across-seed intervals: mean, spread (min..max) and a Student-t 95% interval of the mean."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

# two-sided 95% Student-t quantiles by degrees of freedom (1..10); above that, the normal's
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def interval(values: Sequence[float]) -> dict[str, Any]:
    """``mean``, ``min``, ``max``, ``sd`` (ddof 1), ``lo``/``hi`` (95% t-interval; the mean
    itself with one value) and ``n``."""
    n = len(values)
    if n == 0:
        return {"n": 0, "mean": None, "min": None, "max": None, "sd": None, "lo": None, "hi": None}
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    t = _T95[n - 2] if 2 <= n <= len(_T95) + 1 else 1.96
    half = t * sd / math.sqrt(n) if n > 1 else 0.0
    return {
        "n": n,
        "mean": mean,
        "min": min(values),
        "max": max(values),
        "sd": sd,
        "lo": mean - half,
        "hi": mean + half,
    }
