"""The run store under concurrency: simulator-watch threads write while others read, every
evaluation is stored exactly once; a damaged store is refused; status reads beside a run."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from hwtp.errors import StoreError
from hwtp.plans.files import PlanRecord
from hwtp.run.store import DB_NAME, AdvantageRow, DesignRow, PlanRow, StateRow, open_store
from hwtp.scoring.score import Outcome, SampleResult
from hwtp.sim.runner import EvalResult, EvalStatus

HWTP = shutil.which("hwtp") or str(Path(sys.executable).with_name("hwtp"))


def _plan(state: str, k: int, completion: str) -> PlanRow:
    plan = f"{state}-s{k:02d}"
    record = PlanRecord.from_json({"design": "d", "plan": plan, "state": state, "sample": k, "completion": completion})
    return PlanRow("d", state, k, plan, record)


def test_rows_come_back_typed(tmp_path: Path) -> None:
    with open_store(tmp_path / "run") as store:
        store.put_design(DesignRow("d", "d.sv", "h", "designs/d/mutants", "s" * 64), [StateRow("golden", 0)])
        store.put_plans([_plan("m0001", 0, "tests: []"), _plan("golden", 0, "x")])
        passed = EvalResult("golden-s00@golden", EvalStatus.PASS, seconds=0.5)
        store.put_evaluation("d", passed)
        timeout = SampleResult("golden-s00", "m0001", Outcome.TIMEOUT, 1.0, {"golden": "pass", "reason": "r"}, 2.0)
        store.put_samples("d", [timeout])
        store.put_advantages([AdvantageRow("d", "golden-s00", "m0001", "d/m0001", 0.25)], ["d"])
        assert store.design_row("d") == DesignRow("d", "d.sv", "h", "designs/d/mutants", "s" * 64)
        assert store.design_row("other") is None
        assert store.states("d") == ["golden"]
        plans = store.plans("d")
        assert [p.state for p in plans] == ["golden", "m0001"]  # golden first
        assert plans[1].record.completion == "tests: []" and plans[1].record.design == "d"
        assert store.evaluations("d") == {"golden-s00@golden": passed}
        assert store.samples("d") == [timeout] and store.samples("d")[0].outcome is Outcome.TIMEOUT
        assert store.advantages() == [AdvantageRow("d", "golden-s00", "m0001", "d/m0001", 0.25)]
        assert ("d", "score") in store.finished_stages() and ("d", "plan") not in store.finished_stages()


def test_threads_store_every_evaluation_exactly_once(tmp_path: Path) -> None:
    threads, per_thread = 8, 600
    errors: list[BaseException] = []
    with open_store(tmp_path / "run") as store:
        store.put_plans([_plan("golden", 0, "x")])
        start = threading.Barrier(threads + 2)

        def writer(t: int) -> None:
            try:
                start.wait()
                for i in range(per_thread):
                    # every key is written twice, from two threads: stored once, counted once
                    key = f"p{(t // 2) * per_thread + i}@golden"
                    store.put_evaluation("d", EvalResult(key, EvalStatus.PASS, cycles=t), counter="simulations")
                    if i % 50 == 0:
                        store.bump("ticks")
            except BaseException as exc:
                errors.append(exc)

        def reader() -> None:
            try:
                start.wait()
                for _ in range(200):
                    store.evaluations("d")
                    store.plans("d")
                    store.counters()
            except BaseException as exc:
                errors.append(exc)

        workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
        workers += [threading.Thread(target=reader) for _ in range(2)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert errors == []
        unique = threads // 2 * per_thread
        assert store.evaluation_count("d") == unique
        assert len(store.evaluations("d")) == unique
        counters = store.counters()
        assert counters["simulations"] == unique
        assert counters["ticks"] == threads * (per_thread // 50)


def test_readonly_open_beside_a_writer_and_refuses_writes(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with open_store(root) as writer:
        writer.set_meta("config", {"a": 1})
        with open_store(root, readonly=True) as reader:  # no run lock taken
            assert reader.get_meta("config") == {"a": 1}
            writer.set_meta("config", {"a": 2})
            assert reader.get_meta("config") == {"a": 2}
            with pytest.raises(StoreError, match="read-only"):
                reader.set_meta("config", {"a": 3})


def test_readonly_open_of_a_missing_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no run store"), open_store(tmp_path, readonly=True):
        pass


def test_damaged_store_is_refused_before_writing(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with open_store(root) as store:
        store.put_plans([_plan("golden", k, "x" * 3000) for k in range(64)])
    db = root / DB_NAME
    data = bytearray(db.read_bytes())
    page = 4096
    assert len(data) > 4 * page
    for offset in range(2 * page, 2 * page + 200):  # scribble over a b-tree page header
        data[offset] = 0xA5
    db.write_bytes(bytes(data))
    before = db.read_bytes()
    with pytest.raises(StoreError, match="damaged"), open_store(root):
        pass
    assert db.read_bytes() == before


@pytest.mark.sim
@pytest.mark.slow
def test_back_to_back_multi_worker_runs_never_fail(tmp_path: Path) -> None:
    """The README's main command shape with -j 2 and over a thousand evaluations, repeated:
    zero failures and every evaluation stored exactly once (the full twenty-run soak is
    ``bench/soak_run.py``)."""
    for i in range(2):
        rundir = tmp_path / f"r{i}"
        proc = subprocess.run(
            [HWTP, "run", "fifo_sync", "-o", str(rundir), "--states", "32", "-G", "16", "-j", "2"],
            capture_output=True,
            text=True,
            timeout=900,
            cwd=tempfile.gettempdir(),
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        with open_store(rundir, readonly=True) as store:
            assert store.evaluation_count("fifo_sync") == 1040
            assert store.counters()["simulations"] == 1040
            assert len(store.samples("fifo_sync")) == 33 * 16


@pytest.mark.sim
def test_status_reads_while_a_run_is_going(tmp_path: Path) -> None:
    import time

    rundir = tmp_path / "run"
    run = subprocess.Popen(
        [HWTP, "run", "fifo_sync", "-o", str(rundir), "--states", "16", "-G", "8", "-j", "2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tempfile.gettempdir(),
    )
    try:
        deadline, seen = time.monotonic() + 600, False
        while time.monotonic() < deadline and run.poll() is None:
            if (rundir / DB_NAME).exists():
                status = subprocess.run(
                    [HWTP, "status", str(rundir)], capture_output=True, text=True, timeout=60, check=False
                )
                if status.returncode == 0 and "fifo_sync" in status.stdout:
                    seen = run.poll() is None  # answered while the run still held its lock
                    if seen:
                        break
                else:
                    assert "no run has started" in status.stderr, status.stderr
            time.sleep(0.2)
        assert seen, "hwtp status never answered while the run was going"
    finally:
        _, err = run.communicate(timeout=600)
    assert run.returncode == 0, err
