"""``hwtp eval``'s estimators and reports (the simulated evaluation is in test_designs_import.py)."""

from __future__ import annotations

import math

import pytest

from hwtp.evaluation import render
from hwtp.evaluation.evaluate import _pass_at, reason_kind
from hwtp.evaluation.metrics import bootstrap, pass_at_k, wilson
from hwtp.scoring.score import Outcome, SampleResult


def test_pass_at_k_hand_computed() -> None:
    # n=5 samples, c=2 correct, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)  # k=1 is the plain rate
    assert pass_at_k(4, 0, 4) == 0.0 and pass_at_k(4, 1, 4) == 1.0
    assert pass_at_k(6, 5, 2) == 1.0  # n-c < k: every draw of 2 holds a correct one
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


def test_pass_at_k_over_states() -> None:
    # golden: 1 of 4 correct; m0001: 2 of 4 -> pass@2 = mean(1 - C(3,2)/C(4,2), 1 - C(2,2)/C(4,2))
    def sample(state: str, i: int, ok: bool) -> SampleResult:
        return SampleResult(f"{state}-s{i}", state, Outcome.DETECTED if ok else Outcome.GOLDEN_FAIL, 0.0)

    results = [sample("golden", i, i == 0) for i in range(4)] + [sample("m0001", i, i < 2) for i in range(4)]
    got = _pass_at(results, [1, 2, 4], lambda r: r.outcome == Outcome.DETECTED, None)
    assert got["1"] == pytest.approx((1 / 4 + 2 / 4) / 2)
    assert got["2"] == pytest.approx(((1 - 3 / 6) + (1 - 1 / 6)) / 2)
    assert got["4"] == 1.0


def test_wilson_and_bootstrap() -> None:
    low, high = wilson(8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)
    assert wilson(0, 0) == (0.0, 1.0)
    values = [0.1, 0.2, 0.3, 0.9]
    ci = bootstrap(values, lambda xs: sum(xs) / len(xs))
    assert ci == bootstrap(values, lambda xs: sum(xs) / len(xs))  # seeded
    assert 0.1 <= ci[0] < sum(values) / 4 < ci[1] <= 0.9
    assert not math.isnan(ci[0])


def test_reason_kinds_group_particulars() -> None:
    a = reason_kind("completion: test 'a' step 3 (expect): unknown port 'foo' (valid: y)")
    b = reason_kind("completion: test 'b' step 7 (expect): unknown port 'bar' (valid: y)")
    assert a == b and "unknown port" in a


def _doc(golden: float, detect: float) -> dict:
    numbers = {
        "golden_pass_rate": golden,
        "detection_rate": detect,
        "pass_at_k": {"golden": {"1": golden}, "detect": {"1": detect}},
    }
    return {"settings": {"policy": "random", "seed": 0}, "overall": numbers, "designs": {"inc": numbers}}


def test_compare_side_by_side() -> None:
    doc = render.compare(_doc(0.5, 0.25), _doc(0.75, 0.5), ("base", "trained"))
    assert doc["overall"]["golden_pass_rate"]["delta"] == pytest.approx(0.25)
    assert doc["overall"]["detect_pass@1"] == {"base": 0.25, "trained": 0.5, "delta": 0.25}
    text = render.compare_markdown(doc)
    assert "| golden pass rate | 50.0% | 75.0% | +25.0 pt |" in text
    assert "| inc | 50.0% | 75.0% | 25.0% | 50.0% |" in text
