"""Reward schemes (docs/rewards.md, "Reward schemes"): the worked example's numbers, ceilings
that keep all-perfect groups at zero advantage, smu unchanged, and the dense schemes through
hwtp score, hwtp run, hwtp export, hwtp.rewards and hwtp serve on real simulators."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import hwtp.rewards as R
from hwtp.errors import ConfigError
from hwtp.plans.files import PlanInput
from hwtp.scoring.scheme import INCREMENTAL, KILL_FRACTION, SMU, Reference, RewardScheme, recorded_scheme
from hwtp.scoring.score import Outcome, Prepared, RewardLevels, assemble
from hwtp.sim.runner import EvalResult, EvalStatus
from hwtp.training.advantage import PRESETS, advantage_records, preset, summarize

K = ("m1", "m2", "m3", "m4")
LEVELS = RewardLevels()
Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture(autouse=True)
def _fresh_rewards() -> Iterator[None]:
    R.reset()
    yield
    R.reset()


def evaluations(plan: str, golden: str, killed: set[str], unfinished: set[str] = frozenset()) -> dict[str, EvalResult]:
    """The results of ``plan`` on golden and each mutant of K: fail where it kills, timeout where it hangs."""
    out = {f"{plan}@golden": EvalResult(f"{plan}@golden", EvalStatus(golden))}
    for m in K:
        status = "timeout" if m in unfinished else "fail" if m in killed else "pass"
        first = {"test": "t", "port": "q"} if status == "fail" else None
        out[f"{plan}@{m}"] = EvalResult(
            f"{plan}@{m}", EvalStatus(status), first, reason="hang" if status == "timeout" else None
        )
    return out


def worked_example(scheme: RewardScheme) -> dict[str, Any]:
    """docs/rewards.md's worked example, assembled as hwtp.scoring.score assembles any samples."""
    results: dict[str, EvalResult] = {}
    results |= evaluations("B", "fail", set())
    results |= evaluations("C", "pass", {"m1"})
    results |= evaluations("D", "pass", {"m1", "m3"})
    results |= evaluations("E", "pass", set(K))
    results |= evaluations("F", "pass", {"m2", "m3"}, {"m4"})
    # the reference suite, simulated with the plans: r1 kills m1, r2 kills m2, r3 fails golden (kills nothing)
    results |= evaluations("ref:r1", "pass", {"m1"})
    results |= evaluations("ref:r2", "pass", {"m2"})
    results |= evaluations("ref:r3", "fail", {"m3", "m4"})
    pairs = tuple((PlanInput(p, None), "m1") for p in "ABCDEF")
    prepared = Prepared(pairs, {"A": "no plan"}, {}, ("golden", *K), frozenset(), scheme, K if scheme.dense else ())
    return {s.plan: s for s in assemble(prepared, results, LEVELS)}


def test_worked_example_numbers_exactly() -> None:
    suite = Reference("suite", tuple(PlanInput(r, None) for r in ("r1", "r2", "r3")))
    smu = worked_example(RewardScheme())
    fraction = worked_example(RewardScheme(KILL_FRACTION))
    incremental = worked_example(RewardScheme(INCREMENTAL, 0.5, suite))
    assert {p: s.reward for p, s in smu.items()} == {"A": 0, "B": 0, "C": 2, "D": 2, "E": 2, "F": 1}
    assert {p: s.reward for p, s in fraction.items()} == {"A": 0, "B": 0, "C": 1.25, "D": 1.5, "E": 2, "F": 1.5}
    assert {p: s.reward for p, s in incremental.items()} == {"A": 0, "B": 0, "C": 0.5, "D": 1.5, "E": 2, "F": 1.5}
    # outcomes stay the plan's on its own state; F's hang on m4 makes it indeterminate under the dense schemes
    assert [smu[p].outcome for p in "ABCDEF"] == [
        Outcome.INVALID,
        Outcome.GOLDEN_FAIL,
        Outcome.DETECTED,
        Outcome.DETECTED,
        Outcome.DETECTED,
        Outcome.PASSED,
    ]
    for dense in (fraction, incremental):
        assert [dense[p].outcome for p in "ABCDE"] == [smu[p].outcome for p in "ABCDE"]
        assert dense["F"].outcome == Outcome.TIMEOUT and dense["F"].detail["on"] == "m4"
        assert all(s.ceiling == 2.0 for s in dense.values())
    assert fraction["D"].detail["kills"] == {"killed": 2, "of": 4}
    assert incremental["C"].detail["kills"] == {"killed": 0, "of": 2, "penalty": 0.5}
    assert incremental["D"].detail["kills"] == {"killed": 1, "of": 2}
    # the same suite given by its kills (as the reward functions keep it) gives the same numbers
    known = worked_example(RewardScheme(INCREMENTAL, 0.5, Reference("suite", killed=frozenset({"m1", "m2"}))))
    assert {p: s.reward for p, s in known.items()} == {p: s.reward for p, s in incremental.items()}
    # the penalty is configurable; when the suite kills everything no plan is penalised
    zero = worked_example(RewardScheme(INCREMENTAL, 0.0, suite))
    assert zero["C"].reward == 1.0
    everything = worked_example(RewardScheme(INCREMENTAL, 0.5, Reference("all", killed=frozenset(K))))
    assert {p: s.reward for p, s in everything.items() if p in "CDE"} == {"C": 1.0, "D": 1.0, "E": 1.0}
    assert all(s.ceiling == 1.0 for s in everything.values())


def perfect_docs(scheme: RewardScheme) -> list[dict[str, Any]]:
    """Two plans per state (golden, m1..m4, an equivalent meq) that kill every killable mutant:
    perfect under every scheme, on every state."""
    results: dict[str, EvalResult] = {}
    pairs = []
    for state in ("golden", *K, "meq"):
        for k in range(2):
            plan = f"{state}-s{k}"
            results |= evaluations(plan, "pass", set(K))
            results[f"{plan}@meq"] = EvalResult(f"{plan}@meq", EvalStatus.PASS)
            pairs.append((PlanInput(plan, None, state=state), state))
    prepared = Prepared(
        tuple(pairs), {}, {}, ("golden", *K, "meq"), frozenset({"meq"}), scheme, K if scheme.dense else ()
    )
    samples = assemble(prepared, results, LEVELS)
    assert all(s.reward == s.ceiling for s in samples)
    return [{"design": "d", "rewards": LEVELS.as_dict(), "results": [s.as_dict() for s in samples]}]


@pytest.mark.parametrize(
    "scheme",
    [
        RewardScheme(),
        RewardScheme(KILL_FRACTION),
        RewardScheme(INCREMENTAL, 0.5, Reference("half", killed=frozenset({"m1", "m2"}))),
        RewardScheme(INCREMENTAL, 0.5, Reference("all", killed=frozenset(K))),
    ],
    ids=["smu", "kill-fraction", "incremental", "incremental-nothing-left"],
)
def test_all_perfect_plans_give_all_zero_advantages(scheme: RewardScheme) -> None:
    docs = perfect_docs(scheme)
    for name in PRESETS:
        for by in ("state", "design", "batch"):
            records = advantage_records(docs, preset(name), by=by)  # type: ignore[arg-type]
            assert records and all(r["advantage"] == 0.0 for r in records), (name, by)


def test_scheme_records_and_refusals() -> None:
    assert RewardScheme().as_dict() == {"name": "smu"}
    assert RewardScheme(INCREMENTAL, 0.25, Reference("runs/a")).as_dict() == {
        "name": "incremental",
        "penalty": 0.25,
        "reference": "runs/a",
    }
    with pytest.raises(ConfigError, match="unknown reward scheme 'dense'"):
        RewardScheme("dense")
    with pytest.raises(ConfigError, match="--reward-penalty"):
        RewardScheme(INCREMENTAL, -1.0)
    with pytest.raises(ConfigError, match="at most golden_pass - invalid"):
        RewardScheme(INCREMENTAL, 1.5).check(LEVELS)
    with pytest.raises(ConfigError, match="reward_scheme='bogus'"):
        R.configure(reward_scheme="bogus")
    docs = [{"design": "a", "reward_scheme": {"name": "kill-fraction"}}, {"design": "b"}]
    with pytest.raises(ConfigError, match="different reward schemes: kill-fraction \\(a\\), smu \\(b\\)"):
        recorded_scheme(docs)
    assert recorded_scheme(docs[:1]) == {"name": "kill-fraction"}
    assert recorded_scheme(docs[1:], SMU) == {"name": "smu"}


def test_bad_scheme_names_are_refused_cleanly(run_cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for command in (
        ["score", str(tmp_path), "--plans", "x"],
        ["run", "-o", str(tmp_path / "r")],
        ["serve", str(tmp_path)],
        ["export", str(tmp_path), "-o", str(tmp_path / "e")],
    ):
        code, _, err = run_cli(*command, "--reward-scheme", "dense")
        assert code == 2, (command, err)
        assert "Invalid value for '--reward-scheme': 'dense' is not one of 'smu', 'kill-fraction', 'incremental'" in err
        assert "Traceback" not in err
    code, _, err = run_cli("run", "counter_en_load", "-o", str(tmp_path / "r"), "--reward-scheme", "incremental")
    assert code == 2 and "incremental needs --reference-suite PATH" in err
    (tmp_path / "hwtp.yaml").write_text("run:\n  reward_scheme: dense\n")
    code, _, err = run_cli("run", "-o", str(tmp_path / "r"), "--config", str(tmp_path / "hwtp.yaml"))
    assert code == 2 and "hwtp.yaml:2: run.reward_scheme: unknown reward scheme 'dense'" in err, err
    monkeypatch.setenv("HWTP_REWARD_SCHEME", "dense")
    with pytest.raises(ConfigError, match="HWTP_REWARD_SCHEME='dense': unknown reward scheme"):
        R.settings().reward_scheme()


# --------------------------------------------------------------------------- real simulators

DESIGN = "counter_en_load"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``hwtp mutate counter_en_load -n 8`` and ``hwtp plan -G 3`` (random policy), as the smu fixture was made."""
    from hwtp.cli.main import main
    from hwtp.mutators.mutantset import load, set_hash

    root = tmp_path_factory.mktemp("schemes")
    assert main(["mutate", DESIGN, "-n", "8", "--seed", "0", "-o", str(root / "m")]) == 0
    assert main(["plan", str(root / "m"), "-o", str(root / "p"), "-G", "3", "--seed", "0"]) == 0
    mutant_set = load(root / "m")
    return {"root": root, "mutdir": root / "m", "plans": root / "p", "set": mutant_set, "hash": set_hash(mutant_set)}


def scored(run_cli: Cli, made: dict[str, Any], name: str, *extra: str) -> dict[str, Any]:
    out = made["root"] / f"{name}.json"
    code, _, err = run_cli("score", made["mutdir"], "--plans", made["plans"], "--json", out, "-j", "1", *extra)
    assert code == 0, err
    return json.loads(out.read_text())


@pytest.mark.sim
def test_smu_is_todays_reward_byte_for_byte(run_cli: Cli, made: dict[str, Any], data_dir: Path) -> None:
    before = json.loads((data_dir / "smu_scores_counter_en_load.json").read_text())
    for extra in ((), ("--reward-scheme", "smu")):
        doc = scored(run_cli, made, "smu", *extra)
        assert doc["mutant_set"] == before["mutant_set"]
        assert json.dumps(doc["results"]) == json.dumps(before["results"])  # the bytes of every result
        assert doc["rewards"] == before["rewards"] and doc["reward_scheme"] == {"name": "smu"}


@pytest.mark.sim
def test_kill_fraction_is_a_denser_signal_than_smu_on_the_same_plans(run_cli: Cli, made: dict[str, Any]) -> None:
    smu = scored(run_cli, made, "smu")
    dense = scored(run_cli, made, "kf", "--reward-scheme", "kill-fraction")
    assert dense["reward_scheme"] == {"name": "kill-fraction"}
    killable = [m.id for m in made["set"].valid if m.klass.value == "killable"]
    assert len(killable) >= 4
    by_plan = {(r["plan"], r["state"]): r for r in smu["results"]}
    for r in dense["results"]:
        assert r["outcome"] == by_plan[(r["plan"], r["state"])]["outcome"]  # the outcome is still the state's
        kills = r["detail"]["kills"]
        assert kills["of"] == len(killable)
        assert r["reward"] == 1 + kills["killed"] / len(killable) and r["ceiling"] == 2.0
    cfg = preset("grpo-smu")
    sparse_zero = summarize([smu], cfg)["state"].share
    dense_zero = summarize([dense], cfg)["state"].share
    assert dense_zero < sparse_zero, (dense_zero, sparse_zero)


def witness_plan(made: dict[str, Any], mutant: str) -> str:
    return (made["mutdir"] / "witnesses" / f"{mutant}.yaml").read_text()


@pytest.mark.sim
def test_rewards_adapter_gives_the_schemes_rewards(run_cli: Cli, made: dict[str, Any]) -> None:
    """hwtp.rewards configured with a scheme gives hwtp score's rewards under that scheme."""
    first = made["set"].valid[0].id
    plan = witness_plan(made, first)
    path = made["root"] / "witness.yaml"
    path.write_text(plan)
    truth = {"design": DESIGN, "state": first, "mutant_set": made["hash"]}
    ref = made["root"] / "ref"
    ref.mkdir(exist_ok=True)
    (ref / "w.yaml").write_text(plan)  # the suite: the witness itself, so the witness adds nothing
    R.configure(states=[made["mutdir"]], workers=1)
    for name, extra, config in [
        (KILL_FRACTION, (), {}),
        (INCREMENTAL, ("--reference-suite", str(ref)), {"reference": ref}),
        (INCREMENTAL, ("--reference-suite", str(ref), "--reward-penalty", "0.25"), {"reference": ref, "penalty": 0.25}),
    ]:
        out = made["root"] / "one.json"
        code, _, err = run_cli(
            "score", made["mutdir"], "--plans", path, "--states", first, "--json", out, "--reward-scheme", name, *extra
        )
        assert code == 0, err
        (expected,) = [r for r in json.loads(out.read_text())["results"] if r["state"] == first]
        R.configure(reward_scheme=name, **config)
        (result,) = R.score_completions([(truth, f"```yaml\n{plan}```")])
        assert result.reward == expected["reward"] and result.detail["kills"] == expected["detail"]["kills"]
        assert result.as_dict()["reward_scheme"] == name
        assert R.trl_reward(prompts=["p"], completions=[f"```yaml\n{plan}```"], ground_truth=[truth]) == [result.reward]
    assert result.reward == 0.75  # incremental: nothing new beyond the suite, penalty 0.25


@pytest.mark.sim
def test_serve_answers_with_the_schemes_rewards(made: dict[str, Any]) -> None:
    from serving import ServeProcess

    first = made["set"].valid[0].id
    plan = witness_plan(made, first)
    truth = {"design": DESIGN, "state": first, "mutant_set": made["hash"]}
    R.configure(states=[made["mutdir"]], workers=1, reward_scheme=KILL_FRACTION)
    (expected,) = R.score_completions([(truth, f"```yaml\n{plan}```")])
    srv = ServeProcess(made["mutdir"], made["root"], "--reward-scheme", "kill-fraction", "--workers", "1")
    try:
        assert "reward scheme kill-fraction" in srv.banner
        body = {"query": [f"P```yaml\n{plan}```"], "prompts": ["P"], "labels": [json.dumps(truth)]}
        data = srv.json("/reward", body)
        assert data["rewards"] == [expected.reward] and data["reward_scheme"] == "kill-fraction"
        assert 1.0 < expected.reward <= 2.0
        verify = {
            "responses_create_params": {"input": []},
            "response": {"output": [{"type": "message", "content": [{"type": "output_text", "text": plan}]}]},
            "ground_truth": truth,
        }
        answer = srv.json("/verify", verify)
        assert answer["reward"] == expected.reward and answer["hwtp_reward_scheme"] == "kill-fraction"
    finally:
        code, _, err = srv.stop()
    assert code == 0, err


@pytest.mark.sim
def test_export_and_run_record_the_scheme(run_cli: Cli, made: dict[str, Any], tmp_path: Path) -> None:
    scored(run_cli, made, "kf", "--reward-scheme", "kill-fraction")
    out = tmp_path / "export"
    code, _, err = run_cli("export", made["root"] / "kf.json", "--plans", made["plans"], "-o", out, "--format", "trl")
    assert code == 0, err
    assert json.loads((out / "manifest.json").read_text())["metadata"]["reward_scheme"] == {"name": "kill-fraction"}
    code, _, err = run_cli("export", made["root"] / "kf.json", "-o", tmp_path / "e2", "--reward-scheme", "smu")
    assert code == 2 and "made with reward scheme 'kill-fraction'" in err

    rundir = tmp_path / "run"
    code, _, err = run_cli(
        "run", DESIGN, "--states", "2", "-G", "2", "-o", rundir, "--format", "jsonl", "--reward-scheme", "kill-fraction"
    )
    assert code == 0, err
    manifest = json.loads((rundir / "export" / "jsonl" / "manifest.json").read_text())
    assert manifest["metadata"]["reward_scheme"] == {"name": "kill-fraction"}
    shard = next((rundir / "export" / "jsonl" / "data").glob("*.jsonl"))
    rows = [json.loads(line) for line in shard.read_text().splitlines()]
    assert rows and all(r["ceiling"] == 2.0 and "kills" in r["detail"] for r in rows if not r["indeterminate"])
    # a suite of plans, and a run folder (the design's accumulated best plans there)
    for suite in (made["plans"], rundir):
        inc = tmp_path / "inc.json"
        code, _, err = run_cli(
            "score",
            made["mutdir"],
            "--plans",
            made["plans"],
            "--json",
            inc,
            "--reward-scheme",
            "incremental",
            "--reference-suite",
            suite,
        )
        assert code == 0, err
        doc = json.loads(inc.read_text())
        assert doc["reward_scheme"] == {"name": "incremental", "penalty": 0.5, "reference": str(suite)}
        correct = [r for r in doc["results"] if r["outcome"] in ("passed", "detected")]
        assert correct and all(r["reward"] in (0.5, 1.0) or r["reward"] > 1.0 for r in correct)
        if suite == made["plans"]:  # every plan is in its own suite: nothing left to kill, no penalty
            assert {r["reward"] for r in correct} == {1.0} and {r["ceiling"] for r in correct} == {1.0}


@pytest.mark.sim
def test_a_plan_of_every_witness_is_perfect_under_every_scheme(run_cli: Cli, made: dict[str, Any]) -> None:
    """All witnesses in one plan kill every killable mutant: at the ceiling on every state, so
    every advantage is 0, under each scheme (the incremental suite: one witness)."""
    import yaml

    tests = []
    for path in sorted((made["mutdir"] / "witnesses").glob("*.yaml")):
        tests.extend(yaml.safe_load(path.read_text())["tests"])
    folder = made["root"] / "all-witnesses"
    folder.mkdir(exist_ok=True)
    states = ["golden", *(m.id for m in made["set"].states)]
    for state in states:  # the same plan written for every state
        (folder / f"{state}.yaml").write_text(yaml.safe_dump({"tests": tests}))
    suite = made["mutdir"] / "witnesses" / f"{made['set'].valid[0].id}.yaml"
    for extra in (
        (),
        ("--reward-scheme", "kill-fraction"),
        ("--reward-scheme", "incremental", "--reference-suite", suite),
    ):
        out = made["root"] / "perfect.json"
        code, _, err = run_cli("score", made["mutdir"], "--plans", folder, "--json", out, *extra)
        assert code == 0, err
        doc = json.loads(out.read_text())
        # plans from files are tied to no state: each is scored on every state
        results = [r for r in doc["results"] if r["plan"] == r["state"]]
        assert len(results) == len(states)
        assert all(r["reward"] == r["ceiling"] for r in results), extra
        doc["results"] = results
        for by in ("state", "design"):
            records = advantage_records([doc], preset("grpo-smu"), by=by)  # type: ignore[arg-type]
            assert all(r["advantage"] == 0.0 for r in records), (extra, by)


@pytest.mark.sim
def test_trainer_hook_ceilings_follow_the_scheme(made: dict[str, Any]) -> None:
    """GRPO-SMu in the trainer takes each state's ceiling from the configured scheme: golden's is
    the detect level under the dense schemes (a golden plan can kill as much as any)."""
    from hwtp.rewards.grpo_smu import advantages, state_ceilings

    first = made["set"].valid[0].id
    truths = [{"design": DESIGN, "state": s, "mutant_set": made["hash"]} for s in ("golden", first)]
    R.configure(states=[made["mutdir"]], workers=1)
    assert state_ceilings(truths) == [1.0, 2.0]
    R.configure(reward_scheme=KILL_FRACTION)
    assert state_ceilings(truths) == [2.0, 2.0]
    everything = made["root"] / "suite"
    everything.mkdir(exist_ok=True)
    for m in made["set"].valid:  # every witness: the suite kills every killable mutant
        (everything / f"{m.id}.yaml").write_text(witness_plan(made, m.id))
    R.configure(reward_scheme=INCREMENTAL, reference=everything)
    assert state_ceilings(truths) == [1.0, 1.0]  # nothing left to kill
    # perfect kill-fraction rewards on golden and a mutant: no advantage either way
    R.configure(reward_scheme=KILL_FRACTION)
    adv = advantages([2.0, 2.0], [DESIGN] * 2, ["golden", first], state_ceilings(truths))
    assert adv.tolist() == [0.0, 0.0]


@pytest.mark.trainer
def test_grpo_smu_trainer_takes_the_scheme_before_it_loads_anything() -> None:
    """``GRPOSMuTrainer(reward_scheme=...)`` sets hwtp.rewards' scheme (rewards and ceilings) at
    once; a bad name is refused before TRL builds anything."""
    pytest.importorskip("trl")
    from hwtp.rewards.grpo_smu import GRPOSMuTrainer

    with pytest.raises(ConfigError, match="reward_scheme='dense'"):
        GRPOSMuTrainer(reward_scheme="dense")
    with pytest.raises(TypeError):  # no model: TRL's own refusal, after the scheme is set
        GRPOSMuTrainer(reward_scheme=KILL_FRACTION)
    assert R.settings().reward_scheme().name == KILL_FRACTION
