"""hwtp plan: prompts that hide the state, the offline/replay/openai policies, and the files
that hwtp score, advantage and export read."""

from __future__ import annotations

import difflib
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from hwtp.mutators import engine, mutantset
from hwtp.mutators.mutantset import GOLDEN
from hwtp.plans.files import read_plans
from hwtp.policy.planning import plan_states, state_requests, write_plans
from hwtp.policy.policies import RandomPolicy
from hwtp.policy.prompt import Templates
from hwtp.rtl.design import load_design, shipped_names
from hwtp.scoring.score import Outcome, ScoreConfig, score

_spec = importlib.util.spec_from_file_location("hwtp_tests_llm_server_p", Path(__file__).with_name("llm_server.py"))
assert _spec and _spec.loader
llm_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(llm_server)

SECRET = "sk-hwtp-test-DO-NOT-LEAK-0123456789"


@pytest.fixture(scope="module")
def small_set(tmp_path_factory: pytest.TempPathFactory) -> mutantset.MutantSet:
    """A few mutants of the FIFO, written to disk (no witness search: no simulator needed)."""
    root = tmp_path_factory.mktemp("mut")
    result = engine.mutate(load_design("fifo_sync"), engine.MutationConfig(n=6, witness_cycles=0))
    mutantset.write(result, root)
    return mutantset.load(root)


def test_prompts_differ_only_inside_the_rtl_at_the_mutation(small_set: mutantset.MutantSet) -> None:
    states = [GOLDEN, *(m.id for m in small_set.valid)]
    requests = state_requests(small_set, states, Templates.load())
    golden = requests[0].messages
    for request in requests[1:]:
        mutant = small_set.get(request.state)
        assert request.messages[0] == golden[0]  # system message identical
        a, b = golden[1]["content"], request.messages[1]["content"]
        matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
        changes = [op for op in matcher.get_opcodes() if op[0] != "equal"]
        rtl_start = a.index("```verilog\n") + len("```verilog\n")
        rtl_end = a.index("\n```", rtl_start)
        for _tag, i1, i2, _j1, _j2 in changes:
            assert rtl_start <= i1 and i2 <= rtl_end, (request.state, a[i1:i2])
        # the change sits exactly at the mutation's byte span within the embedded source
        src = small_set.design.source(mutant.file).text
        offset = len(src.encode()[: mutant.start].decode())
        first = changes[0][1] - rtl_start
        assert abs(first - offset) <= len(mutant.original) + 2
        for word in ("mutant", "hwtp_mutant", "golden", request.state):
            assert word not in b


def test_prompt_template_override(small_set: mutantset.MutantSet, tmp_path: Path) -> None:
    (tmp_path / "system.md").write_text("CUSTOM SYSTEM {{spec}}")
    (tmp_path / "user.md").write_text("Spec:{{spec}}\nRTL:{{rtl}}\nUnknown:{{nope}}")
    messages = state_requests(small_set, [GOLDEN], Templates.load(tmp_path))[0].messages
    assert messages[0]["content"] == "CUSTOM SYSTEM {{spec}}"  # only the user template is filled
    assert "module fifo_sync" in messages[1]["content"] and "{{nope}}" in messages[1]["content"]


@pytest.mark.sim
@pytest.mark.parametrize("name", shipped_names())
def test_random_policy_plans_pass_on_golden(name: str, mutated: Any, tmp_path: Path) -> None:
    result = mutated(name)
    states = [GOLDEN, *(m.id for m in result.valid[:3])]
    records = plan_states(result, states, 2, RandomPolicy(result, seed=3), Templates.load())
    assert all(r.error is None for r in records), [r.error for r in records]
    write_plans(records, tmp_path / "plans")
    plans = read_plans([str(tmp_path / "plans")])
    assert {p.state for p in plans} == set(states)
    scores = score(result, plans, ScoreConfig(jobs=2))
    assert len(scores.results) == len(records)
    assert not any(r.outcome in (Outcome.GOLDEN_FAIL, Outcome.INVALID) for r in scores.results)
    assert scores.golden_pass_rate == 1.0


def _plan_completion() -> str:
    return (
        "<think>The FIFO is empty after reset.</think>\nHere is the plan:\n```yaml\n"
        "tests:\n  - name: empty_after_reset\n    steps:\n      - expect: {empty: 1, full: 0}\n```\n"
    )


@pytest.mark.sim
def test_openai_policy_end_to_end_with_cache_and_replay(
    small_set: mutantset.MutantSet, tmp_path: Path, run_cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HWTP_TEST_KEY", SECRET)
    mutdir = tmp_path / "mut"
    mutantset.write(small_set, mutdir)
    with llm_server.running_server({"texts": [_plan_completion(), "I will not write a plan."]}) as url:
        args = ["plan", mutdir, "-o", tmp_path / "p1", "--states", f"golden,{small_set.valid[0].id}", "-G", "2",
                "--endpoint", url, "--model", "tiny", "--api-key-env", "HWTP_TEST_KEY", "--seed", "5"]
        code, out, err = run_cli(*args)
        assert code == 0, err
        first = llm_server.stats(url)["requests"]
        assert first >= 1
        code, out, err = run_cli(*[a if a != tmp_path / "p1" else tmp_path / "p2" for a in args])
        assert code == 0, err
        assert llm_server.stats(url)["requests"] == first  # every completion came from the cache
    records = [json.loads(line) for line in (tmp_path / "p1" / "plans.jsonl").read_text().splitlines()]
    assert len(records) == 4 and {r["state"] for r in records} == {"golden", small_set.valid[0].id}
    assert all(r["prompt"][1]["role"] == "user" and r["model"] for r in records)
    assert any(r["error"] is None for r in records) and any(r["error"] for r in records)
    everything = "\n".join(p.read_text() for p in (tmp_path / "p1").rglob("*") if p.is_file())
    assert SECRET not in everything and SECRET not in out + err
    # replay: same completions, no endpoint
    code, _, err = run_cli("plan", mutdir, "-o", tmp_path / "p3", "--policy", "replay", "--from", tmp_path / "p1",
                           "--states", f"golden,{small_set.valid[0].id}", "-G", "2")
    assert code == 0, err
    replayed = [json.loads(line) for line in (tmp_path / "p3" / "plans.jsonl").read_text().splitlines()]
    assert [r["completion"] for r in replayed] == [r["completion"] for r in records]
    # score: tied plans scored on their own state; the invalid ones get reward 0 with a reason
    code, _, err = run_cli("score", mutdir, "--plans", tmp_path / "p1", "--json", tmp_path / "s.json")
    assert code == 0, err
    results = json.loads((tmp_path / "s.json").read_text())["results"]
    assert len(results) == 4
    assert {r["outcome"] for r in results if r["plan"].endswith("s01")} == {"invalid"}
    assert all(r["reward"] == 0 for r in results if r["outcome"] == "invalid")
    # export: prompts and completions exactly as sent/received, nothing secret or local
    code, _, err = run_cli("export", tmp_path / "s.json", "--plans", tmp_path / "p1", "-o", tmp_path / "x",
                           "--batch-size", "1")
    assert code == 0, err
    shards = sorted((tmp_path / "x" / "data").glob("*.jsonl"))
    lines = [json.loads(x) for f in shards for x in f.read_text().splitlines()]
    by_plan = {r["plan"]: r for r in records}
    for line in lines:
        assert line["prompt"] == by_plan[line["plan"]]["prompt"]
        assert line["completion"] == by_plan[line["plan"]]["completion"]
    text = "".join(f.read_text() for f in (tmp_path / "x").rglob("*") if f.is_file())
    assert SECRET not in text and str(tmp_path) not in text


def test_plan_bad_options(run_cli: Any, small_set: mutantset.MutantSet, tmp_path: Path) -> None:
    mutdir = tmp_path / "mut"
    mutantset.write(small_set, mutdir)
    code, _, err = run_cli("plan", mutdir, "-o", tmp_path / "p", "--policy", "openai")
    assert code == 2 and "--endpoint" in err
    code, _, err = run_cli("plan", mutdir, "-o", tmp_path / "p", "--policy", "psychic")
    assert code == 2 and "valid: random, openai, replay" in err
    code, _, err = run_cli("plan", mutdir, "-o", tmp_path / "p", "--states", "m9999")
    assert code == 2 and "m9999" in err
