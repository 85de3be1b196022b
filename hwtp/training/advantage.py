"""Advantages: rewards of a group of samples turned into the learning signal of a GRPO trainer.

Pure numpy, no simulator and no network (docs/explanation/rewards-and-advantages.md). One vectorised
core, :func:`compute_advantages`, covers every scheme through an :class:`AdvantageConfig`;
:data:`PRESETS` reproduce what real trainers do. The score-file side (:func:`advantage_records`,
:func:`summarize`) groups ``hwtp score`` results by state, design or batch.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt

from hwtp.errors import ConfigError, ScoreError

Baseline = Literal["mean", "leave-one-out"]
Scale = Literal["none", "group-std", "leave-one-out-std", "batch-std"]
EpsilonMode = Literal["add", "where-positive"]
Singleton = Literal["zero", "raw"]
DType = Literal["float64", "float32"]
Ceiling = Literal["relative", "raw"]
GroupBy = Literal["state", "design", "batch"]
Floats = npt.NDArray[np.float64]
Codes = npt.NDArray[np.intp]

#: Outcomes a score result may carry (docs/explanation/rewards-and-advantages.md).
OUTCOMES = ("invalid", "golden_fail", "passed", "detected", "timeout", "error")


def _one_of(name: str, value: object, choices: Iterable[object]) -> None:
    valid = tuple(choices)
    if value not in valid:
        choices_text = ", ".join(map(repr, valid))
        raise ConfigError(f"{name}={value!r} is not valid; choose one of {choices_text}")


def _is_number(value: object) -> bool:
    """A finite real number (bools excluded)."""
    real = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    return real and math.isfinite(value)  # type: ignore[arg-type]


@dataclass(frozen=True)
class AdvantageConfig:
    """How rewards become advantages: ``A_i = clip((r_i - b_i) / (σ_i + ε))``.

    The defaults are the ``grpo-smu`` preset. Constant groups always get 0.
    """

    baseline: Baseline = "leave-one-out"
    """``b_i``: ``"mean"`` of the group, or ``"leave-one-out"``: mean of the *other* samples."""
    scale: Scale = "group-std"
    """``σ_i``: ``"none"`` (no division), ``"group-std"`` (σ of the whole group),
    ``"leave-one-out-std"`` (σ of the other samples) or ``"batch-std"`` (σ of every valid sample
    of the batch, as TRL's ``scale_rewards="batch"``; the baseline stays per group)."""
    ddof: int = 1
    """Delta degrees of freedom of σ: 1 is the sample (Bessel) std that torch's ``std()`` gives,
    0 the population std. With too few samples (count <= ddof) σ is taken as 0."""
    epsilon: float = 1e-6
    """``ε`` added to σ before dividing."""
    epsilon_mode: EpsilonMode = "add"
    """``"add"``: divide by ``σ + ε`` everywhere; ``"where-positive"``: divide by ``σ + ε`` only
    where ``σ > 0`` and leave the advantage unscaled elsewhere (NeMo-RL)."""
    clip: float | None = None
    """Clip advantages to ``[-clip, clip]`` (OpenRLHF clips at 10); ``None``: no clipping."""
    singleton: Singleton = "zero"
    """A group with one valid sample: ``"zero"`` gives 0; ``"raw"`` gives the raw reward, as verl
    does with ``μ = 0, σ = 1`` (so ``r / (1 + ε)`` when a scale is applied)."""
    exclude_outcomes: frozenset[str] = frozenset({"timeout", "error"})
    """Outcomes left out of every statistic and given advantage 0 (an indeterminate
    simulation is neither a pass nor a detection)."""
    dtype: DType = "float64"
    """Dtype of the result; ``"float32"`` first rounds rewards to float32 as a trainer's tensors
    would hold them (group sums are still accumulated in float64)."""
    ceiling: Ceiling = "relative"
    """Where a group mixes states (grouping by design or batch): ``"relative"`` divides each
    reward by its state's attainable maximum (the pass level on golden and on a proved
    equivalent mutant, the detect level on other mutants), so the gap between states' ceilings
    never becomes signal; ``"raw"`` uses rewards as scored. Groups of one state (``--group-by
    state``, what trainers do per prompt) always use raw rewards."""

    def __post_init__(self) -> None:
        for name, kind in (
            ("baseline", Baseline),
            ("scale", Scale),
            ("singleton", Singleton),
            ("epsilon_mode", EpsilonMode),
            ("dtype", DType),
            ("ceiling", Ceiling),
        ):
            _one_of(name, getattr(self, name), get_args(kind))
        integer = isinstance(self.ddof, (int, np.integer)) and not isinstance(self.ddof, bool)
        if not integer or self.ddof < 0:
            raise ConfigError(f"ddof={self.ddof!r} must be an integer >= 0 (1: sample std, 0: population std)")
        if not _is_number(self.epsilon) or self.epsilon < 0:
            raise ConfigError(f"epsilon={self.epsilon!r} must be a finite number >= 0")
        if self.clip is not None and not (_is_number(self.clip) and self.clip > 0):
            raise ConfigError(f"clip={self.clip!r} must be a positive number (or None for no clipping)")
        self._check_outcomes()
        if self.scale == "leave-one-out-std" and self.baseline != "leave-one-out":
            raise ConfigError(
                "scale='leave-one-out-std' goes with baseline='leave-one-out'; "
                "with baseline='mean' use scale='group-std'"
            )
        if self.scale == "none":
            return
        if self.epsilon_mode == "add" and self.epsilon == 0:
            raise ConfigError(
                "epsilon=0 with epsilon_mode='add' divides by zero where σ=0; "
                "set epsilon > 0 or use epsilon_mode='where-positive'"
            )
        if self.scale == "leave-one-out-std" and self.epsilon_mode == "add":
            raise ConfigError(
                "scale='leave-one-out-std' has σ=0 whenever the other samples agree "
                "(one success among failures), and 'add' would divide by epsilon "
                "alone; use epsilon_mode='where-positive' (as NeMo-RL does)"
            )

    def _check_outcomes(self) -> None:
        raw: object = self.exclude_outcomes
        if isinstance(raw, str) or not isinstance(raw, Iterable):
            raise ConfigError(f"exclude_outcomes={raw!r} must be a set of outcome names, e.g. {{'timeout', 'error'}}")
        names = frozenset(raw)
        unknown = sorted(str(name) for name in names - set(OUTCOMES))
        if unknown:
            raise ConfigError(
                f"exclude_outcomes: unknown outcome(s) {', '.join(unknown)}; valid: {', '.join(OUTCOMES)}"
            )
        object.__setattr__(self, "exclude_outcomes", names)


#: Trainer conventions (docs/explanation/rewards-and-advantages.md, the presets table).
#: ``r`` a reward, ``μ``/``σ`` of its group (ddof=1),
#: ``μ₋ᵢ``/``σ₋ᵢ`` of the group without sample i, ``S`` the group sum, ``n`` its size.
PRESETS: dict[str, AdvantageConfig] = {
    # GRPO-SMu (seed paper): leave-one-out baseline, FULL-group σ: (r - μ₋ᵢ) / (σ + 1e-6).
    # [2,1,1,1,1,1,1,1] -> A_0 = 1 / 0.35355 = 2.83 where nemo-rl gives 1.0.
    "grpo-smu": AdvantageConfig(),
    # Plain GRPO (DeepSeekMath): (r - μ) / σ, no epsilon fudge; σ = 0 only for constant groups.
    "grpo": AdvantageConfig(baseline="mean", epsilon=0.0, epsilon_mode="where-positive"),
    # TRL GRPOTrainer._generate_and_score_completions, scale_rewards="group" (default):
    # (r - μ) / (σ + 1e-4). scale_rewards="none" is dr-grpo's formula.
    "trl": AdvantageConfig(baseline="mean", epsilon=1e-4),
    # Same, scale_rewards="batch": μ per group, σ over the whole batch.
    "trl-batch": AdvantageConfig(baseline="mean", scale="batch-std", epsilon=1e-4),
    # verl core_algos.compute_grpo_outcome_advantage: (r - μ) / (σ + 1e-6); a group of one
    # gets μ = 0, σ = 1. norm_adv_by_std_in_grpo=False is preset("verl", scale="none").
    "verl": AdvantageConfig(baseline="mean", singleton="raw"),
    # verl core_algos.compute_rloo_outcome_advantage (also OpenRLHF/TRL rloo):
    # r - (S - r) / (n - 1); a group of one keeps its raw reward, as in verl.
    "rloo": AdvantageConfig(scale="none", epsilon=0.0, singleton="raw"),
    # OpenRLHF experience maker, advantage_estimator="group_norm": (r - μ) / (σ + 1e-9), then
    # compute_reward clamps to reward_clip_range (default ±10).
    "openrlhf": AdvantageConfig(baseline="mean", epsilon=1e-9, clip=10.0),
    # OpenRLHF advantage_estimator="dr_grpo" (Dr. GRPO): r - μ, clamped to ±10 likewise.
    "dr-grpo": AdvantageConfig(baseline="mean", scale="none", epsilon=0.0, clip=10.0),
    # NeMo-RL calculate_baseline_and_std_per_prompt (leave_one_out_baseline=True) with
    # normalize_rewards: (r - μ₋ᵢ) / (σ₋ᵢ + 1e-6) where σ₋ᵢ > 0, else r - μ₋ᵢ;
    # a group with at most one valid sample -> 0.
    "nemo-rl": AdvantageConfig(scale="leave-one-out-std", epsilon_mode="where-positive"),
}


def preset(name: str, **overrides: Any) -> AdvantageConfig:
    """The preset ``name`` with some fields replaced (validated again).

    >>> preset("trl", clip=5.0).clip
    5.0
    """
    if name not in PRESETS:
        raise ConfigError(f"unknown advantage preset {name!r}; valid: {', '.join(PRESETS)}")
    valid = [f.name for f in dataclasses.fields(AdvantageConfig)]
    unknown = sorted(set(overrides) - set(valid))
    if unknown:
        raise ConfigError(f"unknown advantage option(s) {', '.join(unknown)}; valid: {', '.join(valid)}")
    return dataclasses.replace(PRESETS[name], **overrides)


def _factorize(groups: npt.ArrayLike | Sequence[Any], size: int) -> Codes:
    """Non-negative integer codes for group ids (any hashables), one per sample.

    Codes may leave gaps (unused codes are empty groups, which every caller tolerates).
    """
    arr = np.asarray(groups)
    if arr.ndim == 1 and arr.dtype != object and arr.size == size:
        if size and arr.dtype.kind in "iu":  # small integer ids index the groups directly
            low = int(arr.min())
            if int(arr.max()) - low < 4 * size:
                return (arr - low).astype(np.intp)
        if size and bool(np.all(arr[1:] >= arr[:-1])):  # already sorted: skip the sort
            return np.concatenate(([0], np.cumsum(arr[1:] != arr[:-1]))).astype(np.intp)
        return np.unique(arr, return_inverse=True)[1].reshape(-1).astype(np.intp)
    ids = list(groups)  # type: ignore[arg-type]
    if len(ids) != size:
        raise ScoreError(f"groups has {len(ids)} entries but there are {size} rewards")
    table: dict[Any, int] = {}
    return np.fromiter((table.setdefault(g, len(table)) for g in ids), dtype=np.intp, count=size)


def _divide(num: Floats, sigma: Floats, cfg: AdvantageConfig) -> Floats:
    """``num / (σ + ε)``; with ``where-positive`` only where ``σ > 0``, else ``num``."""
    where = sigma > 0 if cfg.epsilon_mode == "where-positive" else True
    return np.divide(num, sigma + cfg.epsilon, out=num.copy(), where=where)


def _std(ss: Floats, count: Floats, ddof: int) -> Floats:
    """``sqrt(ss / (count - ddof))``, 0 where ``count <= ddof``."""
    dof = count - ddof
    return np.sqrt(np.maximum(np.divide(ss, dof, out=np.zeros_like(ss), where=dof > 0), 0.0))


def _loo_scaled(r: Floats, g: Codes, d: Floats, n: Floats, centred: Floats, cfg: AdvantageConfig) -> Floats:
    """``centred / (σ₋ᵢ + ε)`` with σ₋ᵢ the std of the other samples (Welford downdate)."""
    size = n.size
    ni = n[g]
    ss = np.bincount(g, weights=d * d, minlength=size)[g] - d * d * ni / np.maximum(ni - 1, 1)
    sigma = _std(np.where(ni > 1, ss, 0.0), ni - 1.0, cfg.ddof)
    # The others are all equal iff the group is constant, or sample i is its lone minimum
    # (maximum) and every other sample sits at the maximum (minimum): decided exactly, so that
    # rounding noise in the downdate never passes for a tiny positive σ.
    lo, hi = np.full(size, np.inf), np.full(size, -np.inf)
    np.minimum.at(lo, g, r)
    np.maximum.at(hi, g, r)
    at_lo, at_hi = r == lo[g], r == hi[g]
    n_lo = np.bincount(g, weights=at_lo, minlength=size)[g]
    n_hi = np.bincount(g, weights=at_hi, minlength=size)[g]
    equal = (at_lo & at_hi) | (at_lo & (n_lo == 1) & (n_hi == ni - 1))
    equal |= at_hi & (n_hi == 1) & (n_lo == ni - 1)
    sigma[equal] = 0.0
    return _divide(centred, sigma, cfg)


def _group_sigma(r: Floats, g: Codes, d: Floats, n: Floats, cfg: AdvantageConfig) -> Floats:
    """σ of each group (``group-std``) or of the whole batch (``batch-std``), per group."""
    if cfg.scale == "group-std":
        ss = np.bincount(g, weights=d * d, minlength=n.size).astype(np.float64, copy=False)
        return _std(ss, n, cfg.ddof)
    spread = r.size > cfg.ddof and r.min() != r.max()
    return np.full(n.size, float(np.std(r, ddof=cfg.ddof)) if spread else 0.0)


def _core(r: Floats, g: Codes, cfg: AdvantageConfig) -> Floats:
    """Advantages of valid samples ``r`` with group codes ``g`` (float64 in and out).

    Except for ``leave-one-out-std``, every scheme is ``d_i · k[group]`` with ``d = r - μ``
    and a per-group gain ``k``: ``r - μ₋ᵢ = d · n / (n - 1)``, and σ is per group.
    """
    if r.size == 0:
        return r.copy()
    size = int(g.max()) + 1
    n = np.bincount(g, minlength=size).astype(np.float64)
    d = r - (np.bincount(g, weights=r, minlength=size) / np.maximum(n, 1.0))[g]
    member = np.zeros(size)
    member[g] = r  # some member's reward: the group is constant iff all equal it
    constant = np.bincount(g, weights=r != member[g], minlength=size) == 0
    gain = np.ones(size) if cfg.baseline == "mean" else n / np.maximum(n - 1.0, 1.0)
    gain[constant] = 0.0  # constant groups (singletons too) teach nothing, in every scheme
    if cfg.scale == "leave-one-out-std":
        adv = _loo_scaled(r, g, d, n, d * gain[g], cfg)
    else:
        if cfg.scale != "none":
            gain = _divide(gain, _group_sigma(r, g, d, n, cfg), cfg)
        adv = d * gain[g]
    if cfg.singleton == "raw" and bool(np.any(n == 1)):
        one = (n == 1)[g]
        adv[one] = r[one] if cfg.scale == "none" else r[one] / (1.0 + cfg.epsilon)
    if cfg.clip is not None:
        np.clip(adv, -cfg.clip, cfg.clip, out=adv)
    return adv


def compute_advantages(
    rewards: npt.ArrayLike,
    groups: npt.ArrayLike | Sequence[Any],
    config: AdvantageConfig | None = None,
    outcomes: Sequence[str] | npt.ArrayLike | None = None,
) -> npt.NDArray[np.floating[Any]]:
    """One advantage per reward, normalised within the samples that share a group id.

    Samples whose outcome is in ``config.exclude_outcomes`` get 0 and count in no statistic.
    Vectorised over all groups at once; never NaN or inf.

    >>> compute_advantages([2, 1, 1, 1, 1, 1, 1, 1], [0] * 8).round(4)[:2]  # grpo-smu
    array([ 2.8284, -0.4041])
    >>> compute_advantages([1, 1, 0, 0], ["a"] * 4, PRESETS["trl"]).round(6)
    array([ 0.865875,  0.865875, -0.865875, -0.865875])
    >>> compute_advantages([1, 0, 0, 0, 3, 3], [0, 0, 0, 0, 1, 1], PRESETS["nemo-rl"]).round(6)
    array([ 1.      , -0.577349, -0.577349, -0.577349,  0.      ,  0.      ])
    >>> compute_advantages([2, 0, 1, 5], ["a", "a", "a", "b"],
    ...                    outcomes=["passed", "timeout", "golden_fail", "passed"])
    array([ 1.41421156,  0.        , -1.41421156,  0.        ])
    """
    cfg = config if config is not None else AdvantageConfig()
    try:
        r = np.asarray(rewards, dtype=cfg.dtype)
    except (TypeError, ValueError) as exc:
        raise ScoreError(f"rewards must be numbers: {exc}") from exc
    if r.ndim != 1:
        raise ScoreError(f"rewards must be one-dimensional, got shape {r.shape}")
    if not np.all(np.isfinite(r)):
        raise ScoreError(f"reward at index {int(np.argmin(np.isfinite(r)))} is not finite")
    codes = _factorize(groups, r.size)
    r64 = r.astype(np.float64)
    if outcomes is None or not cfg.exclude_outcomes:
        return _core(r64, codes, cfg).astype(cfg.dtype)
    kinds = np.asarray(outcomes).astype(str)
    if kinds.shape != r.shape:
        raise ScoreError(f"outcomes has shape {kinds.shape} but rewards has {r.shape}")
    keep = ~np.isin(kinds, sorted(cfg.exclude_outcomes))
    out = np.zeros(r.size, dtype=cfg.dtype)
    out[keep] = _core(r64[keep], codes[keep], cfg)
    return out


def _zero_groups(advantages: npt.ArrayLike, groups: npt.ArrayLike | Sequence[Any], atol: float) -> tuple[int, int]:
    a = np.asarray(advantages, dtype=np.float64).reshape(-1)
    if a.size == 0:
        return 0, 0
    codes = _factorize(groups, a.size)
    present = np.bincount(codes) > 0
    live = np.bincount(codes, weights=np.abs(a) > atol)
    return int(np.count_nonzero(present)), int(np.count_nonzero(present & (live == 0)))


def zero_advantage_share(advantages: npt.ArrayLike, groups: npt.ArrayLike | Sequence[Any], atol: float = 1e-9) -> float:
    """Share of groups whose advantages are all within ``atol`` of 0 (0.0 for no groups).

    This is the collapse GRPO-SMu exists to lower: such groups teach the policy nothing.

    >>> zero_advantage_share([0.0, 0.0, 1.2, -1.2, 0.0], ["a", "a", "b", "b", "c"])
    0.6666666666666666
    """
    total, zero = _zero_groups(advantages, groups, atol)
    return zero / total if total else 0.0


def _fail(where: str, what: str) -> ScoreError:
    return ScoreError(f"{where}: {what}")


def _check_result(item: object, where: str) -> dict[str, Any]:
    if not isinstance(item, Mapping):
        raise _fail(where, f"expected an object, got {type(item).__name__}")
    for key in ("plan", "state", "outcome"):
        if not isinstance(item.get(key), str) or not item[key]:
            raise _fail(f"{where}.{key}", f"expected a non-empty string, got {item.get(key)!r}")
    if item["outcome"] not in OUTCOMES:
        raise _fail(f"{where}.outcome", f"unknown outcome {item['outcome']!r}; valid: {', '.join(OUTCOMES)}")
    reward = item.get("reward")
    if not _is_number(reward):
        raise _fail(f"{where}.reward", f"expected a finite number, got {reward!r}")
    top = item.get("ceiling")
    if top is not None and not (_is_number(top) and top > 0):
        raise _fail(f"{where}.ceiling", f"expected a positive number, got {top!r}")
    return dict(item)


def _levels(doc: Mapping[str, Any], where: str) -> tuple[float, float]:
    """The (pass, detect) reward levels a score file was written with (defaults 1, 2)."""
    levels = doc.get("rewards") or {}
    if not isinstance(levels, Mapping):
        raise _fail(f"{where}.rewards", f"expected an object, got {type(levels).__name__}")
    passed, detect = levels.get("golden_pass", 1.0), levels.get("detect", 2.0)
    for key, value in (("golden_pass", passed), ("detect", detect)):
        if not (_is_number(value) and value > 0):
            raise _fail(f"{where}.rewards.{key}", f"expected a positive number, got {value!r}")
    return float(passed), float(detect)


def flatten_scores(scores: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Validate score file(s) written by ``hwtp score`` and list their results, each with its
    ``design`` added. Malformed input raises :class:`ScoreError` naming the field and index."""
    many = not isinstance(scores, Mapping)
    files = list(scores) if many else [scores]
    records: list[dict[str, Any]] = []
    for i, doc in enumerate(files):
        where = f"scores[{i}]" if many else "scores"
        if not isinstance(doc, Mapping):
            raise _fail(where, f"expected an object with 'design' and 'results', got {type(doc).__name__}")
        design = doc.get("design")
        if not isinstance(design, str) or not design:
            raise _fail(f"{where}.design", f"expected a non-empty string, got {design!r}")
        results = doc.get("results")
        if not isinstance(results, list):
            raise _fail(f"{where}.results", f"expected a list, got {type(results).__name__}")
        passed, detect = _levels(doc, where)
        mutant_set = str(doc.get("mutant_set") or "")
        for j, item in enumerate(results):
            rec = {"design": design, "mutant_set": mutant_set, **_check_result(item, f"{where}.results[{j}]")}
            if rec.get("ceiling") is None:  # score files written before ceilings were recorded
                rec["ceiling"] = passed if rec["state"] == "golden" else detect
            records.append(rec)
    return records


def group_ids(records: Sequence[Mapping[str, Any]], by: GroupBy) -> list[str]:
    """The group of each flattened result record (see :func:`flatten_scores`).

    ``"state"``: ``design/state``, the plans sampled for one state (plain GRPO);
    ``"design"``: the design, i.e. the diversified state set S' (GRPO-SMu); ``"batch"``: one group.

    >>> group_ids([{"design": "fifo", "state": "m0007"}], "state")
    ['fifo/m0007']
    """
    _one_of("group-by", by, get_args(GroupBy))
    if by == "state":
        return [f"{rec['design']}/{rec['state']}" for rec in records]
    if by == "design":
        return [str(rec["design"]) for rec in records]
    return ["batch"] * len(records)


def _advantages_of(
    records: list[dict[str, Any]], config: AdvantageConfig, by: GroupBy
) -> tuple[list[str], npt.NDArray[np.floating[Any]]]:
    ids = group_ids(records, by)
    rewards = relative_rewards(records) if config.ceiling == "relative" and by != "state" else None
    raw = [rec["reward"] for rec in records]
    outcomes = [rec["outcome"] for rec in records]
    return ids, compute_advantages(raw if rewards is None else rewards, ids, config, outcomes)


def relative_rewards(records: Sequence[Mapping[str, Any]]) -> list[float]:
    """Each reward as a share of its state's attainable maximum (``ceiling``): 1.0 is a
    perfect plan on any state, so mixing states in one group adds no signal of its own.

    >>> relative_rewards([{"reward": 1, "ceiling": 1}, {"reward": 2, "ceiling": 2},
    ...                   {"reward": 1, "ceiling": 2}, {"reward": 0, "ceiling": 2}])
    [1.0, 1.0, 0.5, 0.0]
    """
    return [float(rec["reward"]) / float(rec["ceiling"]) for rec in records]


def advantage_records(
    scores: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    config: AdvantageConfig | None = None,
    by: GroupBy = "design",
) -> list[dict[str, Any]]:
    """One record per score result, with ``design``, ``group`` and ``advantage`` added."""
    records = flatten_scores(scores)
    ids, adv = _advantages_of(records, config or AdvantageConfig(), by)
    rows = zip(records, ids, adv.tolist(), strict=True)
    return [{**rec, "group": gid, "advantage": a} for rec, gid, a in rows]


@dataclass(frozen=True)
class AdvantageSummary:
    """How many groups of one grouping have all-zero advantages."""

    by: GroupBy
    groups: int
    zero_groups: int

    @property
    def share(self) -> float:
        return self.zero_groups / self.groups if self.groups else 0.0


def summarize(
    scores: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    config: AdvantageConfig | None = None,
    atol: float = 1e-9,
) -> dict[str, AdvantageSummary]:
    """Zero-advantage groups when grouping by ``state`` and by ``design``, same config."""
    records = flatten_scores(scores)
    summary: dict[str, AdvantageSummary] = {}
    for by in ("state", "design"):
        ids, adv = _advantages_of(records, config or AdvantageConfig(), by)
        summary[by] = AdvantageSummary(by, *_zero_groups(adv, ids, atol))
    return summary


def describe_zero_share(summary: Mapping[str, AdvantageSummary]) -> str:
    """One line for the CLI.

    >>> describe_zero_share({"state": AdvantageSummary("state", 7, 5),
    ...                      "design": AdvantageSummary("design", 8, 1)})
    'zero-advantage groups: state 71% vs design 12%'
    """
    parts = [f"{s.by} {s.share:.0%}" for s in summary.values()]
    return "zero-advantage groups: " + " vs ".join(parts)
