"""Schemata that scale: the text grows linearly with the mutants, no line holds them all, a set
is cut into bounded builds, and scoring routed over several builds is the one-build scoring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hwtp.rewards as R
from hwtp import yamlio
from hwtp.errors import EXIT_TOOLCHAIN, ConfigError, InternalError
from hwtp.mutators import engine, mutantset
from hwtp.mutators.mutantset import GOLDEN, SchemataPart, part_bounds, part_of, schemata_parts
from hwtp.mutators.schemata import SELECTOR
from hwtp.plans.files import PlanInput
from hwtp.plans.format import load_plan_file, to_data
from hwtp.rtl.design import load_design
from hwtp.scoring.score import ScoreConfig, score
from hwtp.sim.executors.base import Target, schemata_targets
from hwtp.sim.wrapper import build_sources

PART = "HWTP_SCHEMATA_PART"


def _tree(name: str, n: int | None, depth: int) -> mutantset.MutantSet:
    """Every candidate of ``n`` first-order sites and ``depth - 1`` levels of children, numbered
    as :func:`hwtp.mutators.engine.mutate` numbers valid mutants (no simulator)."""
    design = load_design(name)
    config = engine.MutationConfig(n=n, depth=depth, witness_cycles=0)
    pool = engine._find(design, config)
    level = [engine._record(i, (s,)) for i, s in enumerate(engine.select_sites(pool, n, 0), start=1)]
    every = list(level)
    for _ in range(depth - 1):
        level = engine._children(level, pool, config, len(every) + 1)
        every += level
    return engine._number(design, 0, every)


def _size(mutant_set: mutantset.MutantSet) -> int:
    sources, excluded = mutantset.schemata_sources(mutant_set)
    assert not excluded
    return sum(len(s.text) for s in sources)


def test_schemata_text_grows_linearly_with_depth_two_mutants() -> None:
    """A mutant's copy holds its region's original text, not the schemata nested in it: twice
    the mutants, about twice the text (it was 4x: 73 KB for 96 mutants of traffic_light, 3 MB
    for 510, with a line of ~19,000 words Verilator refused)."""
    small, large = _tree("traffic_light", 16, 2), _tree("traffic_light", 64, 2)
    assert len(large.valid) >= 3 * len(small.valid)
    per_small, per_large = _size(small) / len(small.valid), _size(large) / len(large.valid)
    assert per_large < 1.5 * per_small, (per_small, per_large)
    everything = _tree("traffic_light", None, 2)
    sources, _ = mutantset.schemata_sources(everything)
    longest = max(len(line.split()) for s in sources for line in s.text.splitlines())
    assert len(everything.valid) > 400 and longest < 200, longest


def test_parts_are_bounded_disjoint_and_cover_every_mutant() -> None:
    mutant_set = _tree("traffic_light", 40, 2)
    indices = {m.index for m in mutant_set.valid}
    parts = schemata_parts(mutant_set, bounds=(25, 1 << 30))
    assert [len(p.indices) for p in parts[:-1]] == [25] * (len(parts) - 1) and len(parts) >= 4
    assert set().union(*(p.indices for p in parts)) == indices
    assert sum(len(p.indices) for p in parts) == len(indices)
    for i, part in enumerate(parts):
        text = "".join(s.text for s in part.sources)
        selected = {k for k in indices if f"{SELECTOR} == 32'd{k})" in text}
        assert selected == set(part.indices), i
        assert all(part_of(parts, k) == i for k in part.indices)
    assert part_of(parts, 0) == 0
    by_bytes = schemata_parts(mutant_set, bounds=(1 << 30, 4096))
    assert len(by_bytes) > 1 and set().union(*(p.indices for p in by_bytes)) == indices
    (one,) = schemata_parts(mutant_set, bounds=(1 << 30, 1 << 30))
    assert one.sources == mutantset.schemata_sources(mutant_set)[0]


def test_part_bounds_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PART, "7")
    assert part_bounds() == (7, mutantset.MAX_PART_BYTES)
    monkeypatch.setenv(PART, "7,5000")
    assert part_bounds() == (7, 5000)
    for bad in ("0", "x", "1,2,3", "-4"):
        monkeypatch.setenv(PART, bad)
        with pytest.raises(ConfigError, match=PART):
            part_bounds()


def test_a_mutant_dir_with_several_parts_writes_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mutant_set = _tree("traffic_light", 12, 1)
    monkeypatch.setenv(PART, "5")
    mutantset.write(mutant_set, tmp_path / "m")
    folders = sorted(p.name for p in (tmp_path / "m" / "schemata").iterdir())
    assert folders == ["1", "2", "3"]
    monkeypatch.delenv(PART)
    mutantset.write(mutant_set, tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m" / "schemata").iterdir()) == ["rtl"]


@pytest.fixture(scope="module")
def counter(tmp_path_factory: pytest.TempPathFactory) -> tuple[mutantset.MutantSet, Path]:
    design = load_design("counter_en_load")
    result = engine.mutate(design, engine.MutationConfig(n=10, depth=2, branching=1, witness_cycles=400, jobs=2))
    folder = tmp_path_factory.mktemp("parts") / "mutants"
    mutantset.write(result, folder)
    return mutantset.load(folder), folder


def _plans(mutant_set: mutantset.MutantSet) -> list[PlanInput]:
    reference = load_plan_file(load_design(mutant_set.design.name).root / "plans" / "reference.yaml")
    witnesses = [PlanInput(mid, plan) for mid, plan in sorted(mutant_set.witnesses.items())[:4]]
    return [PlanInput("reference", reference), *witnesses]


@pytest.mark.sim
def test_scores_over_several_builds_are_the_one_build_scores(
    counter: tuple[mutantset.MutantSet, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    mutant_set, _ = counter
    assert len(mutant_set.valid) >= 12
    plans = _plans(mutant_set)
    config = ScoreConfig(jobs=2)
    one = score(mutant_set, plans, config)
    monkeypatch.setenv(PART, "4")
    assert len(schemata_targets(mutant_set).targets) >= 3
    split = score(mutant_set, plans, config)
    assert json.dumps([r.as_dict() for r in split.results]) == json.dumps([r.as_dict() for r in one.results])
    assert {r.outcome.value for r in one.results} >= {"detected", "passed"}


@pytest.mark.sim
def test_rewards_over_several_builds_are_the_one_build_rewards(
    counter: tuple[mutantset.MutantSet, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    mutant_set, folder = counter
    digest = mutantset.set_hash(mutant_set)
    states = [GOLDEN, *(m.id for m in mutant_set.states)]
    texts = [yamlio.dump(to_data(p.plan)) for p in _plans(mutant_set) if p.plan is not None]
    items = [({"design": mutant_set.design.name, "state": s, "mutant_set": digest}, t) for s in states for t in texts]

    def rewards() -> list[tuple[float | None, str]]:
        R.reset()
        R.configure(states=[folder], workers=2)
        try:
            return [(r.reward, r.outcome) for r in R.score_completions(items)]
        finally:
            R.reset()

    one = rewards()
    monkeypatch.setenv(PART, "4")
    split = rewards()
    assert split == one
    assert {o for _, o in one} >= {"detected", "passed"}


@pytest.mark.sim
def test_generated_code_that_does_not_build_is_an_internal_error(tmp_path: Path) -> None:
    """hwtp's own schemata failing to build is never the user's bad input: exit 3, sources kept."""
    design = load_design("counter_en_load")
    broken = tuple(s.__class__(s.path, s.text + "\nthis is not verilog;\n") for s in design.sources)
    target = Target(design, build_sources(design, broken), cache_root=tmp_path / "cache", generated=True)
    with pytest.raises(InternalError) as info:
        target.build()
    assert info.value.exit_code == EXIT_TOOLCHAIN
    assert info.value.kept is not None and (Path(info.value.kept) / "error.txt").is_file()
    assert "please report" in str(info.value)


def test_schemata_part_routing_refuses_an_unknown_selector() -> None:
    parts = (SchemataPart(frozenset({1, 2}), ()), SchemataPart(frozenset({3}), ()))
    assert part_of(parts, 3) == 1
    with pytest.raises(Exception, match="selector value 9"):
        part_of(parts, 9)
