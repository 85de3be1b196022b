"""hwtp score: batched and isolated agree on every design; faults stay contained."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hwtp.errors import SimulationError
from hwtp.plans.files import PlanInput, read_plans
from hwtp.plans.format import Plan, Step, TestCase, load_plan_file, parse_plan
from hwtp.plans.values import Value
from hwtp.rtl.design import SourceFile, load_design, shipped_names
from hwtp.scoring.score import Outcome, SampleResult, ScoreConfig, rates, score
from hwtp.sim import job as job_format
from hwtp.sim.backends import get_backend
from hwtp.sim.buildcache import ensure_build
from hwtp.sim.job import Evaluation, Job, Limits, compile_plan, plan_cycles
from hwtp.sim.runner import run_job
from hwtp.sim.wrapper import WRAPPER_TOP, build_sources

pytestmark = pytest.mark.sim


def _broken(plan: Plan) -> Plan:
    """The plan with the first fully specified expected value of its first test flipped."""
    test = plan.tests[0]
    steps = list(test.steps)
    for i, step in enumerate(steps):
        if step.kind == "expect":
            name, value = next((n, v) for n, v in step.values if v.care is None and not v.negative)
            steps[i] = Step("expect", ((name, Value(value.bits ^ 1)),))
            break
    return Plan((TestCase(test.name, tuple(steps)), *plan.tests[1:]))


@pytest.mark.parametrize("name", shipped_names())
def test_batched_and_isolated_agree(name: str, mutated: Any) -> None:
    result = mutated(name)
    reference = load_plan_file(load_design(name).root / "plans" / "reference.yaml")
    witnesses = sorted(result.witnesses.items())[:2]
    plans = [PlanInput("reference", reference), PlanInput("failing", _broken(reference))]
    plans += [PlanInput(f"w_{mid}", plan) for mid, plan in witnesses]
    states = ("golden", *(mid for mid, _ in witnesses), *(m.id for m in result.valid[-2:]))
    config = ScoreConfig(states=tuple(dict.fromkeys(states)), jobs=2)
    batched = score(result, plans, config)
    isolated = score(result, plans, ScoreConfig(states=config.states, jobs=2, isolated=True))
    assert [r.as_dict() for r in batched.results] == [r.as_dict() for r in isolated.results]
    by = {(r.plan, r.state): r.outcome for r in batched.results}
    assert by[("reference", "golden")] == Outcome.PASSED
    assert by[("failing", "golden")] == Outcome.GOLDEN_FAIL
    for mid, _ in witnesses:
        assert by[(f"w_{mid}", mid)] == Outcome.DETECTED


def test_faults_are_contained_and_nothing_is_dropped(data_dir: Path) -> None:
    design = load_design(data_dir / "counter.v")
    build = ensure_build(get_backend("verilator"), build_sources(design), WRAPPER_TOP)
    quick = parse_plan("tests:\n- name: t\n  steps:\n  - drive: {en: 1}\n  - wait: 3\n  - expect: {q: 3}\n")
    endless = Plan((TestCase("long", tuple(Step("wait", count=1_000_000) for _ in range(50))),))
    evs = [
        Evaluation(f"e{i}", compile_plan(p, design), cycles=plan_cycles(p, design))
        for i, p in enumerate([quick, endless, quick, endless])
    ]
    limits = Limits(max_cycles=10**8, wall_s=1.0)
    # e3 is over the cycle limit, caught before simulating; e1 runs until the watchdog stops it
    evs[3] = Evaluation("e3", evs[3].tests, cycles=10**9)
    results = run_job(build, Job(design, tuple(evs), limits=limits))
    assert [r.id for r in results] == ["e0", "e1", "e2", "e3"]
    assert [r.status for r in results] == ["pass", "timeout", "pass", "timeout"]
    assert results[1].reason == "evaluation exceeded 1 s" and "over the limit" in (results[3].reason or "")


def test_the_harness_refuses_a_job_of_another_format_version(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host writes JOB_FORMAT_VERSION in the job header; a harness of another version
    (here: the host's number bumped, the simulator's hwtp not) refuses the job, and says why."""
    design = load_design(data_dir / "counter.v")
    build = ensure_build(get_backend("verilator"), build_sources(design), WRAPPER_TOP)
    plan = parse_plan("tests:\n- name: t\n  steps:\n  - drive: {en: 1}\n  - wait: 3\n  - expect: {q: 3}\n")
    job = Job(design, (Evaluation("e0", compile_plan(plan, design), cycles=plan_cycles(plan, design)),))
    assert run_job(build, job)[0].status == "pass"
    ours = job_format.JOB_FORMAT_VERSION
    monkeypatch.setattr(job_format, "JOB_FORMAT_VERSION", ours + 1)
    with pytest.raises(SimulationError, match=rf"job format version {ours + 1} is not this harness's version {ours}"):
        run_job(build, job)


def test_check_job_format() -> None:
    job_format.check_job_format({"version": job_format.JOB_FORMAT_VERSION})
    with pytest.raises(job_format.JobFormatError, match="version None"):
        job_format.check_job_format({"evaluations": []})
    with pytest.raises(job_format.JobFormatError, match="not a job object"):
        job_format.check_job_format([1])


def test_a_crashing_mutant_is_an_error_and_the_rest_rerun(data_dir: Path) -> None:
    design = load_design(data_dir / "loopy.v")
    source = SourceFile("loopy.v", (data_dir / "loopy.v").read_text())
    build = ensure_build(get_backend("verilator"), build_sources(design, (source,)), WRAPPER_TOP)
    plan = parse_plan("tests:\n- name: t\n  steps:\n  - drive: {a: 1, b: 2}\n  - expect: {y: 3}\n")
    compiled = compile_plan(plan, design)
    evs = tuple(Evaluation(f"e{i}", compiled, mutant=k) for i, k in enumerate([0, 1, 0, 0]))
    results = run_job(build, Job(design, evs))
    assert [r.status for r in results] == ["pass", "error", "pass", "pass"]
    assert "simulator process died" in (results[1].reason or "")


def test_score_cli_plans_from_stdin_and_bad_plans(
    run_cli: Any, mutated: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    result = mutated("adder_carry")
    reference = (load_design("adder_carry").root / "plans" / "reference.yaml").read_text()
    docs = [
        {"tests": [{"name": "t", "steps": [{"drive": {"a": 1, "b": 2, "cin": 0}}, {"expect": {"sum": 3}}]}]},
        {"tests": [{"name": "t", "steps": [{"drive": {"nope": 1}}]}]},
    ]
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(docs)))
    out = tmp_path / "s.json"
    code, text, err = run_cli("score", result.root, "--plans", "-", "--states", "golden", "--json", out)
    assert code == 0, err
    results = json.loads(out.read_text())["results"]
    assert [r["outcome"] for r in results] == ["passed", "invalid"]
    assert "unknown port 'nope'" in results[1]["detail"]["reason"]
    assert "invalid stdin1" in text
    plan_dir = tmp_path / "plans"
    plan_dir.mkdir()
    (plan_dir / "ref.yaml").write_text(reference)
    (plan_dir / "junk.yaml").write_text("tests: [\n")
    plans = read_plans([str(plan_dir)])
    assert {p.id: p.error is None for p in plans} == {"junk": False, "ref": True}
    code, text, err = run_cli("score", result.root, "--plans", plan_dir, "--states", "bogus")
    assert code == 2 and "bogus" in err


def test_states_are_chosen_by_one_rule_for_score_and_plan(mutated: Any) -> None:
    from hwtp.cli.commands.plan import resolve_states
    from hwtp.errors import ConfigError

    mutant_set = mutated("adder_carry")
    first, second = mutant_set.valid[:2]
    assert mutant_set.select([second.id, "golden", first.id]) == [
        (second.id, second.index), ("golden", 0), (first.id, first.index)
    ]
    assert mutant_set.select() == [("golden", 0), *((m.id, m.index) for m in mutant_set.states)]
    with pytest.raises(ConfigError, match=r"--states: unknown or invalid state\(s\) 'bogus' \(valid: golden"):
        mutant_set.select(["golden", "bogus"])
    assert resolve_states(mutant_set, "all") == [state for state, _ in mutant_set.select()]
    assert resolve_states(mutant_set, f" {second.id}, golden,") == [second.id, "golden"]


def test_rates_count_plans_per_design_not_pooled_by_id() -> None:
    """Plan ids repeat in every design: design A's golden-s00 passing must not make design B's fail pass."""
    a = [
        SampleResult("golden-s00", "golden", Outcome.PASSED, 1.0),
        SampleResult("m0001-s00", "m0001", Outcome.DETECTED, 1.0),
    ]
    b = [
        SampleResult("golden-s00", "golden", Outcome.GOLDEN_FAIL, 0.0),
        SampleResult("m0001-s00", "m0001", Outcome.TIMEOUT, 0.0, {"golden": "pass"}),  # passed golden, then hung
    ]
    assert rates([a]) == (1.0, 1.0)
    assert rates([b]) == (0.5, 0.0)
    assert rates([a, b]) == (0.75, 0.5)  # 3 of 4 plans pass golden; 1 of 2 mutant samples detected
    assert rates([a + b]) == (1.0, 0.5)  # pooled by id, the failing golden-s00 of B would vanish
