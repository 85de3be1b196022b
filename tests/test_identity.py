"""Multi-design training data: every exported record's prompt, completion, reward and
advantage belong to one sample (design, mutant set, state, plan), through ``hwtp run`` and
through the stage commands with several plan folders; mismatched inputs are refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hwtp.mutators import mutantset
from hwtp.plans.files import PlanInput
from hwtp.plans.format import extract_plan
from hwtp.policy.planning import state_requests
from hwtp.policy.prompt import Templates
from hwtp.scoring.score import ScoreConfig, score

pytestmark = pytest.mark.sim

SEQUENTIAL, COMBINATIONAL = "counter_en_load", "adder_carry"
DESIGNS = (COMBINATIONAL, SEQUENTIAL)
SMALL = ("--states", "4", "-G", "4", "--witness-cycles", "200", "-j", "1", "--seed", "3")


def _records(folder: Path) -> list[dict[str, Any]]:
    files = sorted(p for p in folder.rglob("*.jsonl") if p.is_file())
    assert files, f"no shards under {folder}"
    return [json.loads(line) for f in files for line in f.read_text(encoding="utf-8").splitlines() if line]


def _check_belong_together(records: list[dict[str, Any]], mutdirs: dict[str, Path]) -> None:
    """Each record's prompt is its own state's prompt, and re-scoring its completion on its
    own state gives its recorded outcome and reward."""
    templates = Templates.load()
    assert {r["design"] for r in records} == set(mutdirs)
    for design, mutdir in mutdirs.items():
        mutant_set = mutantset.load(mutdir)
        mine = [r for r in records if r["design"] == design]
        assert {r["mutant_set"] for r in mine} == {mutantset.set_hash(mutant_set)}
        states = sorted({r["state"] for r in mine})
        prompts = {q.state: q.messages for q in state_requests(mutant_set, states, templates)}
        for r in mine:
            assert r["prompt"] == prompts[r["state"]], f"{design} {r['plan']}: another state's prompt"
            assert r["plan"].startswith(f"{r['state']}-s")
        plans = [PlanInput(r["plan"], extract_plan(r["completion"]), state=r["state"]) for r in mine]
        rescored = {(s.plan, s.state): s for s in score(mutant_set, plans, ScoreConfig(jobs=1)).results}
        for r in mine:
            again = rescored[(r["plan"], r["state"])]
            assert (again.outcome.value, again.reward) == (r["outcome"], r["reward"]), (design, r["plan"])


def test_two_design_run_exports_records_that_belong_together(tmp_path: Path, run_cli: Any) -> None:
    rundir = tmp_path / "run"
    code, _, err = run_cli("run", *DESIGNS, "-o", rundir, *SMALL)
    assert code == 0, err
    records = _records(rundir / "export" / "jsonl")
    assert len(records) == 2 * 5 * 4
    _check_belong_together(records, {d: rundir / "designs" / d / "mutants" for d in DESIGNS})


def test_two_folder_export_and_mismatched_inputs(tmp_path: Path, run_cli: Any) -> None:
    mutdirs, plandirs, scores = {}, {}, {}
    for design in DESIGNS:
        mutdirs[design], plandirs[design] = tmp_path / design / "mut", tmp_path / design / "plans"
        scores[design] = tmp_path / design / "scores.json"
        for args in (
            ("mutate", design, "-o", mutdirs[design], "-n", "4", "--witness-cycles", "200", "--seed", "3"),
            ("plan", mutdirs[design], "-G", "3", "-o", plandirs[design], "--seed", "3"),
            ("score", mutdirs[design], "--plans", plandirs[design], "--json", scores[design], "-j", "1"),
        ):
            code, _, err = run_cli(*args)
            assert code == 0, err
    out = tmp_path / "export"
    code, _, err = run_cli(
        "export", *scores.values(), "--plans", plandirs[COMBINATIONAL], "--plans", plandirs[SEQUENTIAL],
        "--format", "jsonl", "-o", out,
    )
    assert code == 0, err
    _check_belong_together(_records(out), mutdirs)

    # one design's scores with the other design's plans: refused, naming both
    code, _, err = run_cli(
        "export", scores[COMBINATIONAL], "--plans", plandirs[SEQUENTIAL], "--format", "jsonl", "-o", tmp_path / "x"
    )
    assert code == 2 and COMBINATIONAL in err and "plan" in err
    # scoring one design's plans on the other design's mutant set: refused, naming both
    code, _, err = run_cli("score", mutdirs[COMBINATIONAL], "--plans", plandirs[SEQUENTIAL], "-j", "1")
    assert code == 2 and COMBINATIONAL in err and SEQUENTIAL in err
