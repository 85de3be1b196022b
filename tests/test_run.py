"""hwtp run: end-to-end equality with the stage commands, resume after kill -9, the lock,
and foreign databases."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from tables import table

from hwtp.run.config import RunConfig
from hwtp.run.loop import summary
from hwtp.run.store import DB_NAME, DesignRow, StateRow, open_store
from hwtp.scoring.score import Outcome, RewardLevels, SampleResult, Scores

DESIGNS = ("adder_carry", "counter_en_load", "gray_converter")
ARGS = ("--states", "3", "-G", "4", "--witness-cycles", "200", "-j", "1", "--seed", "1")


HWTP = shutil.which("hwtp") or str(Path(sys.executable).with_name("hwtp"))


def hwtp(*args: Any, **kwargs: Any) -> subprocess.Popen[str]:
    """The installed console script, as users run it, from a folder that is not the
    repository (``python -m`` would import the source tree instead of the installed package)."""
    kwargs.setdefault("cwd", tempfile.gettempdir())
    return subprocess.Popen(
        [HWTP, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def run_to_end(rundir: Path, *extra: str) -> tuple[int, str, str]:
    proc = hwtp("run", *DESIGNS, "-o", rundir, *ARGS, *extra)
    out, err = proc.communicate(timeout=1500)
    return proc.returncode, out, err


def store_content(rundir: Path) -> dict[str, Any]:
    """Everything the run produced, without timings."""
    evaluations = []
    for design, key, result in table(rundir, "SELECT design, key, result FROM evaluations ORDER BY design, key"):
        data = json.loads(result)
        data.pop("seconds", None)
        evaluations.append((design, key, data))
    return {
        "plans": table(rundir, "SELECT design, state, sample, plan, record FROM plans ORDER BY 1, 2, 3"),
        "evaluations": evaluations,
        "samples": table(rundir, "SELECT * FROM samples ORDER BY 1, 2, 3"),
        "advantages": table(rundir, "SELECT * FROM advantages ORDER BY 1, 2, 3"),
        "states": table(rundir, "SELECT * FROM states ORDER BY 1, 2"),
        "exports": sorted(
            (p.relative_to(rundir).as_posix(), p.read_bytes()) for p in (rundir / "export").rglob("*") if p.is_file()
        ),
    }


def counters(rundir: Path) -> dict[str, int]:
    return dict(table(rundir, "SELECT name, value FROM counters"))


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rundir = tmp_path_factory.mktemp("runs") / "reference"
    code, out, err = run_to_end(rundir)
    assert code == 0, err
    assert "golden pass" in out
    return rundir


pytestmark = pytest.mark.sim


def test_exports_match_the_stage_by_stage_commands(reference_run: Path, tmp_path: Path, run_cli: Any) -> None:
    exported = [
        json.loads(line)
        for f in sorted((reference_run / "export" / "jsonl" / "data").glob("*.jsonl"))
        for line in f.read_text().splitlines()
    ]
    assert {r["design"] for r in exported} == set(DESIGNS)
    score_files = []
    for name in DESIGNS:
        mutdir = reference_run / "designs" / name / "mutants"
        plans_dir = tmp_path / name / "plans"
        # the plans the run stored, written as hwtp plan would, then scored by hwtp score
        records = [json.loads(r[0]) for r in table(reference_run, f"SELECT record FROM plans WHERE design = '{name}'")]
        plans_dir.mkdir(parents=True)
        (plans_dir / "plans.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        out = tmp_path / f"{name}.json"
        code, _, err = run_cli("score", mutdir, "--plans", plans_dir, "--json", out, "-j", "1")
        assert code == 0, err
        score_files.append(out)
    code, _, err = run_cli(
        "advantage", *score_files, "--preset", "grpo-smu", "--group-by", "design", "-o", tmp_path / "adv.jsonl"
    )
    assert code == 0, err
    staged = {
        (r["design"], r["plan"], r["state"]): r
        for r in (json.loads(x) for x in (tmp_path / "adv.jsonl").read_text().splitlines())
    }
    assert len(staged) == len(exported)
    for r in exported:
        s = staged[(r["design"], r["plan"], r["state"])]
        assert (r["outcome"], r["reward"]) == (s["outcome"], s["reward"])
        assert r["advantage"] == pytest.approx(s["advantage"], abs=1e-12)


def _kill_when(rundir: Path, ready: str, stage: str) -> tuple[int, int]:
    """Start a run, SIGKILL it once ``ready`` rows exist but ``stage`` is not finished."""
    proc = hwtp("run", *DESIGNS, "-o", rundir, *ARGS)
    deadline = time.monotonic() + 900
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"run ended before it could be killed: {proc.communicate()[1][-2000:]}")
            if (rundir / DB_NAME).exists():
                try:
                    rows = table(rundir, f"SELECT count(*) FROM {ready}")[0][0]
                    done = table(rundir, f"SELECT count(*) FROM stages WHERE stage = '{stage}'")[0][0]
                except sqlite3.OperationalError:
                    rows, done = 0, 0
                if rows > 0 and done < len(DESIGNS):
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
                    return rows, done
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    pytest.fail("never saw the stage in progress")


@pytest.mark.parametrize(("ready", "stage"), [("plans", "plan"), ("evaluations", "score")])
def test_kill_9_and_resume_gives_the_same_run(reference_run: Path, tmp_path: Path, ready: str, stage: str) -> None:
    rundir = tmp_path / "killed"
    _kill_when(rundir, ready, stage)
    time.sleep(0.5)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert not [p for p in ps.splitlines() if str(rundir) in p and "hwtp_top" in p]  # no orphaned simulator
    code, _, err = run_to_end(rundir)
    assert code == 0, err
    assert store_content(rundir) == store_content(reference_run)
    got, want = counters(rundir), counters(reference_run)
    # nothing done twice: every sample and simulation is counted once across both processes
    assert got["policy_samples"] == want["policy_samples"]
    assert got.get("simulations", 0) + got.get("simulations_ingested", 0) == want["simulations"]


def test_second_run_on_the_same_folder_is_refused(tmp_path: Path, reference_run: Path) -> None:
    rundir = tmp_path / "busy"
    shutil.copytree(reference_run, rundir)
    with (rundir / "run.lock").open("a+") as held:
        import fcntl

        fcntl.flock(held, fcntl.LOCK_EX)
        code, _, err = run_to_end(rundir)
    assert code == 2 and "in use by another hwtp run" in err and "Traceback" not in err
    code, _, err = run_to_end(rundir)  # the first owner is unharmed: the run is still complete
    assert code == 0, err
    assert store_content(rundir) == store_content(reference_run)


def test_two_processes_at_once(tmp_path: Path) -> None:
    rundir = tmp_path / "race"
    first = hwtp("run", "gray_converter", "-o", rundir, *ARGS)
    deadline = time.monotonic() + 120
    while not (rundir / DB_NAME).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    second = hwtp("run", "gray_converter", "-o", rundir, *ARGS)
    _, err2 = second.communicate(timeout=300)
    _, err1 = first.communicate(timeout=1500)
    assert second.returncode == 2 and "in use" in err2
    assert first.returncode == 0, err1


@pytest.mark.parametrize("content", [b"this is not a database at all" * 100, None])
def test_corrupted_or_foreign_database_is_refused_untouched(tmp_path: Path, content: bytes | None) -> None:
    rundir = tmp_path / "bad"
    rundir.mkdir()
    db = rundir / DB_NAME
    if content is None:
        conn = sqlite3.connect(db)
        conn.execute("CREATE TABLE customers (id INTEGER)")
        conn.commit()
        conn.close()
    else:
        db.write_bytes(content)
    before = db.read_bytes()
    code, _, err = run_to_end(rundir)
    assert code == 2 and "left untouched" in err and "Traceback" not in err
    assert db.read_bytes() == before


def test_changed_configuration_is_refused_then_forced(reference_run: Path, tmp_path: Path) -> None:
    rundir = tmp_path / "changed"
    shutil.copytree(reference_run, rundir)
    code, _, err = run_to_end(rundir, "--preset", "trl")
    assert code == 2 and "preset: 'grpo-smu' -> 'trl'" in err and "--force-new-stage advantage" in err
    code, _, err = run_to_end(rundir, "--preset", "trl", "--force-new-stage", "advantage")
    assert code == 0, err
    assert counters(rundir)["simulations"] == counters(reference_run)["simulations"]  # nothing re-simulated


def test_status_and_dry_run(reference_run: Path, run_cli: Any) -> None:
    code, out, _ = run_cli("status", reference_run)
    assert code == 0 and all(d in out for d in DESIGNS) and "16/16" in out
    code, out, _ = run_cli("run", "adder_carry", "-o", reference_run.parent / "dry", "--dry-run", "-G", "2")
    assert code == 0
    plan = json.loads(out)
    assert plan["work"]["plans"] == 9 * 2 and plan["config"]["samples"] == 2
    assert not (reference_run.parent / "dry").exists()


def test_config_file_and_command_line(tmp_path: Path, run_cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("hwtp.yaml").write_text("run:\n  G: 3\n  states: 2\n  preset: trl\n")
    code, out, _ = run_cli("run", "adder_carry", "-o", "r", "--dry-run", "--preset", "rloo")
    assert code == 0, out
    config = json.loads(out)["config"]
    assert (config["samples"], config["states"], config["preset"]) == (3, 2, "rloo")
    Path("hwtp.yaml").write_text("run:\n  G: three\n")
    code, _, err = run_cli("run", "adder_carry", "-o", "r", "--dry-run")
    assert code == 2 and "hwtp.yaml:2: run.G: expected int" in err


def test_openai_policy_rerun_makes_no_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("hwtp_tests_llm_server_r", Path(__file__).with_name("llm_server.py"))
    assert spec and spec.loader
    server = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(server)
    completion = (
        "```yaml\ntests:\n  - name: t\n    steps:\n      - drive: {bin_in: 5, gray_in: 0}\n"
        "      - expect: {gray_out: 7}\n```\n"
    )
    rundir = tmp_path / "llm"
    env = dict(os.environ, HWTP_CACHE_DIR=str(tmp_path / "cache"))
    with server.running_server({"texts": [completion]}) as url:
        args = (
            "run",
            "gray_converter",
            "-o",
            rundir,
            "--states",
            "2",
            "-G",
            "2",
            "--witness-cycles",
            "100",
            "-j",
            "1",
            "--endpoint",
            url,
            "--model",
            "tiny",
            "--format",
            "jsonl",
        )
        first = hwtp(*args, env=env)
        _, err = first.communicate(timeout=900)
        assert first.returncode == 0, err
        requests = server.stats(url)["requests"]
        assert requests >= 1
        exported = store_content(rundir)["exports"]
        again = hwtp(*args, env=env)
        _, err = again.communicate(timeout=900)
        assert again.returncode == 0, err
        assert server.stats(url)["requests"] == requests
    assert store_content(rundir)["exports"] == exported
    records = [json.loads(r[0]) for r in table(rundir, "SELECT record FROM plans")]
    assert len(records) == 3 * 2 and all(r["model"] for r in records)


def test_relative_run_folder_and_cache_as_a_new_user_types_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Any
) -> None:
    """The README's command uses a relative run folder; the simulator runs in its own folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HWTP_CACHE_DIR", "relative-cache")
    code, out, err = run_cli(
        "run", "gray_converter", "-o", "runs/demo", "--states", "2", "-G", "2", "--witness-cycles", "100", "-j", "1"
    )
    assert code == 0, err
    outcomes = {r[0] for r in table(tmp_path / "runs" / "demo", "SELECT outcome FROM samples")}
    assert outcomes <= {"passed", "detected"} and outcomes, outcomes
    assert "gray_converter" in out and " 100%" in out
    code, out, err = run_cli("sim", "gray_converter")
    assert code == 0, err


def test_summary_golden_pass_rate_is_the_scorers(tmp_path: Path) -> None:
    """A plan that passed on golden and then timed out on its mutant passed golden: the run's
    summary and ``hwtp score`` count it alike (one definition, in hwtp.scoring.score)."""
    samples = [
        SampleResult("golden-s00", "golden", Outcome.PASSED, 1.0, None, 1.0),
        SampleResult("m0001-s00", "m0001", Outcome.TIMEOUT, 1.0, {"golden": "pass", "reason": "exceeded 3 s"}, 2.0),
        SampleResult("m0002-s00", "m0002", Outcome.GOLDEN_FAIL, 0.0, {"step": 2}, 2.0),
    ]
    scores = Scores("d", RewardLevels(), tuple(samples), ("golden", "m0001", "m0002"),
                    tuple(s.plan for s in samples), 5, 0.1, 0.0, True)
    with open_store(tmp_path / "run") as store:
        store.put_design(DesignRow("d", "d.sv", "h", "designs/d/mutants", "s" * 64), [StateRow("golden", 0)])
        store.put_samples("d", samples)
        numbers = summary(store, ["d"], RunConfig())
    assert scores.golden_pass_rate == pytest.approx(2 / 3)
    assert numbers["designs"]["d"]["golden_pass_rate"] == scores.golden_pass_rate
    assert numbers["overall"]["golden_pass_rate"] == scores.golden_pass_rate
    assert numbers["designs"]["d"]["detection_rate"] == scores.detection_rate == 0.0


def test_one_schemata_build_per_design(tmp_path: Path) -> None:
    """Killable-first selection builds the over-sampled candidates' schemata once; the chosen
    mutants keep their selector values in it (the rest stay as spares), so witness search,
    the random policy and scoring all use that one build: one new cache entry per design."""
    cache = tmp_path / "cache"
    rundir = tmp_path / "run"
    proc = hwtp("run", "adder_carry", "-o", rundir, *ARGS, env={**os.environ, "HWTP_CACHE_DIR": str(cache)})
    _, err = proc.communicate(timeout=1500)
    assert proc.returncode == 0, err
    assert len([p for p in (cache / "builds").iterdir() if p.is_dir()]) == 1  # beside it: its lock file
    data = json.loads((rundir / "designs" / "adder_carry" / "mutants" / "mutants.json").read_text())
    chosen = [m["index"] for m in data["mutants"] if m["status"] == "valid"]
    spares = [m["index"] for m in data["spares"]]
    assert len(chosen) == 3 and spares and all(m["status"] == "spare" for m in data["spares"])
    assert sorted(chosen + spares) == list(range(1, len(chosen) + len(spares) + 1))  # the candidates' numbering
