"""hwtp.rewards: each adapter called exactly as its trainer calls it, against real warm
simulators, reproducing ``hwtp score``'s rewards; completion cleanup; missing and changed
mutant sets."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hwtp.rewards as R
from hwtp.errors import PlanError, RewardError
from hwtp.plans.format import extract_plan
from hwtp.rewards.completion import cut_prompt, response_text, strip_trailing_special
from hwtp.sim import warm

DESIGNS = ("counter_en_load", "adder_carry")
HASH = "ab" * 32
CHAT = "<|im_start|>{role}\n{content}<|im_end|>\n"


def chat_template(messages: list[dict[str, str]]) -> str:
    """A ChatML rendering with the generation prompt, as OpenRLHF's --data.apply_chat_template gives."""
    return "".join(CHAT.format(**m) for m in messages) + "<|im_start|>assistant\n"


@pytest.fixture(autouse=True)
def _fresh_rewards() -> Iterator[None]:
    R.reset()
    yield
    R.reset()


# --------------------------------------------------------------------------- no simulator


def test_ground_truth_forms() -> None:
    truth = {"design": "counter_en_load", "state": "m0003", "mutant_set": HASH}
    assert R.parse_truth(truth) == R.parse_truth(json.dumps(truth)) == R.GroundTruth("counter_en_load", "m0003", HASH)
    for bad, words in [
        ("not json", "not JSON"),
        ([1, 2], "must be an object"),
        ({"design": "x", "state": "golden"}, "lacks mutant_set"),
        ({"design": "x", "state": "golden", "mutant_set": "abc"}, "not a mutant set hash"),
        ({"design": "../etc", "state": "golden", "mutant_set": HASH}, "not a design name"),
        ({"design": "x", "state": 3, "mutant_set": HASH}, "must be text"),
    ]:
        for _ in range(2):  # a refused ground truth is refused every time (the checked ones are kept)
            with pytest.raises(RewardError, match=words):
                R.parse_truth(bad)


def test_trailing_special_tokens_and_prompt_cut() -> None:
    for end in ("<|im_end|>", "</s>", "<|eot_id|>", "<|endoftext|>", "<|im_end|>\n<|endoftext|>", "<eos>", "<|end|>"):
        assert strip_trailing_special("tests: []" + end) == "tests: []"
    assert strip_trailing_special("a <|im_end|> b") == "a <|im_end|> b"  # only trailing ones
    prompt = chat_template([{"role": "user", "content": "write a plan " * 30}])
    assert cut_prompt(prompt + "ANSWER", prompt) == "ANSWER"
    # a decode round trip that changed the prompt's start: cut after its end
    assert cut_prompt("X" + prompt[5:] + "ANSWER", prompt) == "ANSWER"
    assert cut_prompt("no prompt here", prompt) == "no prompt here"
    # a short prompt that is not a prefix is never searched for inside the response
    assert cut_prompt("tests:\n- expect: {q: 1}", "x") == "tests:\n- expect: {q: 1}"


def test_prompt_example_plan_is_never_a_plan() -> None:
    from hwtp.policy.prompt import Templates

    fmt = Templates.load().format
    assert extract_plan(fmt).tests[0].name == "counts_when_enabled"  # extraction alone would take it
    assert "counts_when_enabled" not in response_text("Here is the format:\n" + fmt)
    with pytest.raises(PlanError, match="no plan found"):
        extract_plan(response_text(fmt + "<|im_end|>"))


def test_example_texts_are_removed_whatever_characters_they_hold() -> None:
    """An example text is looked for only where the rarest character it holds is (a scan of one
    character): the format example and a prompt's example, one with and one without such a
    character, are each removed from a completion that holds them, and nothing else is."""
    from hwtp.policy.prompt import Templates

    fmt = Templates.load().format
    plain = "tests:\n  - name: own_example\n    steps:\n      - wait: 1\n"  # none of the rare characters
    prompt = f"Answer like this:\n```yaml\n{plain}```\n"
    answer = "tests:\n- name: mine\n  steps:\n  - wait: 2\n"
    for held in (fmt, plain):
        assert response_text(f"{held}\n{answer}", prompt).strip() == answer.strip()
    assert response_text(answer, prompt) == answer.rstrip()
    assert "own_example" in response_text(plain)  # not an example without that prompt


def test_no_folders_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HWTP_STATES", raising=False)
    with pytest.raises(RewardError, match="no folders to search; set HWTP_STATES"):
        R.score_completions([({"design": "counter_en_load", "state": "golden", "mutant_set": HASH}, "x")])


def test_executor_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``HWTP_REWARD_EXECUTOR`` picks the executor of processes that load the reward functions by
    path (no configure call); configure's argument wins; a wrong value names the variable."""
    from hwtp.errors import ConfigError

    monkeypatch.delenv("HWTP_REWARD_EXECUTOR", raising=False)
    assert R.settings().executor_name() == "local" and R.executor_stats() == {"name": "local"}
    monkeypatch.setenv("HWTP_REWARD_EXECUTOR", "ray")
    assert R.settings().executor_name() == "ray"
    assert R.configure(executor="local").executor_name() == "local"
    R.reset()
    monkeypatch.setenv("HWTP_REWARD_EXECUTOR", "slurm")
    with pytest.raises(ConfigError, match="HWTP_REWARD_EXECUTOR='slurm': expected one of local, ray"):
        R.settings().executor_name()


def test_adapters_have_the_trainers_signatures() -> None:
    import inspect

    assert list(inspect.signature(R.trl_reward).parameters)[:3] == ["prompts", "completions", "completion_ids"]
    assert inspect.iscoroutinefunction(R.trl_reward_async)
    assert R.trl_reward.__name__ == "hwtp_reward"
    params = list(inspect.signature(R.compute_score).parameters)
    assert params[:4] == ["data_source", "solution_str", "ground_truth", "extra_info"]
    params = list(inspect.signature(R.compute_score_batch).parameters)
    assert params[:4] == ["data_sources", "solution_strs", "ground_truths", "extra_infos"]
    assert list(inspect.signature(R.reward_func).parameters)[:3] == ["queries", "prompts", "labels"]
    # the file trainers load by path (OpenRLHF's --reward.remote_url, verl's custom_reward_function.path)
    import importlib.util

    import hwtp.rewards.entry as entry

    spec = importlib.util.spec_from_file_location("reward_func", entry.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.reward_func is R.reward_func and module.compute_score is R.compute_score


# --------------------------------------------------------------------------- real mutant sets


def _rows(folder: Path) -> list[dict[str, Any]]:
    files = sorted((folder / "data").glob("*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text(encoding="utf-8").splitlines() if line]


def _corrupt(completion: str, design: str) -> list[str]:
    """Plans that fail golden, do not parse, or name a port the design lacks."""
    port = "q" if design == "counter_en_load" else "sum"
    wrong = re.sub(rf"({port}): (\d+)", lambda m: f"{m.group(1)}: {(int(m.group(2)) + 1) % 256}", completion, count=1)
    return [wrong, completion[: len(completion) // 3] + "\n  - drive: {", completion.replace(f"{port}:", "nope:", 1)]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``hwtp run`` of two designs (random policy) with trainer exports, and ``hwtp score``'s
    rewards of its plans plus corrupted ones, per (design, completion, state)."""
    from hwtp.cli.main import main

    root = tmp_path_factory.mktemp("rewards")
    out = root / "run"
    formats = [a for f in ("trl", "verl", "openrlhf", "jsonl") for a in ("--format", f)]
    code = main(
        ["run", *DESIGNS, "-o", str(out), "--states", "3", "-G", "2", "--policy", "random", *formats, "-j", "1"]
    )
    assert code == 0
    records = _rows(out / "export" / "jsonl")
    expected: dict[tuple[str, str, str], float] = {}
    for design in DESIGNS:
        mine = [r for r in records if r["design"] == design]
        plans = root / f"plans-{design}"
        plans.mkdir()
        lines = []
        for i, r in enumerate(mine):
            for j, text in enumerate([r["completion"], *_corrupt(r["completion"], design)]):
                lines.append(
                    {
                        "plan": f"p{i}-{j}",
                        "state": r["state"],
                        "completion": text,
                        "design": design,
                        "mutant_set": r["mutant_set"],
                    }
                )
        (plans / "plans.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        scores = root / f"scores-{design}.json"
        mutdir = out / "designs" / design / "mutants"
        assert main(["score", str(mutdir), "--plans", str(plans), "--json", str(scores), "-j", "1"]) == 0
        by_plan = {x["plan"]: x for x in lines}
        for s in json.loads(scores.read_text())["results"]:
            expected[(design, by_plan[s["plan"]]["completion"], s["state"])] = s["reward"]
    return {"out": out, "records": records, "expected": expected}


def _cases(run: dict[str, Any], fmt: str) -> list[tuple[dict[str, Any], str, float]]:
    """(export row, completion, hwtp score's reward): every plan of the run and its corruptions, on the row's state."""
    rows = _rows(run["out"] / "export" / fmt) if fmt != "verl" else _verl_rows(run["out"])
    cases = []
    for row in rows:
        truth = (
            row["ground_truth"]
            if fmt == "trl"
            else (json.loads(row["label"]) if fmt == "openrlhf" else row["reward_model"]["ground_truth"])
        )
        for (design, text, state), reward in run["expected"].items():
            if design == truth["design"] and state == truth["state"]:
                cases.append((row, text, reward))
    return cases


def _verl_rows(out: Path) -> list[dict[str, Any]]:
    pq = pytest.importorskip("pyarrow.parquet")
    return [
        r for f in sorted((out / "export" / "verl" / "data").glob("*.parquet")) for r in pq.read_table(f).to_pylist()
    ]


@pytest.fixture
def states(run: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HWTP_STATES", str(run["out"]))
    return Path(run["out"])


@pytest.mark.sim
def test_trl_reward_as_grpo_trainer_calls_it(run: dict[str, Any], states: Path) -> None:
    cases = _cases(run, "trl")
    assert {r for _, _, r in cases} == {0.0, 1.0, 2.0}
    rows = [row for row, _, _ in cases] + [_no_truth(cases[0][0])]
    completions = [[{"role": "assistant", "content": text}] for _, text, _ in cases] + [
        [{"role": "assistant", "content": "x"}]
    ]
    logged: dict[str, list[Any]] = {}
    metrics: dict[str, float] = {}
    # GRPOTrainer._calculate_rewards: every column but prompt/completion as keyword lists, plus its extras
    rewards = R.trl_reward(
        prompts=[row["prompt"] for row in rows],
        completions=completions,
        completion_ids=[[1, 2, 3] for _ in rows],
        **{key: [row[key] for row in rows] for key in rows[0] if key != "prompt"},
        trainer_state=None,
        log_extra=lambda column, values: logged.setdefault(column, []).extend(values),
        log_metric=metrics.__setitem__,
    )
    assert rewards == [r for _, _, r in cases] + [None]
    assert len(logged["hwtp_outcome"]) == len(rows) and logged["hwtp_outcome"][-1] == "no_ground_truth"
    assert 0 < metrics["hwtp/invalid_rate"] < 1
    # plain-text completions, and the async variant as TRL awaits it
    plain = [text + "<|im_end|>" for _, text, _ in cases]
    kwargs = {"ground_truth": [row["ground_truth"] for row, _, _ in cases]}
    prompts = [row["prompt"] for row, _, _ in cases]
    assert R.trl_reward(prompts, plain, None, **kwargs) == [r for _, _, r in cases]
    got = asyncio.run(R.trl_reward_async(prompts=prompts, completions=plain, completion_ids=None, **kwargs))
    assert got == [r for _, _, r in cases]


def _no_truth(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "ground_truth": None}


@pytest.mark.sim
def test_verl_compute_score_and_batch(run: dict[str, Any], states: Path) -> None:
    cases = _cases(run, "verl")
    for row, text, reward in cases[:6]:
        # NaiveRewardManager / the reward loop's naive manager
        got = R.compute_score(
            data_source=row["data_source"],
            solution_str=text,
            ground_truth=row["reward_model"]["ground_truth"],
            extra_info={**row["extra_info"], "num_turns": None, "rollout_reward_scores": {}},
        )
        assert got["score"] == reward and set(got) == set(R.adapters.VERL_KEYS)
        assert got["indeterminate"] is False
    # BatchRewardManager.verify
    scores = R.compute_score_batch(
        data_sources=[row["data_source"] for row, _, _ in cases],
        solution_strs=[text for _, text, _ in cases],
        ground_truths=[json.dumps(row["reward_model"]["ground_truth"]) for row, _, _ in cases],  # JSON text too
        extra_infos=[row["extra_info"] for row, _, _ in cases],
    )
    assert [s["score"] for s in scores] == [r for _, _, r in cases]
    assert {s["outcome"] for s in scores} >= {"invalid", "golden_fail", "detected", "passed"}
    assert all(s["reason"] for s in scores if s["outcome"] == "invalid")


@pytest.mark.sim
def test_openrlhf_reward_func(run: dict[str, Any], states: Path) -> None:
    torch = pytest.importorskip("torch")
    cases = _cases(run, "openrlhf")
    prompts = [chat_template(row["input"]) for row, _, _ in cases]
    queries = [p + text + "<|im_end|>" for p, (_, text, _) in zip(prompts, cases, strict=True)]
    out = R.reward_func(queries, prompts, [row["label"] for row, _, _ in cases])
    assert isinstance(out["rewards"], torch.Tensor)
    assert out["rewards"].tolist() == [r for _, _, r in cases]
    assert out["scores"].tolist() == [r / 2 for _, _, r in cases]
    assert set(out["extra_logs"]) == {"hwtp_invalid", "hwtp_detected", "hwtp_indeterminate"}
    # SingleTurnAgentExecutor: one query per call, in threads
    row, text, reward = cases[0]
    one = R.reward_func([prompts[0] + text + "<|im_end|>"], [prompts[0]], [row["label"]])
    assert torch.tensor([one["rewards"]]).tolist() == [reward]


@pytest.mark.sim
def test_an_echoed_prompt_is_invalid_never_the_example_plan(run: dict[str, Any], states: Path) -> None:
    trl_rows = [r for r in _rows(run["out"] / "export" / "trl") if r["design"] == "counter_en_load"]
    row = next(r for r in trl_rows if r["state"] == "golden")
    user = row["prompt"][-1]["content"]
    assert extract_plan(user).tests[0].name == "counts_when_enabled"  # the prompt holds a plan that fits counter
    echo = [[{"role": "assistant", "content": user + "<|im_end|>"}], user, row["prompt"][0]["content"] + "\n" + user]
    got = R.trl_reward(prompts=[row["prompt"]] * 3, completions=echo, ground_truth=[row["ground_truth"]] * 3)
    assert got == [0.0, 0.0, 0.0]
    # OpenRLHF: the prompt and then the prompt again as the response
    prompt = chat_template(row["prompt"])
    label = json.dumps(row["ground_truth"])
    out = R.reward_func([prompt + prompt + "<|im_end|>", prompt + "<|im_end|>"], [prompt, prompt], [label, label])
    assert list(map(float, out["rewards"])) == [0.0, 0.0]
    # verl hands the response alone: the format example block by itself
    example = "```yaml" + user.split("```yaml", 1)[1].split("```", 1)[0] + "```"
    result = R.compute_score("hwtp/counter_en_load", example, row["ground_truth"])
    assert result["outcome"] == "invalid" and result["score"] == 0.0


@pytest.mark.sim
def test_duplicates_are_simulated_once(run: dict[str, Any], states: Path) -> None:
    row, text, _ = next(c for c in _cases(run, "trl") if c[0]["state"] != "golden" and c[2] == 2.0)
    truth = row["ground_truth"]
    first = R.score_completions([(truth, text)])
    pool = next(p for k, p in warm.pools().items() if k.startswith(f"{truth['design']}:{truth['mutant_set']}@"))
    before = pool.stats()["evaluations"]
    again = R.score_completions([(truth, text)] * 8 + [(truth, text + "<|im_end|>")] * 8)
    assert [r.reward for r in again] == [2.0] * 16 and first[0].reward == 2.0
    assert pool.stats()["evaluations"] - before == 2  # golden + the state, once


@pytest.mark.sim
def test_two_folders_many_designs(run: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    out = run["out"]
    monkeypatch.setenv("HWTP_STATES", os.pathsep.join(str(out / "designs" / d / "mutants") for d in DESIGNS))
    cases = _cases(run, "trl")
    assert {row["design"] for row, _, _ in cases} == set(DESIGNS)
    results = R.score_completions([(row["ground_truth"], text) for row, text, _ in cases])
    assert [r.reward for r in results] == [reward for _, _, reward in cases]
    assert [r.design for r in results] == [row["design"] for row, _, _ in cases]


@pytest.mark.sim
def test_one_completion_in_many_designs_gets_each_designs_reward(run: dict[str, Any], states: Path) -> None:
    # a batch's sets are read one after another without waiting for each one's simulations, and
    # their results meet in one table: the same text (the same plan id) on golden of two designs
    # must still get each design's own reward, in the batch's order
    cases = _cases(run, "trl")
    row, text, reward = next(c for c in cases if c[0]["design"] == DESIGNS[0] and c[0]["state"] == "golden")
    other = next(r for r, _, _ in cases if r["design"] == DESIGNS[1] and r["state"] == "golden")["ground_truth"]
    alone = [R.score_completions([(truth, text)])[0] for truth in (row["ground_truth"], other)]
    assert alone[0].reward == reward and alone[0].outcome != alone[1].outcome  # a port the other design lacks
    mixed = [row["ground_truth"], other] * 5
    together = R.score_completions([(truth, text) for truth in mixed])
    assert [(r.design, r.reward, r.outcome) for r in together] == [
        (r.design, r.reward, r.outcome) for r in alone * 5
    ]


@pytest.mark.sim
def test_missing_or_changed_mutant_set(run: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    row, text, _ = _cases(run, "trl")[0]
    truth = row["ground_truth"]
    # the folders hold no set of that design
    only_other = run["out"] / "designs" / ("adder_carry" if truth["design"] != "adder_carry" else "counter_en_load")
    R.configure(states=[only_other])
    with pytest.raises(
        RewardError, match=f"mutant set {truth['mutant_set'][:12]} of design '{truth['design']}' not found"
    ):
        R.trl_reward(prompts=[row["prompt"]], completions=[text], ground_truth=[truth])
    # a copy of the set, changed after the export (another seed): the hash differs
    copy = tmp_path / "changed"
    shutil.copytree(run["out"] / "designs" / truth["design"] / "mutants", copy)
    data = json.loads((copy / "mutants.json").read_text())
    data["seed"] += 1
    (copy / "mutants.json").write_text(json.dumps(data))
    R.configure(states=[copy])
    with pytest.raises(RewardError, match=r"changed since the export") as info:
        R.compute_score("hwtp/x", text, truth)
    assert str(copy) in str(info.value) and truth["design"] in str(info.value)
    # a state the set does not have
    R.configure(states=[run["out"]])
    with pytest.raises(RewardError, match="not a state"):
        R.score_completions([({**truth, "state": "m9999"}, text)])
    # the default is $HWTP_STATES again after reset()
    R.reset()
    monkeypatch.setenv("HWTP_STATES", str(run["out"]))
    assert R.score_completions([(truth, text)])[0].reward is not None


@pytest.mark.sim
def test_an_unreadable_completion_costs_only_its_own_reward(run: dict[str, Any], states: Path) -> None:
    """A completion holding a lone surrogate (JSON "\\ud800": not Unicode, libyaml cannot read it) or
    that is not text at all is invalid (reward 0, the reason named) in a batch whose other rewards are
    those of ``hwtp score``: in the core and in every adapter."""
    cases = _cases(run, "trl")[:6]
    truth = cases[0][0]["ground_truth"]
    surrogate = "```yaml\ntests:\n  - name: t\ud800\n    steps:\n      - wait: 1\n```\n"
    results = R.score_completions(
        [*((row["ground_truth"], text) for row, text, _ in cases), (truth, surrogate), (truth, 7)]
    )  # type: ignore[list-item]
    assert [r.reward for r in results] == [reward for _, _, reward in cases] + [0.0, 0.0]
    assert [r.outcome for r in results[-2:]] == ["invalid", "invalid"]
    assert "lone surrogate U+D800" in results[-2].detail["reason"]
    assert "expected text, got int" in results[-1].detail["reason"]
    json.dumps([r.as_dict() for r in results]).encode("utf-8")  # every reason can be written

    texts = [text for _, text, _ in cases] + [surrogate]
    expected = [reward for _, _, reward in cases] + [0.0]
    rows = [row for row, _, _ in cases] + [cases[0][0]]
    got = R.trl_reward(
        prompts=[row["prompt"] for row in rows],
        completions=[[{"role": "assistant", "content": t}] for t in texts],
        ground_truth=[row["ground_truth"] for row in rows],
    )
    assert got == expected
    verl = R.compute_score_batch(["hwtp"] * len(texts), texts, [row["ground_truth"] for row in rows])
    assert [s["score"] for s in verl] == expected and verl[-1]["outcome"] == "invalid"
    assert R.compute_score("hwtp", surrogate, truth)["score"] == 0.0
    out = R.reward_func(texts, [""] * len(texts), [json.dumps(row["ground_truth"]) for row in rows])
    assert list(map(float, out["rewards"])) == expected
