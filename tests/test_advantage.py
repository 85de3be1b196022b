"""Advantages: trainer check values (README presets), presets, grouping and properties."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hwtp.errors import ConfigError, ScoreError
from hwtp.training.advantage import (
    OUTCOMES,
    PRESETS,
    AdvantageConfig,
    AdvantageSummary,
    advantage_records,
    compute_advantages,
    describe_zero_share,
    flatten_scores,
    group_ids,
    preset,
    summarize,
    zero_advantage_share,
)

ONE_GROUP = [0, 0, 0, 0]
MEAN_BASELINE = [name for name, cfg in PRESETS.items() if cfg.baseline == "mean"]
STD_SCALED = [name for name, cfg in PRESETS.items() if cfg.scale != "none"]


# ---------------------------------------------------------------------------------------------
# A reference implementation: plain Python, one group at a time, straight from the definitions.


def _std(xs: list[float], ddof: int) -> float:
    if len(set(xs)) <= 1 or len(xs) <= ddof:
        return 0.0
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - ddof))


def reference(rewards: list[float], groups: list[Any], cfg: AdvantageConfig,
              outcomes: list[str] | None = None) -> list[float]:
    kept = [outcomes is None or o not in cfg.exclude_outcomes for o in outcomes or rewards]
    members: dict[Any, list[int]] = {}
    for i, g in enumerate(groups):
        if kept[i]:
            members.setdefault(g, []).append(i)
    batch_sigma = _std([r for r, k in zip(rewards, kept, strict=True) if k], cfg.ddof)
    out = [0.0] * len(rewards)
    for idx in members.values():
        vals = [rewards[i] for i in idx]
        n = len(vals)
        for pos, i in enumerate(idx):
            r = vals[pos]
            others = vals[:pos] + vals[pos + 1:]
            if n == 1:
                raw = r if cfg.scale == "none" else r / (1 + cfg.epsilon)
                a = raw if cfg.singleton == "raw" else 0.0
            elif len(set(vals)) == 1:
                a = 0.0
            else:
                b = sum(vals) / n if cfg.baseline == "mean" else sum(others) / (n - 1)
                sigma = {"none": 1.0, "group-std": _std(vals, cfg.ddof),
                         "leave-one-out-std": _std(others, cfg.ddof),
                         "batch-std": batch_sigma}[cfg.scale]
                if cfg.scale == "none":
                    a = r - b
                elif cfg.epsilon_mode == "add" or sigma > 0:
                    a = (r - b) / (sigma + cfg.epsilon)
                else:
                    a = r - b
            if cfg.clip is not None:
                a = max(-cfg.clip, min(cfg.clip, a))
            out[i] = a
    return out


# ---------------------------------------------------------------------------------------------
# Check values every implementation must meet (the trainers' formulas, float64).


@pytest.mark.parametrize(
    ("name", "rewards", "expected", "atol"),
    [
        ("trl", [1, 1, 0, 0], [0.865875, 0.865875, -0.865875, -0.865875], 1e-6),
        ("verl", [1, 1, 0, 0], [0.866024, 0.866024, -0.866024, -0.866024], 1e-6),
        ("openrlhf", [1, 1, 0, 0], [0.866025, 0.866025, -0.866025, -0.866025], 1e-6),
        ("grpo", [1, 1, 0, 0], [0.866025, 0.866025, -0.866025, -0.866025], 1e-6),
        ("rloo", [1, 1, 0, 0], [0.666667, 0.666667, -0.666667, -0.666667], 1e-6),
        ("nemo-rl", [1, 1, 0, 0], [1.154699, 1.154699, -1.154699, -1.154699], 1e-6),
        ("dr-grpo", [1, 1, 0, 0], [0.5, 0.5, -0.5, -0.5], 1e-12),
        ("trl", [1, 0, 0, 0], [1.4997, -0.4999, -0.4999, -0.4999], 1e-4),
        ("rloo", [1, 0, 0, 0], [1.0, -0.333333, -0.333333, -0.333333], 1e-6),
        ("nemo-rl", [1, 0, 0, 0], [1.0, -0.577349, -0.577349, -0.577349], 1e-6),
    ],
)
def test_trainer_check_values(name: str, rewards: list[int], expected: list[float],
                              atol: float) -> None:
    got = compute_advantages(rewards, ONE_GROUP, PRESETS[name])
    np.testing.assert_allclose(got, expected, rtol=0, atol=atol)
    assert got.dtype == np.float64


def test_mean_only_is_verl_without_std() -> None:
    got = compute_advantages([1, 1, 0, 0], ONE_GROUP, preset("verl", scale="none"))
    np.testing.assert_allclose(got, [0.5, 0.5, -0.5, -0.5], atol=1e-12)


@pytest.mark.parametrize("name", list(PRESETS))
@pytest.mark.parametrize("value", [0.0, 1.0, 2.0, 0.1, -7.3, 1e6 + 0.1])
def test_constant_groups_give_exact_zeros(name: str, value: float) -> None:
    rewards = [value] * 8 + [value] * 2 + [0.0, 1.0]
    groups = [0] * 8 + [1] * 2 + [2, 2]
    got = compute_advantages(rewards, groups, PRESETS[name])
    assert np.all(got[:10] == 0.0)


def test_seed_case_1_full_group_sigma_amplifies_the_sparse_success() -> None:
    rewards = [2, 1, 1, 1, 1, 1, 1, 1]
    smu = compute_advantages(rewards, [0] * 8, PRESETS["grpo-smu"])
    loo = compute_advantages(rewards, [0] * 8, PRESETS["nemo-rl"])
    assert smu[0] == pytest.approx(1.0 / 0.35355, abs=1e-3)
    assert smu[0] == pytest.approx(math.sqrt(8), abs=1e-3)
    assert round(float(smu[0]), 2) == 2.83
    assert loo[0] == 1.0  # σ of the other seven is 0: left unscaled
    assert smu[0] > 2 * loo[0]


def test_seed_case_1_mean_baseline_population_sigma_form_gives_sqrt_8() -> None:
    cfg = AdvantageConfig(baseline="mean", scale="group-std", ddof=0, epsilon=0.0,
                          epsilon_mode="where-positive")
    got = compute_advantages([2] + [1] * 8, [0] * 9, cfg)
    assert got[0] == pytest.approx(math.sqrt(8), rel=1e-12)


def test_trl_batch_takes_sigma_over_the_batch_and_mean_per_group() -> None:
    rewards = np.array([1, 1, 0, 0, 2, 0, 0, 0, 1, 1, 1, 1], dtype=float)
    groups = [0] * 4 + [1] * 4 + [2] * 4
    got = compute_advantages(rewards, groups, PRESETS["trl-batch"])
    means = np.repeat([0.5, 0.5, 1.0], 4)
    expected = (rewards - means) / (rewards.std(ddof=1) + 1e-4)
    expected[8:] = 0.0  # the constant group
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_openrlhf_clips_at_ten_where_trl_does_not() -> None:
    rewards = [1.0] + [0.0] * 199  # (1 - 1/200) / sqrt(1/200) = 14.07
    groups = [0] * 200
    assert compute_advantages(rewards, groups, PRESETS["trl"])[0] > 14
    assert compute_advantages(rewards, groups, PRESETS["openrlhf"])[0] == 10.0
    got = compute_advantages([100.0, 0.0], [0, 0], PRESETS["dr-grpo"])
    np.testing.assert_array_equal(got, [10.0, -10.0])


@pytest.mark.parametrize("name", list(PRESETS))
def test_excluded_outcomes_get_zero_and_do_not_shift_the_others(name: str) -> None:
    rewards = [2, 0, 1, 1, 5, 0, 1, 2]
    groups = ["a", "a", "a", "a", "a", "b", "b", "b"]
    outcomes = ["detected", "golden_fail", "passed", "passed", "timeout", "invalid", "error",
                "detected"]
    got = compute_advantages(rewards, groups, PRESETS[name], outcomes)
    kept = [i for i, o in enumerate(outcomes) if o not in ("timeout", "error")]
    alone = compute_advantages([rewards[i] for i in kept], [groups[i] for i in kept], PRESETS[name])
    np.testing.assert_allclose(got[kept], alone, rtol=1e-12, atol=1e-12)
    assert got[4] == 0.0 and got[6] == 0.0


def test_exclusion_can_be_switched_off_and_a_fully_excluded_group_is_zero() -> None:
    rewards, groups = [2, 0, 1, 1], [0, 0, 1, 1]
    outcomes = ["detected", "timeout", "timeout", "error"]
    kept_all = compute_advantages(rewards, groups, preset("trl", exclude_outcomes=set()), outcomes)
    assert kept_all[0] > 0 and kept_all[1] < 0
    np.testing.assert_array_equal(compute_advantages(rewards, groups, PRESETS["trl"], outcomes), 0)


def test_singleton_policy() -> None:
    rewards, groups = [2.0, 1.0, 0.0], [0, 1, 1]
    assert compute_advantages(rewards, groups, PRESETS["grpo-smu"])[0] == 0.0
    assert compute_advantages(rewards, groups, PRESETS["rloo"])[0] == 2.0
    verl = compute_advantages(rewards, groups, PRESETS["verl"])
    assert verl[0] == pytest.approx(2 / (1 + 1e-6), rel=1e-12)
    # one valid sample left after exclusion counts as a singleton too (NeMo-RL: 0)
    got = compute_advantages([2.0, 1.0], [0, 0], PRESETS["nemo-rl"], ["detected", "timeout"])
    np.testing.assert_array_equal(got, [0.0, 0.0])
    raw = preset("nemo-rl", singleton="raw")
    assert compute_advantages([2.0, 1.0], [0, 0], raw, ["detected", "timeout"])[0] > 1.99


def test_two_sample_leave_one_out_sigma_is_undefined_and_left_unscaled() -> None:
    # σ of one "other" sample with ddof=1 is undefined: NeMo-RL's nan_to_num makes it 0
    got = compute_advantages([3.0, 1.0], [0, 0], PRESETS["nemo-rl"])
    np.testing.assert_array_equal(got, [2.0, -2.0])


@pytest.mark.parametrize(("lone", "rest", "n"), [(0.1, 0.2, 3), (0.7, 0.3, 5), (3.3, 0.9, 8)])
def test_leave_one_out_sigma_of_equal_others_is_exactly_zero(lone: float, rest: float,
                                                             n: int) -> None:
    # the σ downdate leaves rounding residue here (~1e-10); it must not pass for a real σ
    got = compute_advantages([lone] + [rest] * (n - 1), [0] * n, PRESETS["nemo-rl"])
    assert got[0] == pytest.approx(lone - rest, rel=1e-12)


def test_group_ids_of_any_hashable_kind() -> None:
    rewards = [1, 0, 1, 0]
    by_int = compute_advantages(rewards, [7, 7, 3, 3])
    by_str = compute_advantages(rewards, ["x", "x", "y", "y"])
    by_unsorted = compute_advantages(rewards, ["y", "y", "x", "x"])
    by_tuple = compute_advantages(rewards, [("d", "m1"), ("d", "m1"), ("d", 2), ("d", 2)])
    by_huge = compute_advantages(rewards, [2**62, 2**62, -(2**62), -(2**62)])
    for other in (by_str, by_unsorted, by_tuple, by_huge):
        np.testing.assert_array_equal(by_int, other)


def test_float32_mode_returns_float32() -> None:
    got = compute_advantages([1, 1, 0, 0], ONE_GROUP, preset("trl", dtype="float32"))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, [0.865875, 0.865875, -0.865875, -0.865875], atol=1e-6)


def test_empty_input() -> None:
    assert compute_advantages([], []).shape == (0,)
    assert zero_advantage_share([], []) == 0.0


# ---------------------------------------------------------------------------------------------
# Configuration and input errors.


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"baseline": "median"}, "choose one of"),
        ({"scale": "std"}, "choose one of"),
        ({"epsilon_mode": "max"}, "choose one of"),
        ({"singleton": "drop"}, "choose one of"),
        ({"dtype": "float16"}, "choose one of"),
        ({"ddof": -1}, "ddof"),
        ({"ddof": 1.5}, "ddof"),
        ({"epsilon": -1e-6}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"epsilon": 0.0}, "where-positive"),
        ({"clip": 0.0}, "clip"),
        ({"clip": -10.0}, "clip"),
        ({"exclude_outcomes": "timeout"}, "set of outcome names"),
        ({"exclude_outcomes": {"timout"}}, "unknown outcome"),
        ({"scale": "leave-one-out-std", "epsilon_mode": "where-positive", "baseline": "mean"},
         "baseline='leave-one-out'"),
        ({"scale": "leave-one-out-std"}, "where-positive"),
    ],
)
def test_bad_configs_raise_config_error_saying_how_to_fix(overrides: dict[str, Any],
                                                          message: str) -> None:
    base = {"baseline": "leave-one-out", "scale": "group-std"}
    with pytest.raises(ConfigError, match=message):
        AdvantageConfig(**{**base, **overrides})


def test_preset_lookup_and_overrides() -> None:
    assert preset("grpo-smu") == AdvantageConfig()
    assert preset("nemo-rl", ddof=0).ddof == 0
    assert preset("trl", exclude_outcomes=["timeout"]).exclude_outcomes == frozenset({"timeout"})
    with pytest.raises(ConfigError, match="grpo-smu, grpo, trl"):
        preset("ppo")
    with pytest.raises(ConfigError, match=r"unknown advantage option.*eps"):
        preset("trl", eps=1.0)
    with pytest.raises(ConfigError, match="where-positive"):
        preset("grpo", epsilon_mode="add")


def test_bad_reward_arrays_raise_score_error() -> None:
    with pytest.raises(ScoreError, match="index 1"):
        compute_advantages([1.0, float("nan")], [0, 0])
    with pytest.raises(ScoreError, match="numbers"):
        compute_advantages(["x", "y"], [0, 0])
    with pytest.raises(ScoreError, match="groups has 1"):
        compute_advantages([1.0, 2.0], [("a", 1)])
    with pytest.raises(ScoreError, match="one-dimensional"):
        compute_advantages([[1.0, 2.0]], [0, 0])
    with pytest.raises(ScoreError, match="outcomes"):
        compute_advantages([1.0, 2.0], [0, 0], outcomes=["passed"])


# ---------------------------------------------------------------------------------------------
# Score files, grouping and the zero-advantage summary.


def _scores() -> dict[str, Any]:
    rows = []
    outcomes = {"golden": ["passed"] * 4, "m0001": ["detected", "passed", "passed", "passed"],
                "m0002": ["passed"] * 4}
    for state, kinds in outcomes.items():
        for k, kind in enumerate(kinds):
            reward = {"passed": 1.0, "detected": 2.0}[kind]
            rows.append({"plan": f"p{k}", "state": state, "outcome": kind, "reward": reward,
                         "detail": {}})
    return {"design": "fifo_sync", "rewards": {"invalid": 0, "golden_pass": 1, "detect": 2},
            "results": rows}


def test_group_ids_by_state_design_and_batch() -> None:
    records = flatten_scores([_scores(), {"design": "counter", "results": [
        {"plan": "p0", "state": "golden", "outcome": "passed", "reward": 1}]}])
    assert group_ids(records, "state")[:5] == ["fifo_sync/golden"] * 4 + ["fifo_sync/m0001"]
    assert group_ids(records, "state")[-1] == "counter/golden"
    assert set(group_ids(records, "design")) == {"fifo_sync", "counter"}
    assert set(group_ids(records, "batch")) == {"batch"}
    with pytest.raises(ConfigError, match="'state', 'design', 'batch'"):
        group_ids(records, "plan")  # type: ignore[arg-type]


def test_advantage_records_add_group_and_advantage() -> None:
    out = advantage_records(_scores(), PRESETS["grpo-smu"], by="design")
    assert len(out) == 12
    assert out[4]["state"] == "m0001" and out[4]["group"] == "fifo_sync"
    assert out[4]["design"] == "fifo_sync" and out[4]["detail"] == {}
    # relative rewards: golden 1 x4 (perfect), m0001 [1, .5, .5, .5], m0002 .5 x4
    relative = np.array([1.0] * 5 + [0.5] * 7)
    others = (relative.sum() - 1.0) / 11
    assert out[4]["advantage"] == pytest.approx((1.0 - others) / np.std(relative, ddof=1), rel=1e-5)
    assert out[4]["ceiling"] == 2.0 and out[0]["ceiling"] == 1.0
    assert all(rec["advantage"] > 0 for rec in out[:4])  # perfect golden plans are pushed up
    assert all(isinstance(rec["advantage"], float) for rec in out)
    by_state = advantage_records(_scores(), PRESETS["grpo-smu"], by="state")
    assert [rec["advantage"] for rec in by_state[:4]] == [0.0] * 4
    raw = advantage_records(_scores(), preset("grpo-smu", ceiling="raw"), by="design")  # the old rule
    assert raw[4]["advantage"] == pytest.approx(1 / np.std([2] + [1] * 11, ddof=1), rel=1e-5)


def _perfect(design: str, states: int, samples: int, golden_pass: float = 1.0, detect: float = 2.0) -> dict[str, Any]:
    """Every plan perfect on its own state: passes golden, detects every mutant."""
    rows = [
        {"plan": f"{state}-s{k:02d}", "state": state, "outcome": "passed" if state == "golden" else "detected",
         "reward": golden_pass if state == "golden" else detect}
        for state in ["golden", *(f"m{i:04d}" for i in range(1, states + 1))]
        for k in range(samples)
    ]
    return {"design": design, "rewards": {"invalid": 0, "golden_pass": golden_pass, "detect": detect},
            "results": rows}


DESIGN_GROUPINGS = [(name, by) for name in sorted(PRESETS) for by in ("design", "batch")]


@pytest.mark.parametrize(("name", "by"), DESIGN_GROUPINGS)
def test_perfect_plans_get_no_advantage_from_their_state_ceiling(name: str, by: str) -> None:
    docs = [_perfect("fifo_sync", 4, 3), _perfect("adder", 2, 4, golden_pass=1.0, detect=3.0)]
    out = advantage_records(docs, preset(name), by=by)  # type: ignore[arg-type]
    assert [rec["advantage"] for rec in out] == [0.0] * len(out)


@pytest.mark.parametrize(("name", "by"), DESIGN_GROUPINGS)
def test_a_perfect_golden_plan_is_never_pushed_down(name: str, by: str) -> None:
    doc = _perfect("fifo_sync", 3, 4)
    for k, rec in enumerate(doc["results"]):  # imperfect plans on mutants: missed, or invalid
        if rec["state"] != "golden" and k % 3:
            rec.update(outcome="passed", reward=1.0) if k % 2 else rec.update(outcome="invalid", reward=0.0)
    out = advantage_records(doc, preset(name), by=by)  # type: ignore[arg-type]
    golden = [rec["advantage"] for rec in out if rec["state"] == "golden"]
    assert golden and min(golden) >= 0.0
    missed = [rec["advantage"] for rec in out if rec["outcome"] == "passed" and rec["state"] != "golden"]
    assert missed and max(missed) < 0.0  # a plan that misses the bug is below the perfect ones


def test_proved_equivalent_mutant_ceiling_is_the_pass_level() -> None:
    doc = _perfect("fifo_sync", 2, 2)
    for rec in doc["results"]:
        if rec["state"] == "m0002":  # proved equivalent: passing is the best any plan can do
            rec.update(outcome="passed", reward=1.0, ceiling=1.0)
    out = advantage_records(doc, PRESETS["grpo-smu"], by="design")
    assert [rec["advantage"] for rec in out] == [0.0] * len(out)


def test_summary_state_vs_design() -> None:
    summary = summarize(_scores(), PRESETS["grpo-smu"])
    assert summary["state"] == AdvantageSummary("state", groups=3, zero_groups=2)
    assert summary["design"] == AdvantageSummary("design", groups=1, zero_groups=0)
    assert describe_zero_share(summary) == "zero-advantage groups: state 67% vs design 0%"


@pytest.mark.parametrize(
    ("scores", "message"),
    [
        ([1], r"scores\[0\]: expected an object"),
        ({"results": []}, r"scores.design: expected a non-empty string"),
        ({"design": "d"}, r"scores.results: expected a list"),
        ({"design": "d", "results": ["x"]}, r"scores.results\[0\]: expected an object"),
        ({"design": "d", "results": [{"state": "g", "outcome": "passed", "reward": 1}]},
         r"scores.results\[0\].plan"),
        ({"design": "d", "results": [{"plan": "p", "state": "g", "outcome": "won", "reward": 1}]},
         r"scores.results\[0\].outcome: unknown outcome 'won'"),
        ([{"design": "d", "results": [{"plan": "p", "state": "g", "outcome": "passed",
                                       "reward": "1"}]}],
         r"scores\[0\].results\[0\].reward: expected a finite number"),
        ({"design": "d", "results": [{"plan": "p", "state": "g", "outcome": "passed",
                                      "reward": True}]}, r"reward"),
    ],
)
def test_malformed_score_files_name_the_field_and_index(scores: Any, message: str) -> None:
    with pytest.raises(ScoreError, match=message):
        flatten_scores(scores)


def test_zero_advantage_share() -> None:
    adv = compute_advantages([1, 1, 2, 1, 0, 0], [0, 0, 1, 1, 2, 2], PRESETS["grpo"])
    assert zero_advantage_share(adv, [0, 0, 1, 1, 2, 2]) == pytest.approx(2 / 3)
    assert zero_advantage_share([1e-12, 0.0], ["a", "a"]) == 1.0


# ---------------------------------------------------------------------------------------------
# Properties (hypothesis).

REWARD = st.integers(-64, 64).map(lambda k: k / 16)  # exact in float32 and in sums
DECIMAL = st.integers(-60, 60).map(lambda k: k / 10)  # sums carry rounding residue
PRESET = st.sampled_from(sorted(PRESETS))


@st.composite
def batches(draw: st.DrawFn, min_group: int = 1, max_groups: int = 6,
            values: st.SearchStrategy[float] = REWARD) -> tuple[list[float], list[int]]:
    sizes = draw(st.lists(st.integers(min_group, 9), min_size=1, max_size=max_groups))
    rewards: list[float] = []
    groups: list[int] = []
    for gid, size in enumerate(sizes):
        level = draw(values)  # few distinct values per group: ties and lone outliers
        pool = st.one_of(st.just(level), values)
        rewards += draw(st.lists(pool, min_size=size, max_size=size))
        groups += [gid * 7 + 3] * size
    order = draw(st.permutations(range(len(rewards))))
    return [rewards[i] for i in order], [groups[i] for i in order]


@st.composite
def configs(draw: st.DrawFn) -> AdvantageConfig:
    fields: dict[str, Any] = {
        "baseline": draw(st.sampled_from(["mean", "leave-one-out"])),
        "scale": draw(st.sampled_from(["none", "group-std", "leave-one-out-std", "batch-std"])),
        "ddof": draw(st.integers(0, 2)),
        "epsilon": draw(st.sampled_from([0.0, 1e-9, 1e-6, 1e-4, 0.1])),
        "epsilon_mode": draw(st.sampled_from(["add", "where-positive"])),
        "clip": draw(st.sampled_from([None, 0.5, 10.0])),
        "singleton": draw(st.sampled_from(["zero", "raw"])),
        "exclude_outcomes": draw(st.sampled_from([frozenset(), frozenset({"timeout", "error"})])),
    }
    try:
        return AdvantageConfig(**fields)
    except ConfigError:
        assume(False)
        raise


SETTINGS = settings(max_examples=100, deadline=None)


@settings(max_examples=300, deadline=None)
@given(batch=batches(values=st.one_of(REWARD, DECIMAL)), cfg=configs(), data=st.data())
def test_matches_the_reference_implementation(batch: tuple[list[float], list[int]],
                                              cfg: AdvantageConfig, data: st.DataObject) -> None:
    rewards, groups = batch
    outcomes = data.draw(st.lists(st.sampled_from(OUTCOMES), min_size=len(rewards),
                                  max_size=len(rewards)))
    got = compute_advantages(rewards, groups, cfg, outcomes)
    np.testing.assert_allclose(got, reference(rewards, groups, cfg, outcomes),
                               rtol=1e-9, atol=1e-9)
    assert np.all(np.isfinite(got))


@SETTINGS
@given(batch=batches(), name=PRESET, data=st.data())
def test_constant_groups_are_zero(batch: tuple[list[float], list[int]], name: str,
                                  data: st.DataObject) -> None:
    _, groups = batch
    level = {g: data.draw(REWARD) for g in groups}
    got = compute_advantages([level[g] for g in groups], groups, preset(name, singleton="zero"))
    assert np.all(got == 0.0)


@SETTINGS
@given(batch=batches(), name=PRESET, data=st.data())
def test_permutation_equivariance(batch: tuple[list[float], list[int]], name: str,
                                  data: st.DataObject) -> None:
    rewards, groups = batch
    perm = data.draw(st.permutations(range(len(rewards))))
    got = compute_advantages(rewards, groups, PRESETS[name])
    shuffled = compute_advantages([rewards[i] for i in perm], [groups[i] for i in perm],
                                  PRESETS[name])
    np.testing.assert_allclose(shuffled, got[list(perm)], rtol=1e-12, atol=1e-12)


@SETTINGS
@given(batch=batches(min_group=2), name=st.sampled_from(MEAN_BASELINE))
def test_mean_baseline_presets_sum_to_zero_per_group(batch: tuple[list[float], list[int]],
                                                     name: str) -> None:
    rewards, groups = batch
    adv = compute_advantages(rewards, groups, PRESETS[name])
    assume(np.all(np.abs(adv) < 10))  # no clipping at play
    ids = np.asarray(groups)
    for g in set(groups):
        assert abs(adv[ids == g].sum()) < 1e-9


@SETTINGS
@given(batch=batches(min_group=2), name=st.sampled_from(STD_SCALED),
       a=st.floats(0.5, 20), b=st.floats(-100, 100))
def test_std_scaled_presets_are_invariant_to_affine_rewards(
        batch: tuple[list[float], list[int]], name: str, a: float, b: float) -> None:
    rewards, groups = batch
    cfg = PRESETS[name]
    if cfg.epsilon_mode == "where-positive" and cfg.scale == "leave-one-out-std":
        a = 1.0  # NeMo-RL leaves σ₋ᵢ = 0 samples unscaled: invariant to shifts only
    moved = [a * r + b for r in rewards]
    assume(len(set(moved)) == len(set(rewards)))  # no two rewards merged by rounding
    before = compute_advantages(rewards, groups, cfg)
    after = compute_advantages(moved, groups, cfg)
    # σ ≥ 1/16 / sqrt(9) for any non-constant group here; ε/σ bounds the epsilon effect
    tol = 1e-7 + 200 * cfg.epsilon
    np.testing.assert_allclose(after, before, rtol=tol, atol=tol)


@SETTINGS
@given(batch=batches(), name=PRESET)
def test_float32_agrees_with_float64(batch: tuple[list[float], list[int]], name: str) -> None:
    rewards, groups = batch
    wide = compute_advantages(rewards, groups, PRESETS[name])
    narrow = compute_advantages(rewards, groups, preset(name, dtype="float32"))
    assert narrow.dtype == np.float32
    np.testing.assert_allclose(narrow, wide, rtol=1e-5, atol=1e-5)


@SETTINGS
@given(batch=batches(), name=st.sampled_from(sorted(set(PRESETS) - {"trl-batch"})))
def test_all_groups_at_once_equal_each_group_alone(batch: tuple[list[float], list[int]],
                                                   name: str) -> None:
    rewards, groups = batch
    together = compute_advantages(rewards, groups, PRESETS[name])
    by_name = compute_advantages(rewards, [f"g{g}" for g in groups], PRESETS[name])
    np.testing.assert_array_equal(by_name, together)
    for g in set(groups):
        idx = [i for i, h in enumerate(groups) if h == g]
        alone = compute_advantages([rewards[i] for i in idx], [g] * len(idx), PRESETS[name])
        np.testing.assert_allclose(together[idx], alone, rtol=1e-12, atol=1e-12)


@SETTINGS
@given(batch=batches())
def test_zero_share_counts_the_constant_groups_under_grpo(
        batch: tuple[list[float], list[int]]) -> None:
    rewards, groups = batch
    adv = compute_advantages(rewards, groups, PRESETS["grpo"])
    by_group: dict[int, set[float]] = {}
    for r, g in zip(rewards, groups, strict=True):
        by_group.setdefault(g, set()).add(r)
    constant = sum(len(v) == 1 for v in by_group.values())
    assert zero_advantage_share(adv, groups) == pytest.approx(constant / len(by_group))
