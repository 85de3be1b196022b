"""hwtp advantage / export on synthetic scores: formats, shards, manifest, no leaks."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pytest

from hwtp.training.export import ExportOptions, scrub, shard, write_export


def _scores(tmp_path: Path, designs: int = 2, states: int = 4, plans: int = 3) -> tuple[Path, Path]:
    rng = random.Random(0)
    docs, index = [], []
    for d in range(designs):
        results = []
        for s in range(states):
            state = "golden" if s == 0 else f"m{s:04d}"
            for p in range(plans):
                plan_id = f"d{d}-{state}-s{p:02d}"
                outcome, reward = rng.choice([("passed", 1.0), ("detected", 2.0), ("golden_fail", 0.0)])
                if state == "golden" and outcome == "detected":
                    outcome, reward = "passed", 1.0
                reason = "/home/alice/secret/plan.yaml:3: bad" if outcome == "golden_fail" else None
                results.append({"plan": plan_id, "state": state, "outcome": outcome, "reward": reward,
                                "detail": {"reason": reason} if reason else None})
                index.append({"design": f"design{d}", "mutant_set": f"hash{d}", "plan": plan_id, "state": state,
                              "sample": p, "policy": "random", "model": "m",
                              "prompt": [{"role": "system", "content": "sys"},
                                         {"role": "user", "content": f"spec {d} {state}"}],
                              "completion": f"tests: []  # {plan_id}", "error": None})
        docs.append({"design": f"design{d}", "mutant_set": f"hash{d}",
                     "rewards": {"invalid": 0, "golden_pass": 1, "detect": 2}, "results": results})
    scores = tmp_path / "scores.json"
    scores.write_text(json.dumps(docs))
    plans = tmp_path / "plans"
    plans.mkdir()
    (plans / "plans.jsonl").write_text("".join(json.dumps(r) + "\n" for r in index))
    return scores, plans


def _read(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    manifest = json.loads((folder / "manifest.json").read_text())
    rows = []
    for entry in manifest["shards"]:
        assert entry["file"].startswith("data/")  # the manifest sits beside the shards, never among them
        data = (folder / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
        if entry["file"].endswith(".parquet"):
            import pyarrow.parquet as pq

            part = pq.read_table(folder / entry["file"]).to_pylist()
        else:
            part = [json.loads(line) for line in data.decode().splitlines()]
        assert len(part) == entry["records"]
        rows.extend(part)
    return manifest, rows


def test_jsonl_round_trip_keeps_groups_whole(run_cli: Any, tmp_path: Path) -> None:
    scores, plans = _scores(tmp_path)
    code, out, err = run_cli("export", scores, "--plans", plans, "-o", tmp_path / "x", "--batch-size", "5",
                             "--group-by", "state")
    assert code == 0, err
    assert "zero-advantage groups: state" in out
    manifest, rows = _read(tmp_path / "x")
    assert manifest["records"] == len(rows) == 24 and len(manifest["shards"]) > 1
    shard_of: dict[str, set[int]] = {}
    for i, entry in enumerate(manifest["shards"]):
        data = (tmp_path / "x" / entry["file"]).read_text().splitlines()
        for line in data:
            shard_of.setdefault(json.loads(line)["group"], set()).add(i)
    assert all(len(s) == 1 for s in shard_of.values())
    first = rows[0]
    assert set(first) >= {"prompt", "completion", "reward", "advantage", "group", "design", "state", "plan", "outcome"}
    assert first["prompt"][0] == {"role": "system", "content": "sys"}
    text = (tmp_path / "x" / manifest["shards"][0]["file"]).read_text() + json.dumps(rows)
    assert "/home/alice" not in text and "plan.yaml:3" in text


def test_advantage_command_prints_both_groupings(run_cli: Any, tmp_path: Path) -> None:
    scores, _ = _scores(tmp_path)
    code, out, err = run_cli("advantage", scores, "--preset", "trl", "--group-by", "state", "-o", tmp_path / "a.jsonl")
    assert code == 0, err
    assert "state" in out and "design" in out
    records = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert len(records) == 24 and all("advantage" in r for r in records)
    groups: dict[str, float] = {}
    for r in records:
        groups[r["group"]] = groups.get(r["group"], 0.0) + r["advantage"]
    assert all(abs(v) < 1e-9 for v in groups.values())  # mean baseline: zero-sum per group


@pytest.mark.parametrize("fmt", ["trl", "verl", "openrlhf", "nemo-rl"])
def test_trainer_prompt_datasets(run_cli: Any, tmp_path: Path, fmt: str) -> None:
    if fmt == "verl":
        pytest.importorskip("pyarrow")
    scores, plans = _scores(tmp_path)
    code, _, err = run_cli("export", scores, "--plans", plans, "--format", fmt, "-o", tmp_path / fmt)
    assert code == 0, err
    manifest, rows = _read(tmp_path / fmt)
    assert len(rows) == 8  # one per (design, state) prompt
    assert manifest["prompt_length"]["prompts"] == 8
    for row in rows:
        if fmt == "trl":
            assert row["prompt"][1]["role"] == "user" and row["ground_truth"]["mutant_set"].startswith("hash")
        elif fmt == "verl":
            assert set(row["reward_model"]["ground_truth"]) == {"design", "state", "mutant_set"}
            assert row["data_source"].startswith("hwtp/") and row["extra_info"]["state"] == row["reward_model"][
                "ground_truth"]["state"]
        elif fmt == "openrlhf":
            assert set(row) == {"input", "label", "datasource"} and json.loads(row["label"])["state"]
        else:
            assert set(row) == {"input", "output"} and json.loads(row["output"])["design"].startswith("design")
            assert row["input"].startswith("spec ")
        assert "tests:" not in json.dumps(row)  # the ground truth is not the answer
    if fmt == "verl":
        assert sorted(r["extra_info"]["index"] for r in rows) == list(range(8))
    if fmt == "nemo-rl":
        assert (tmp_path / fmt / "system_prompt.txt").read_text() == "sys"


def test_sft_pairs_are_the_plans_worth_imitating(run_cli: Any, tmp_path: Path) -> None:
    scores, plans = _scores(tmp_path)
    code, _, err = run_cli("export", scores, "--plans", plans, "--format", "trl-sft", "-o", tmp_path / "sft")
    assert code == 0, err
    _, rows = _read(tmp_path / "sft")
    docs = json.loads(scores.read_text())
    best = {(d["design"], r["plan"]) for d in docs for r in d["results"]
            if r["outcome"] == ("passed" if r["state"] == "golden" else "detected")}
    assert rows and len(rows) == len(best)
    for row in rows:
        assert set(row) == {"prompt", "completion"} and row["prompt"][0]["role"] == "system"
        assert [m["role"] for m in row["completion"]] == ["assistant"]
        plan_id = row["completion"][0]["content"].split("# ")[1]
        assert any(p == plan_id for _, p in best)


def test_prompt_length_statistics() -> None:
    from hwtp.training.export import estimate_tokens, prompt_lengths

    records = [{"design": "d", "state": f"s{i}", "prompt": [{"role": "user", "content": "x" * (30 * (i + 1))}]}
               for i in range(20)]
    stats = prompt_lengths(records + records)  # repeated prompts count once
    assert stats is not None and stats["prompts"] == 20
    assert stats["chars"] == {"max": 600, "p50": 300, "p95": 570}
    assert stats["tokens_estimate"]["max"] == estimate_tokens(records[-1]["prompt"]) == 200 + 8
    assert stats["max_prompt_length"] == 256
    assert prompt_lengths([{"design": "d", "state": "s", "prompt": None}]) is None


def test_trainer_format_needs_prompts(run_cli: Any, tmp_path: Path) -> None:
    scores, _ = _scores(tmp_path)
    code, _, err = run_cli("export", scores, "--format", "trl", "-o", tmp_path / "t")
    assert code == 2 and "hwtp plan" in err


def test_parquet_round_trip(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [{"prompt": [{"role": "user", "content": "x"}], "reward": 1.0, "advantage": 0.5, "group": "g",
             "design": "d", "state": "golden", "plan": "p", "outcome": "passed"}]
    write_export(rows, ExportOptions("parquet"), tmp_path / "pq")
    table = pq.read_table(tmp_path / "pq" / "data" / "train-00000-of-00001.parquet").to_pylist()
    assert table[0]["reward"] == 1.0 and json.loads(table[0]["prompt"])[0]["content"] == "x"


def test_shard_never_cuts_a_group() -> None:
    rows = [{"group": g, "i": i} for g in "abcde" for i in range(3)]
    parts = shard(rows, 4)
    assert [len(p) for p in parts] == [3, 3, 3, 3, 3]
    assert shard(rows, 100) == [rows]


def test_scrub_removes_absolute_paths_only() -> None:
    assert scrub("/tmp/x/y/plan.yaml:3: bad at 1/2") == "plan.yaml:3: bad at 1/2"
    assert scrub({"a": ["/root/.cache/hwtp/builds/x.log"]}) == {"a": ["x.log"]}


def test_bad_options(run_cli: Any, tmp_path: Path) -> None:
    scores, _ = _scores(tmp_path)
    code, _, err = run_cli("export", scores, "-o", tmp_path / "x", "--batch-size", "0")
    assert code == 2 and "batch-size" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"design": "d", "results": [{"plan": "p"}]}')
    code, _, err = run_cli("advantage", bad)
    assert code == 2 and "results[0]" in err
