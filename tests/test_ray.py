"""The Ray executor on a Ray cluster started here (``ray.cluster_utils.Cluster``: a head and a
worker node on 127.0.0.1, one CPU each): same answers as the local executor, an actor killed
and a node removed mid-run without a result lost or counted twice, a killed ``hwtp run
--executor ray`` resumed, rewards with ``executor="ray"``, clear errors."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serving import ServeProcess

import hwtp.rewards as R
from hwtp.errors import HwtpError
from hwtp.mutators.mutantset import MutantSet, set_hash
from hwtp.plans.files import plan_input
from hwtp.policy.planning import plan_states
from hwtp.policy.policies import PolicySpec, make_policy
from hwtp.policy.prompt import Templates
from hwtp.rtl.design import load_design
from hwtp.run import loop
from hwtp.run.config import RunConfig
from hwtp.run.store import DB_NAME, open_store
from hwtp.scoring.score import ScoreConfig, prepare
from hwtp.sim.executors.base import schemata_targets
from hwtp.sim.executors.local import LocalExecutor
from hwtp.sim.job import Limits

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'hwtp[ray]')")
cluster_utils = pytest.importorskip("ray.cluster_utils")

from hwtp.sim.executors.ray import RayExecutor  # noqa: E402 - needs ray, skipped above

pytestmark = [pytest.mark.sim, pytest.mark.ray]

DESIGNS = ("adder_carry", "counter_en_load")
HWTP = str(Path(sys.executable).parent / "hwtp")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Two nodes, one CPU each; this process is the driver.

    Ray puts the driver's working directory on its workers' sys.path: started from the
    repository, the workers would import the source tree's ``hwtp`` (which has no ``sim``:
    pyproject maps it in at install) instead of the installed one. So the cluster and the
    driver start from a folder of their own, as a user's job does.
    """
    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("ray-driver"))
    try:
        made = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        made.add_node(num_cpus=1)
        ray.init(address=made.address, include_dashboard=False, log_to_driver=False)
        made.wait_for_nodes()
    finally:
        os.chdir(here)
    yield made
    R.reset()
    ray.shutdown()
    made.shutdown()


def _plans(mutant_set: MutantSet, samples: int) -> list[Any]:
    states = [s.id for s in [*mutant_set.states][:8]]
    policy = make_policy(PolicySpec("random", seed=1), mutant_set)
    records = plan_states(mutant_set, ["golden", *states], samples, policy, Templates.load(), [])
    return [plan_input(r) for r in records]


def _work(mutant_set: MutantSet, samples: int = 2) -> list[Any]:
    prepared = prepare(mutant_set, _plans(mutant_set, samples), ScoreConfig())
    return list(prepared.evaluations.values())


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Results equal but for the harness's own timing."""
    assert set(a) == set(b)
    for key in a:
        x, y = a[key].as_line(), b[key].as_line()
        x.pop("seconds"), y.pop("seconds")
        assert x == y, key


@pytest.mark.parametrize("name", DESIGNS)
def test_scores_json_equals_local(cluster: Any, name: str, mutated: Any, run_cli: Any, tmp_path: Path) -> None:
    mutant_set = mutated(name)
    plans = tmp_path / "plans"
    plans.mkdir()
    lines = [json.dumps(p.meta) for p in _plans(mutant_set, 2)]
    (plans / "plans.jsonl").write_text("\n".join(lines) + "\n")
    docs = []
    for executor in ("local", "ray"):
        out = tmp_path / f"{executor}.json"
        extra = ["--ray-chunk", "8"] if executor == "ray" else []
        code, _, err = run_cli(
            "score", mutant_set.root, "--plans", plans, "--json", out, "-j", "1", "--executor", executor, *extra
        )
        assert code == 0, err
        doc = json.loads(out.read_text())
        doc["stats"].pop("seconds")
        docs.append(doc)
    assert docs[0] == docs[1]
    assert len(docs[0]["results"]) >= 18 and {r["outcome"] for r in docs[0]["results"]} >= {"passed", "detected"}


def _kill_once(executor: RayExecutor, seen: list[str], action: Any) -> Any:
    fired = threading.Event()

    def on_result(result: Any) -> None:
        seen.append(result.id)
        if not fired.is_set():
            fired.set()
            action()

    return on_result


def test_an_actor_killed_mid_chunk_loses_nothing_and_counts_nothing_twice(cluster: Any, mutated: Any) -> None:
    mutant_set = mutated("adder_carry")
    evaluations = _work(mutant_set)
    schemata = schemata_targets(mutant_set)
    expected = LocalExecutor().run(schemata, evaluations, Limits())
    executor = RayExecutor(chunk=4)
    try:
        victim = executor.actors()[0]
        seen: list[str] = []
        kill = _kill_once(executor, seen, lambda: ray.kill(victim))
        got = executor.run(schemata, evaluations, Limits(), on_result=kill)
        _same(got, expected)
        assert sorted(seen) == sorted(expected) and len(seen) == len(set(seen))
        assert executor.stats["actors_lost"] == 1 and executor.stats["resubmitted"] >= 1
        deadline = time.monotonic() + 30
        while len(executor.ready_actors()) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert victim not in executor.actors() and len(executor.ready_actors()) == 2  # replaced: the CPU came free
    finally:
        executor.close()
    assert not _hwtp_actors()  # close stopped the actors it made, and their names are free


def test_a_node_removed_mid_run_loses_nothing(cluster: Any, mutated: Any) -> None:
    mutant_set = mutated("adder_carry")
    evaluations = _work(mutant_set)
    schemata = schemata_targets(mutant_set)
    expected = LocalExecutor().run(schemata, evaluations, Limits())
    node = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    executor = RayExecutor(chunk=4)
    try:
        assert executor.size == 3
        nodes = {ray.get(a.where.remote())[0] for a in executor.actors()}
        assert node.node_id in nodes  # one actor per node
        seen: list[str] = []
        got = executor.run(
            schemata, evaluations, Limits(), on_result=_kill_once(executor, seen, lambda: cluster.remove_node(node))
        )
        _same(got, expected)
        assert sorted(seen) == sorted(expected) and len(seen) == len(set(seen))
        assert executor.stats["actors_lost"] == 1
        assert _until(lambda: len(executor.actors()) == 3)  # its replacement, once Ray has freed the name...
        assert len(executor.ready_actors()) == 2  # ...waits for room
    finally:
        executor.close()


def test_a_killed_run_resumes(cluster: Any, tmp_path: Path) -> None:
    rundir = tmp_path / "run"
    argv = [
        "run",
        "adder_carry",
        "-o",
        str(rundir),
        "--states",
        "6",
        "-G",
        "8",
        "-j",
        "1",
        "--executor",
        "ray",
        "--ray-chunk",
        "1",
    ]
    proc = subprocess.Popen(
        [HWTP, *argv, "--ray-address", cluster.address],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    stored = 0
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if (rundir / DB_NAME).exists():
                with contextlib.suppress(HwtpError, sqlite3.Error), open_store(rundir, readonly=True) as store:
                    stored = store.evaluation_count("adder_carry")
            if stored:
                break
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert stored > 0, "the run stored no evaluation before it ended"
    with open_store(rundir, readonly=True) as store:
        before = store.evaluation_count("adder_carry")
    executor = RayExecutor(chunk=1)  # one call per evaluation: its calls count what the rerun simulated
    try:  # the same run again, in this process (already on the cluster)
        loop.run(RunConfig(designs=("adder_carry",), states=6, samples=8, jobs=1), rundir, executor=executor)
    finally:
        executor.close()
    with open_store(rundir, readonly=True) as store:
        total = store.evaluation_count("adder_carry")
        counters = store.counters()
        samples = store.samples("adder_carry")
    assert before < total == 8 * 7 * 2 - 8  # the golden state's plans run on golden only
    assert executor.stats["chunks"] == total - before  # only the missing evaluations ran
    assert counters["simulations"] == total  # each stored and counted once over both runs
    assert len(samples) == 8 * 7 and all(s.outcome.value not in ("timeout", "error") for s in samples)


def test_rewards_with_executor_ray_equal_local(cluster: Any, mutated: Any) -> None:
    mutant_set = mutated("counter_en_load")
    digest = set_hash(mutant_set)
    items = [
        ({"design": mutant_set.design.name, "state": p.state, "mutant_set": digest}, (p.meta or {})["completion"])
        for p in _plans(mutant_set, 2)
    ]
    try:
        R.configure(states=[mutant_set.root.parent], executor="local", workers=1)
        local = R.score_completions(items)
        R.configure(executor="ray", ray_chunk=8)
        remote = R.score_completions(items)
    finally:
        R.reset()
    assert [r.as_dict() for r in remote] == [r.as_dict() for r in local]
    assert {r.outcome for r in local} >= {"passed", "detected"}


def _completions(sets: list[MutantSet], samples: int) -> tuple[list[str], list[dict[str, str]]]:
    """Completions of the random policy on every state of ``sets`` (two designs) and their
    ground truths, interleaved so that one request spans both designs."""
    texts: list[str] = []
    truths: list[dict[str, str]] = []
    for mutant_set in sets:
        digest = set_hash(mutant_set)
        for p in _plans(mutant_set, samples):
            texts.append((p.meta or {})["completion"])
            truths.append({"design": mutant_set.design.name, "state": p.state, "mutant_set": digest})
    order = sorted(range(len(texts)), key=lambda i: (i % 7, i))
    return [texts[i] for i in order], [truths[i] for i in order]


def _hwtp_actors(namespace: str | None = None) -> list[str]:
    """Names of the live hwtp simulator actors in ``namespace`` (default: this job's)."""
    if namespace is None:
        return sorted(n for n in ray.util.list_named_actors() if n.startswith("hwtp-sim-"))
    found = ray.util.list_named_actors(all_namespaces=True)
    return sorted(a["name"] for a in found if a["namespace"] == namespace and a["name"].startswith("hwtp-sim-"))


def _until(check: Any, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_two_processes_of_one_job_share_one_actor_pool(cluster: Any, mutated: Any) -> None:
    """Two reward workers of one Ray job (as verl's: each its own process), one configured in
    code and one by environment variables only (verl's ``pkg://hwtp.rewards``), find the same
    named actors and get the local executor's rewards; after one of the actors died both send
    their chunks again and one replacement serves them both; the actors end with the processes
    that made them."""
    sets = [mutated(name) for name in DESIGNS]
    texts, truths = _completions(sets, 2)
    states = [str(sets[0].root.parent)]
    try:
        R.configure(states=states, executor="local", workers=1)
        expected = R.compute_score_batch([None] * len(texts), texts, truths)
    finally:
        R.reset()

    @ray.remote(num_cpus=0)
    class RewardWorker:  # the README's snippet: reward code in a process of the trainer's job
        def __init__(self, states: list[str] | None) -> None:
            if states is not None:
                R.configure(states=states, executor="ray", ray_chunk=4)  # the job's cluster: no address

        def score(self, solution_strs: list[str], ground_truths: list[Any]) -> list[dict[str, Any]]:
            return R.compute_score_batch([None] * len(solution_strs), solution_strs, ground_truths)

        def stats(self) -> dict[str, Any]:
            return {**R.executor_stats(), "pid": os.getpid()}

    by_env = {"HWTP_STATES": os.pathsep.join(states), "HWTP_REWARD_EXECUTOR": "ray"}
    workers = [
        RewardWorker.remote(states),
        RewardWorker.options(runtime_env={"env_vars": by_env}).remote(None),
    ]
    try:
        first = ray.get([w.score.remote(texts, truths) for w in workers], timeout=300)
        assert first == [expected, expected]
        stats = ray.get([w.stats.remote() for w in workers])
        assert stats[0]["pid"] != stats[1]["pid"] and all(s["name"] == "ray" and s["chunks"] > 0 for s in stats)
        names = _hwtp_actors()
        assert len(names) == 2 and stats[0]["actors"] == stats[1]["actors"] == names  # one pool, shared
        pids = {ray.get(ray.get_actor(n).where.remote())[1] for n in names}
        assert len(pids) == 2

        ray.kill(ray.get_actor(names[0]))  # slot 0: the first call of each worker goes there
        assert _until(lambda: names[0] not in _hwtp_actors())
        assert ray.get([w.score.remote(texts, truths) for w in workers], timeout=300) == [expected, expected]
        after = ray.get([w.stats.remote() for w in workers])
        for before, now in zip(stats, after, strict=True):
            assert now["actors_lost"] == 1 and now["resubmitted"] >= 1 and now["duplicates"] == 0
            assert now["chunks"] > before["chunks"]
        assert _hwtp_actors() == names  # one replacement under the same name, not one per worker
        assert pids != {ray.get(ray.get_actor(n).where.remote())[1] for n in names}
    finally:
        for worker in workers:
            ray.kill(worker)
    assert _until(lambda: not _hwtp_actors()), "the actors outlived the processes that made them"


def test_serve_on_ray_answers_as_local_and_survives_a_killed_actor(cluster: Any, mutated: Any, tmp_path: Path) -> None:
    """The same OpenRLHF and NeMo Gym requests, on two designs, to ``hwtp serve`` with the local
    executor and with ``--executor ray --ray-address`` (this cluster): the same answers, also for
    a request during which one of the service's actors is killed."""
    sets = [mutated(name) for name in DESIGNS]
    states = sets[0].root.parent
    bodies = []
    for samples in (2, 4):  # a short request, then a long one (the kill lands in it)
        texts, truths = _completions(sets, samples)
        bodies.append({"query": texts, "labels": [json.dumps(t) for t in truths]})
    verify = [
        {
            "responses_create_params": {"input": [{"role": "user", "content": "Write a test plan."}]},
            "response": {"output": [{"type": "message", "content": [{"type": "output_text", "text": text}]}]},
            "ground_truth": truth,
        }
        for text, truth in zip(*_completions(sets, 1), strict=True)
    ][::3]

    local = ServeProcess(states, tmp_path, "--workers", "1")
    try:
        reference = [local.json("/reward", b) for b in bodies]
        reference_verify = [local.json("/verify", b) for b in verify]
        local_evaluations = local.metrics()["evaluations"]
    finally:
        assert local.stop()[0] == 0
    rewards = reference[1]["rewards"]
    assert len(rewards) == len(bodies[1]["query"]) and len(set(rewards)) >= 2
    assert not any(reference[1]["extra_logs"]["hwtp_indeterminate"])

    server = ServeProcess(states, tmp_path, "--executor", "ray", "--ray-address", cluster.address, "--ray-chunk", "2")
    try:
        assert server.json("/reward", bodies[0]) == reference[0]
        assert [server.json("/verify", b) for b in verify] == reference_verify
        assert {b["ground_truth"]["design"] for b in verify} == set(DESIGNS)
        mine = ray.get_runtime_context().namespace
        found = ray.util.list_named_actors(all_namespaces=True)
        namespace = next(a["namespace"] for a in found if a["name"].startswith("hwtp-sim-") and a["namespace"] != mine)
        names = _hwtp_actors(namespace)
        assert names == server.metrics()["executor"]["actors"] and len(names) == 2

        answer: dict[str, Any] = {}
        request = threading.Thread(target=lambda: answer.update(server.json("/reward", bodies[1])))
        request.start()
        assert _until(lambda: server.metrics()["in_flight"] > 0, 60)
        ray.kill(ray.get_actor(names[0], namespace=namespace))
        request.join(300)
        assert answer == reference[1]  # one reward per query, each the local one
        metrics = server.metrics()
        ray_stats = metrics["executor"]
        assert ray_stats["name"] == "ray" and ray_stats["actors_lost"] >= 1 and ray_stats["resubmitted"] >= 1
        assert ray_stats["duplicates"] == 0
        text = server.client.get("/metrics", params={"format": "prometheus"}).text
        assert f"hwtp_serve_ray_actors_lost_total {ray_stats['actors_lost']}" in text
        assert metrics["evaluations"] == local_evaluations  # the same evaluations behind the same rewards
        assert server.json("/reward", bodies[0]) == reference[0]  # and on with the replacement...
        assert _hwtp_actors(namespace) == names  # ...under the same name
    finally:
        code, _, err = server.stop()
    assert code == 0, err
    assert _until(lambda: not _hwtp_actors(namespace)), "hwtp serve's actors outlived it"


def test_clear_errors(
    cluster: Any, mutated: Any, run_cli: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root = mutated("adder_carry").root
    plans = tmp_path / "p.yaml"
    plans.write_text((load_design("adder_carry").root / "plans" / "reference.yaml").read_text())
    wrong = subprocess.run(
        [HWTP, "score", str(root), "--plans", str(plans), "--executor", "ray", "--ray-address", "127.0.0.1:1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert wrong.returncode == 2 and "--ray-address 127.0.0.1:1: no Ray cluster answers there" in wrong.stderr
    code, _, err = run_cli("score", root, "--plans", plans, "--ray-address", "127.0.0.1:1")
    assert code == 2 and "--ray-address needs --executor ray" in err
    code, _, err = run_cli("serve", root.parent, "--ray-address", "127.0.0.1:1")
    assert code == 2 and "need --executor ray" in err
    monkeypatch.setitem(sys.modules, "ray", None)
    code, _, err = run_cli("score", root, "--plans", plans, "--executor", "ray")
    assert code == 2 and "pip install 'hwtp[ray]'" in err


def test_the_witness_search_on_ray_finds_what_it_finds_locally(cluster: Any, mutated: Any) -> None:
    """The search's total budget and hang dropping travel in its limits: the actors run them in
    batched processes of their own, each chunk sent the budget left when it leaves."""
    from hwtp.mutators.witness import WitnessConfig, find_witnesses
    from hwtp.plans.format import to_data

    mutant_set = mutated("counter_en_load")
    schemata = schemata_targets(mutant_set)
    targets = [(m.id, m.index) for m in mutant_set.valid]
    config = WitnessConfig(jobs=2, seed=3)
    local = find_witnesses(schemata, targets, config)
    executor = RayExecutor(chunk=8)
    try:
        remote = find_witnesses(schemata, targets, config, executor)
        spent = executor.run(schemata, _work(mutant_set), Limits(total_s=0.0))
    finally:
        executor.close()
    assert local.witnesses, "the search found no witness: the comparison would prove nothing"
    assert {m: to_data(p) for m, p in remote.witnesses.items()} == {m: to_data(p) for m, p in local.witnesses.items()}
    assert (remote.hung, remote.unsearched) == (local.hung, local.unsearched)
    assert spent and {(r.status, r.fault) for r in spent.values()} == {("timeout", "budget")}
