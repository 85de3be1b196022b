"""hwtp learn: the data pieces (short prompts, weak plans, the split), the across-seed
intervals, and a tiny end-to-end run that trains on non-zero signal inside TRL (marker
``trainer``) and that ``hwtp report`` shows."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hwtp.mutators.mutantset import GOLDEN
from hwtp.plans.format import extract_plan, to_data
from hwtp.rtl.design import SourceFile
from hwtp.training.learn.data import (
    DataConfig,
    diff_prompt,
    prepare_design,
    prompt_text,
    render_plan,
    sft_rows,
    short_rtl,
    weaken,
)
from hwtp.training.learn.stats import interval

RTL = """// a comment
module m (
    input  wire a,   // trailing comment
    /* block
       comment */
    output wire y
);

    assign y = ~a;
endmodule
"""


def test_short_rtl_drops_comments_and_blanks_only() -> None:
    text = short_rtl([SourceFile("m.v", RTL)])
    assert text == "module m (\ninput wire a,\noutput wire y\n);\nassign y = ~a;\nendmodule"
    prompt = prompt_text("m", [SourceFile("m.v", RTL)])
    assert prompt.startswith("design: m\nmodule m (") and prompt.endswith("endmodule\nplan:\n")


def test_diff_prompt_shows_only_the_changed_lines() -> None:
    golden = [SourceFile("m.v", RTL)]
    mutant = [SourceFile("m.v", RTL.replace("assign y = ~a;", "assign y = a;"))]
    assert diff_prompt("m", mutant, golden) == "design: m\n- assign y = ~a;\n+ assign y = a;\nplan:\n"
    assert diff_prompt("m", golden, golden) == "design: m\nsame\nplan:\n"
    # a comment-only change is no change: the prompt reads the code
    assert diff_prompt("m", [SourceFile("m.v", RTL.replace("a comment", "other"))], golden).endswith("same\nplan:\n")


def test_render_plan_is_a_plan_with_the_same_data() -> None:
    data = {
        "tests": [
            {"name": "t0", "steps": [{"drive": {"en": 1, "d": 200}}, {"wait": 2}, {"reset": 1}, {"expect": {"q": 3}}]}
        ]
    }
    text = render_plan(data)
    assert "  - drive: {en: 1, d: 200}\n" in text
    assert to_data(extract_plan(text)) == data


def test_weaken_keeps_one_test_and_one_expect_at_its_end() -> None:
    steps: list[dict[str, Any]] = []
    for k in range(5):
        steps += [{"drive": {"a": k}}, {"expect": {"y": k}}]
    data = {"tests": [{"name": "x", "steps": steps}, {"name": "z", "steps": steps}]}
    for seed in range(10):
        weak = weaken(data, random.Random(seed))
        (test,) = weak["tests"]
        kinds = [next(iter(s)) for s in test["steps"]]
        assert kinds.count("expect") == 1 and kinds[-1] == "expect"
        kept = steps.index(test["steps"][-1])  # every expect differs: its place in the original
        assert test["steps"] == [s for s in steps[:kept] if "expect" not in s] + [steps[kept]]
    assert data["tests"][0]["steps"] == steps  # the input is not changed


@pytest.mark.sim
def test_prepare_design_splits_states_and_makes_weak_plans_that_pass_golden(tmp_path: Path) -> None:
    import hwtp.rewards

    config = DataConfig(mutants=24, held_out=6, train_mutants=4, weak_plans=6)
    data = prepare_design("counter_en_load", tmp_path, config)
    train, held = data.split("train"), data.split("held_out")
    assert train[0].state == GOLDEN and len(train) == 5 and len(held) == 6
    assert not {s.state for s in train} & {s.state for s in held}
    assert all(s.prompt.startswith("design: counter_en_load\n") for s in data.states)
    assert len({s.prompt for s in data.states}) == len(data.states)  # each mutant's RTL shows in its prompt
    assert prepare_design("counter_en_load", tmp_path, config).states == data.states  # seeded: the same split
    assert len(data.plans) == 6 and len(set(data.plans)) == 6
    for plan in data.plans:
        (test,) = extract_plan(plan).tests
        assert [s.kind for s in test.steps].count("expect") == 1
    hwtp.rewards.configure(states=[tmp_path], workers=1)
    try:
        results = hwtp.rewards.score_completions([(s.truth, p) for s in held for p in data.plans])
    finally:
        hwtp.rewards.reset()
    outcomes = [r.outcome for r in results]
    assert set(outcomes) <= {"passed", "detected"}  # weak plans pass on golden
    assert outcomes.count("detected") < len(outcomes)  # ... and miss mutants
    rows = sft_rows([data], per_state=3, seed=0)
    assert len(rows) == 3 * len(train) and {p for p, _ in rows} == {s.prompt for s in train}


def test_interval_across_seeds() -> None:
    one = interval([0.25])
    assert one["mean"] == one["lo"] == one["hi"] == 0.25 and one["n"] == 1
    three = interval([0.1, 0.2, 0.3])
    assert three["mean"] == pytest.approx(0.2) and three["min"] == 0.1 and three["max"] == 0.3
    assert three["lo"] == pytest.approx(0.2 - 4.303 * 0.1 / 3**0.5)
    assert interval([])["mean"] is None


# --------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def learned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``hwtp learn counter_en_load`` at the smallest scale: a short warm start, 3 GRPO steps per arm."""
    pytest.importorskip("trl")
    out = tmp_path_factory.mktemp("learn") / "out"
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    args = [
        "learn",
        "counter_en_load",
        "-o",
        str(out),
        "--seeds",
        "0",
        "--steps",
        "3",
        "--sft-steps",
        "80",
        "--prompts",
        "4",
        "-G",
        "4",
        "--eval-samples",
        "1",
        "--held-out",
        "4",
        "--train-mutants",
        "3",
        "--weak-plans",
        "4",
        "--max-completion",
        "96",
        "--workers",
        "1",
        "-j",
        "2",
        "--arms",
        "grpo,grpo-smu,grpo-smu-dense",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "hwtp.cli.main", *args], env=env, capture_output=True, text=True, timeout=1800
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "| split | arm |" in proc.stdout
    return out


@pytest.mark.sim
@pytest.mark.trainer
def test_learn_trains_on_signal_in_the_trainer(learned: Path) -> None:
    """The CI-scale run learns from non-zero signal: every number is the trainer's own log."""
    results = json.loads((learned / "results.json").read_text())
    assert results["kind"] == "hwtp-learn" and [r["seed"] for r in results["runs"]] == [0]
    run = results["runs"][0]
    assert set(run["arms"]) == {"grpo", "grpo-smu", "grpo-smu-dense"}
    assert results["config"]["arms"][2]["reward_scheme"] == "kill-fraction"
    for name, arm in run["arms"].items():
        steps = arm["steps"]
        assert [s["step"] for s in steps] == [1, 2, 3], name
        # a group with non-zero advantages (the warm start earns rewards 1 and 2)
        assert min(s["zero_advantage_groups"] for s in steps) < 1.0, name
        assert max(s["grad_norm"] for s in steps) > 0.0, name
        assert arm["param_change"] > 0.0, name
        assert all(0.0 <= s["reward"] <= 2.0 and 0.0 <= s["invalid"] <= 1.0 for s in steps), name
        assert 0.0 < arm["reward_share"] < 1.0
    # two or more states of one design in one generation batch: design groups are exercised
    assert max(s["max_states_per_design"] for s in run["arms"]["grpo-smu"]["steps"]) >= 2


@pytest.mark.sim
@pytest.mark.trainer
def test_learn_results_are_sane_and_the_report_shows_them(learned: Path, tmp_path: Path) -> None:
    results = json.loads((learned / "results.json").read_text())
    run = results["runs"][0]
    assert run["sft"]["rows"] > 0 and run["sft"]["loss"][-1] < run["sft"]["loss"][0]
    for evaluation in [run["before"], *(a["after"] for a in run["arms"].values())]:
        held = evaluation["held_out"]
        assert held["states"] == 4 and held["samples"] == 4 and held["mutant_samples"] == 4
        for key in ("golden_pass", "detection", "invalid"):
            assert 0.0 <= held[key] <= 1.0
        assert sum(held["outcomes"].values()) == held["samples"]
    summary = results["summary"]["grpo-smu"]["held_out"]["detection"]
    assert summary["before"]["n"] == 1 and summary["before"]["mean"] == run["before"]["held_out"]["detection"]
    assert (learned / results["picture"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = tmp_path / "report.html"
    from hwtp.cli.main import main

    assert main(["report", str(learned), "-o", str(page)]) == 0
    html = page.read_text()
    assert 'data-section="learn"' in html and "held-out mutants" in html and "grpo-smu" in html
    assert "<svg" in html


def test_learn_refuses_bad_input_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hwtp.cli.main import main

    pytest.importorskip("trl")
    assert main(["learn", "-o", str(tmp_path / "o")]) == 2
    assert "name at least one design" in capsys.readouterr().err
    assert main(["learn", "counter_en_load", "-o", str(tmp_path / "o"), "--seeds", "0,x"]) == 2
    assert "--seeds '0,x': expected comma-separated integers" in capsys.readouterr().err
    assert main(["learn", "counter_en_load", "-o", str(tmp_path / "o"), "-G", "1"]) == 2
    assert "GRPO needs at least 2" in capsys.readouterr().err
    assert main(["learn", "counter_en_load", "-o", str(tmp_path / "o"), "--arms", "grpo,ppo"]) == 2
    assert "unknown arm(s) ppo" in capsys.readouterr().err
    for option, value in (("--lr", "nan"), ("--steps", "0"), ("--beta", "-1"), ("--temperature", "inf")):
        assert main(["learn", "counter_en_load", "-o", str(tmp_path / "o"), option, value]) == 2, option
        assert option in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_learn_without_the_trl_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from hwtp.errors import ConfigError
    from hwtp.training.learn import require_trainer

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "trl" else real(name, *a))
    with pytest.raises(ConfigError, match=r"needs ([a-z]+, )*trl \(not installed\): pip install 'hwtp\[trl\]'"):
        require_trainer()
