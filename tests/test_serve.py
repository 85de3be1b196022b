"""``hwtp serve``: the real service on 127.0.0.1 (a subprocess, as a trainer would reach it) on a
real mutant set, through OpenRLHF's ``/reward`` and NeMo Gym's ``/verify``: rewards equal to
``hwtp score``, bounds and refusals (413, 400/422, 401, 503), metrics, concurrent clients with a
simulator killed mid-batch, and a graceful SIGTERM."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serving import ServeProcess

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

HWTP = shutil.which("hwtp") or str(Path(sys.executable).with_name("hwtp"))
DESIGN = "counter_en_load"
TOKEN_VAR = "HWTP_TEST_SERVE_TOKEN"


# --------------------------------------------------------------------------- helpers


def descendants(pid: int) -> list[int]:
    """Live processes below ``pid`` (children, grandchildren...)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [p for p, pp in parents.items() if pp == parent]
        found += children
        frontier += children
    return found


def simulators(pid: int) -> list[int]:
    """Simulator processes under ``pid``: descendants that are not Python (the reaper is)."""
    found = []
    for child in descendants(pid):
        try:
            exe = os.path.basename(os.readlink(f"/proc/{child}/exe"))
        except OSError:
            continue
        if not exe.startswith("python") and exe not in ("sh", "bash", "make"):
            found.append(child)
    return found


def fenced(plan: str) -> str:
    return f"Here is my plan.\n```yaml\n{plan}```\n"


def drive_plan(name: str, d: int, wait: int = 3) -> str:
    """A plan that loads ``d`` and expects it back: passes golden, may detect mutants."""
    return (
        f"tests:\n  - name: {name}\n    steps:\n"
        f"      - drive: {{en: 1, load: 1, up: 1, d: {d}}}\n      - wait: 1\n"
        f"      - expect: {{q: {d}}}\n      - drive: {{load: 0}}\n      - wait: {wait}\n"
    )


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def states(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A small mutant set of counter_en_load made by ``hwtp mutate``, its hash and witnesses."""
    root = tmp_path_factory.mktemp("serve")
    mutdir = root / "m"
    done = subprocess.run(
        [HWTP, "mutate", DESIGN, "-n", "4", "-o", str(mutdir)], cwd=root, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    from hwtp.mutators.mutantset import load, set_hash

    mutant_set = load(mutdir)
    ids = [m.id for m in mutant_set.valid]
    witnesses = {i: (mutdir / "witnesses" / f"{i}.yaml").read_text() for i in ids}
    return {"root": root, "mutdir": mutdir, "hash": set_hash(mutant_set), "ids": ids, "witnesses": witnesses}


def truth(states: dict[str, Any], state: str, *, as_text: bool = True) -> Any:
    gt = {"design": DESIGN, "state": state, "mutant_set": states["hash"]}
    return json.dumps(gt) if as_text else gt


@pytest.fixture(scope="module")
def server(states: dict[str, Any]) -> Iterator[ServeProcess]:
    srv = ServeProcess(states["mutdir"], states["root"], "--max-body-bytes", "200000", "--max-items", "256")
    yield srv
    code, _, err = srv.stop()
    assert code == 0, err


# --------------------------------------------------------------------------- scoring


@pytest.mark.sim
def test_reward_reproduces_hwtp_score(server: ServeProcess, states: dict[str, Any], tmp_path: Path) -> None:
    """OpenRLHF's body (prompt + response + special tokens) gets ``hwtp score``'s rewards."""
    first = states["ids"][0]
    witness = states["witnesses"][first]
    prompt = "<|im_start|>user\nWrite a test plan.<|im_end|>\n<|im_start|>assistant\n"
    cases = [  # (state, response, plan file for hwtp score or None)
        (first, fenced(witness), witness),
        ("golden", fenced(witness), witness),
        (first, "I cannot write a plan.", None),
        ("golden", fenced(drive_plan("load_5", 5)), drive_plan("load_5", 5)),
    ]
    body = {
        "query": [prompt + response + "<|im_end|><|endoftext|>" for _, response, _ in cases],
        "prompts": [prompt] * len(cases),
        "labels": [truth(states, state) for state, _, _ in cases],
    }
    answer = server.post("/reward", body)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert set(data) == {"rewards", "scores", "extra_logs", "reward_scheme"}
    assert data["reward_scheme"] == "smu"
    assert len(data["rewards"]) == len(data["scores"]) == len(cases)
    for key, values in data["extra_logs"].items():
        assert len(values) == len(cases), key

    expected = []
    for i, (state, _, plan) in enumerate(cases):
        if plan is None:
            expected.append(0.0)  # the invalid level: no plan in the completion
            continue
        path = tmp_path / f"plan{i}.yaml"
        path.write_text(plan)
        out = tmp_path / f"scores{i}.json"
        done = subprocess.run(
            [HWTP, "score", str(states["mutdir"]), "--plans", str(path), "--states", state, "--json", str(out)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert done.returncode in (0, 1), done.stderr
        (result,) = [r for r in json.loads(out.read_text())["results"] if r["state"] == state]
        expected.append(result["reward"])
    assert data["rewards"] == expected
    assert data["rewards"][0] == 2.0 and data["rewards"][2] == 0.0  # a detect and an invalid among them
    assert data["scores"] == [r / 2.0 for r in expected]
    assert data["extra_logs"]["hwtp_detected"][0] == 1.0
    assert data["extra_logs"]["hwtp_invalid"][2] == 1.0


@pytest.mark.sim
def test_verify_echoes_the_rollout_with_its_reward(server: ServeProcess, states: dict[str, Any]) -> None:
    """NeMo Gym's verify: the body comes back whole, plus ``reward``."""
    first = states["ids"][0]
    body = {
        "responses_create_params": {"input": [{"role": "user", "content": "Write a test plan."}]},
        "response": {
            "id": "resp_1",
            "object": "response",
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": fenced(states["witnesses"][first]), "annotations": []}],
                },
            ],
        },
        "ground_truth": truth(states, first, as_text=False),
        "uuid": "row-7",
    }
    answer = server.post("/verify", body)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["reward"] == 2.0 and data["hwtp_outcome"] == "detected"
    assert {k: data[k] for k in body} == body

    body["response"]["output"] = []  # no answer at all: the invalid level, not an error
    data = server.post("/verify", body).json()
    assert data["reward"] == 0.0 and data["hwtp_outcome"] == "invalid"


@pytest.mark.sim
def test_health_and_metrics(server: ServeProcess, states: dict[str, Any]) -> None:
    health = server.client.get("/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    before = server.client.get("/metrics").json()
    items = [fenced(drive_plan(f"m{i}", 10 + i)) for i in range(3)]
    body = {"query": items, "labels": [truth(states, "golden")] * 3}
    assert server.post("/reward", body).status_code == 200
    after = server.client.get("/metrics").json()
    assert after["requests"]["/reward"] == before["requests"].get("/reward", 0) + 1
    assert after["items"] == before["items"] + 3
    assert after["evaluations"] >= before["evaluations"] + 3
    assert after["in_flight"] == 0 and after["queue_depth"] == 0
    assert after["executor"] == {"name": "local"}
    stats = after["latency"]["/reward"]
    assert stats["count"] >= 1 and 0 < stats["p50_ms"] <= stats["p95_ms"] <= stats["p99_ms"]
    text = server.client.get("/metrics", params={"format": "prometheus"}).text
    assert 'hwtp_serve_requests_total{route="/reward"}' in text and "hwtp_serve_queue_depth 0" in text


# --------------------------------------------------------------------------- refusals


@pytest.mark.sim
def test_refusals_name_the_problem(server: ServeProcess, states: dict[str, Any]) -> None:
    """Oversized 413, too many items 413, malformed 400, wrong shapes 422 naming the field, an
    unknown or changed mutant set 422 naming it (never a reward of 0)."""
    label = truth(states, "golden")
    huge = server.post("/reward", {"query": ["x" * 300_000], "labels": [label]})
    assert huge.status_code == 413 and "exceeds the limit of 200000" in huge.json()["error"]
    many = server.post("/reward", {"query": ["x"] * 257, "labels": [label] * 257})
    assert many.status_code == 413 and "257 items" in many.json()["error"]

    bad = server.client.post("/reward", content=b'{"query": [', headers={"content-type": "application/json"})
    assert bad.status_code == 400 and "not JSON" in bad.json()["error"]
    assert server.client.post("/reward", content=b"\xff\xfe").status_code == 400
    shapes = [
        ([1, 2], "body: expected a JSON object, got a list"),
        ({"query": "x", "labels": [label]}, "query: expected a list of strings, got a string"),
        ({"query": [7], "labels": [label]}, "query[0]: expected a string"),
        ({"query": ["x"]}, "labels: missing"),
        ({"query": ["x", "y"], "labels": [label]}, "labels: 1 entries for 2 queries"),
        ({"query": ["x"], "labels": [label], "prompts": ["a", "b"]}, "prompts: 2 entries for 1 queries"),
        ({"query": ["x"], "labels": [None]}, "labels[0]: expected the ground truth"),
        ({"query": ["x"], "labels": ['{"design": "counter_en_load"}']}, "lacks state, mutant_set"),
    ]
    for body, message in shapes:
        answer = server.post("/reward", body)
        assert answer.status_code == 422, (body, answer.text)
        assert message in answer.json()["error"], (body, answer.text)
    assert server.post("/verify", {"response": {"output": []}}).status_code == 422
    missing = server.post("/verify", {"responses_create_params": {}, "response": {"output": []}})
    assert missing.status_code == 422 and "ground_truth: missing" in missing.json()["error"]

    changed = {"design": DESIGN, "state": "golden", "mutant_set": "0" * 64}
    answer = server.post("/reward", {"query": ["x"], "labels": [json.dumps(changed)]})
    assert answer.status_code == 422 and "0" * 12 in answer.json()["error"], answer.text
    other = {"design": "no_such_design", "state": "golden", "mutant_set": states["hash"]}
    answer = server.post("/reward", {"query": ["x"], "labels": [other]})
    assert answer.status_code == 422 and "no_such_design" in answer.json()["error"], answer.text
    assert server.client.get("/reward").status_code == 405


@pytest.mark.sim
def test_a_bad_request_does_not_fail_the_requests_batched_with_it(server: ServeProcess, states: dict[str, Any]) -> None:
    good = {"query": [fenced(drive_plan("b", 3))] * 2, "labels": [truth(states, "golden")] * 2}
    unknown = {"query": ["x"], "labels": [json.dumps({"design": DESIGN, "state": "golden", "mutant_set": "1" * 64})]}
    answers: dict[int, Any] = {}

    def send(i: int) -> None:
        answers[i] = server.post("/reward", unknown if i % 3 == 0 else good)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, answer in answers.items():
        if i % 3 == 0:
            assert answer.status_code == 422
        else:
            assert answer.status_code == 200 and answer.json()["rewards"] == [1.0, 1.0]


# --------------------------------------------------------------------------- concurrency and faults


@pytest.mark.sim
def test_concurrent_clients_with_a_killed_simulator(states: dict[str, Any]) -> None:
    """8 clients, 6 requests each, one simulator process killed mid-batch: every request is
    answered with one reward per query, in order; each is the reward of a quiet run, except an
    evaluation the kill cut short, which is marked indeterminate (never a silent 0)."""
    srv = ServeProcess(states["mutdir"], states["root"], "--workers", "2")
    try:
        labels = ["golden", *states["ids"]]
        bodies = []
        for client in range(8):
            for request in range(6):
                items = [(labels[(client + k) % len(labels)], 20 * request + k + client) for k in range(12)]
                bodies.append(
                    {
                        "query": [
                            fenced(drive_plan(f"c{client}r{request}k{k}", d % 256, 400))
                            for k, (_, d) in enumerate(items)
                        ],
                        "labels": [truth(states, s) for s, _ in items],
                    }
                )
        quiet = [srv.post("/reward", b).json() for b in bodies[:1]]  # warm up
        assert len(quiet[0]["rewards"]) == 12

        answers: dict[int, Any] = {}
        errors: list[BaseException] = []

        def client(index: int) -> None:
            with httpx.Client(base_url=srv.url, timeout=120.0) as c:
                for j in range(6):
                    n = index * 6 + j
                    try:
                        answers[n] = c.post("/reward", json=bodies[n])
                    except BaseException as exc:
                        errors.append(exc)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        killed = None
        deadline = time.monotonic() + 60
        while killed is None and time.monotonic() < deadline and any(t.is_alive() for t in threads):
            found = simulators(srv.proc.pid)
            if found and srv.client.get("/metrics").json()["in_flight"] > 0:
                killed = found[0]
                os.kill(killed, signal.SIGKILL)
            time.sleep(0.01)
        for t in threads:
            t.join()
        assert not errors, errors
        assert killed is not None, "no simulator process was seen during the batch"

        reference = [srv.post("/reward", b).json() for b in bodies]  # again, undisturbed
        indeterminate = 0
        for n, body in enumerate(bodies):
            answer = answers[n]
            assert answer.status_code == 200, answer.text
            got = answer.json()
            assert len(got["rewards"]) == len(body["query"])
            for k, (value, ref) in enumerate(zip(got["rewards"], reference[n]["rewards"], strict=True)):
                if got["extra_logs"]["hwtp_indeterminate"][k]:
                    indeterminate += 1
                else:
                    assert value == ref, (n, k)
        assert indeterminate <= 2  # at most the evaluations running in the killed process
        metrics = srv.client.get("/metrics").json()
        assert metrics["requests"]["/reward"] == 1 + len(bodies) * 2
        assert metrics["items"] == 12 * (1 + len(bodies) * 2)
    finally:
        code, _, err = srv.stop()
    assert code == 0, err


@pytest.mark.sim
def test_bearer_token_and_time_limit(states: dict[str, Any]) -> None:
    secret = "s3cret-token-value"
    env = {**os.environ, TOKEN_VAR: secret}
    srv = ServeProcess(states["mutdir"], states["root"], "--token-env", TOKEN_VAR, env=env)
    auth = {"Authorization": f"Bearer {secret}"}
    body = {"query": [fenced(drive_plan("t", 1))], "labels": [truth(states, "golden")]}
    try:
        assert srv.post("/reward", body).status_code == 401
        wrong = srv.post("/reward", body, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
        assert srv.client.get("/metrics").status_code == 401
        assert srv.client.get("/health").status_code == 200
        ok = srv.post("/reward", body, headers=auth)
        assert ok.status_code == 200 and ok.json()["rewards"] == [1.0]
    finally:
        code, out, err = srv.stop()
    assert code == 0, err
    assert TOKEN_VAR in srv.banner and secret not in srv.banner + out + err
    # the request's time limit on a request that takes longer (a fresh server: its first request
    # starts the simulators, far beyond 10 ms, then 1.2 M cycles): 504, not a partial answer
    srv = ServeProcess(states["mutdir"], states["root"], "--request-timeout", "0.01")
    try:
        slow = srv.post("/reward", long_body(states, 20, "slow"))
        assert slow.status_code == 504 and "time limit of 0.01 s" in slow.json()["error"]
    finally:
        code, _, err = srv.stop()
    assert code == 0, err


def test_token_variable_must_be_set(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != TOKEN_VAR}
    done = subprocess.run(
        [HWTP, "serve", str(tmp_path), "--token-env", TOKEN_VAR, "--port", "0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2 and f"--token-env {TOKEN_VAR}: the variable is not set" in done.stderr


def long_body(states: dict[str, Any], n: int, tag: str) -> dict[str, Any]:
    """``n`` distinct plans of 60 000 cycles each: a request that takes seconds."""
    labels = ["golden", *states["ids"]]
    return {
        "query": [fenced(drive_plan(f"{tag}{k}", k % 256, 60_000)) for k in range(n)],
        "labels": [truth(states, labels[k % len(labels)]) for k in range(n)],
    }


@pytest.mark.sim
def test_sigterm_finishes_accepted_requests(states: dict[str, Any]) -> None:
    """One request in flight and one queued (concurrency 1, queue 1), a third refused with 503 and
    Retry-After; then SIGTERM: both accepted requests are answered in full, the service exits 0
    and leaves no process behind."""
    srv = ServeProcess(states["mutdir"], states["root"], "--workers", "1", "--concurrency", "1", "--queue", "1")
    answers: dict[str, Any] = {}

    def send(name: str, body: dict[str, Any]) -> None:
        with httpx.Client(base_url=srv.url, timeout=300.0) as c:
            answers[name] = c.post("/reward", json=body)

    def wait_metric(key: str, thread: threading.Thread) -> None:
        deadline = time.monotonic() + 30
        while srv.client.get("/metrics").json()[key] == 0:
            assert time.monotonic() < deadline and thread.is_alive(), f"{key} stayed 0"
            time.sleep(0.005)

    first = threading.Thread(target=send, args=("first", long_body(states, 12, "a")))
    first.start()
    wait_metric("in_flight", first)
    second = threading.Thread(target=send, args=("second", long_body(states, 2, "b")))
    second.start()
    wait_metric("queue_depth", second)
    busy = srv.post("/reward", long_body(states, 1, "c"))
    assert busy.status_code == 503 and busy.headers["retry-after"] == "1", busy.text
    assert "busy" in busy.json()["error"]
    srv.proc.send_signal(signal.SIGTERM)
    first.join(timeout=300)
    second.join(timeout=300)
    code, out, err = srv.stop()
    for name, n in (("first", 12), ("second", 2)):
        assert answers[name].status_code == 200, answers[name].text
        got = answers[name].json()
        assert len(got["rewards"]) == n and not any(got["extra_logs"]["hwtp_indeterminate"])
    assert code == 0, err
    assert "stopped" in out
    assert not descendants(srv.proc.pid)


def test_missing_extra_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from hwtp.cli.commands import serve as command
    from hwtp.errors import ConfigError

    real = command.importlib.util.find_spec
    monkeypatch.setattr(
        command.importlib.util, "find_spec", lambda name, *a: None if name == "uvicorn" else real(name, *a)
    )
    with pytest.raises(ConfigError, match=r"pip install 'hwtp\[serve\]'.*missing: uvicorn"):
        command._require_extra()


def test_admission_hands_slots_over_in_order() -> None:
    """Concurrency 2, queue 2: two run, two wait (FIFO), the fifth is refused; a waiter that gives
    up leaves the queue; slots return when every holder is done."""
    import asyncio

    from hwtp.training.serve.limits import Admission, Busy
    from hwtp.training.serve.metrics import Metrics

    async def scenario() -> list[str]:
        metrics = Metrics()
        admission = Admission(2, 2, metrics)
        order: list[str] = []
        release = asyncio.Event()

        async def hold(name: str) -> None:
            async with admission.slot():
                order.append(name)
                await release.wait()

        tasks = [asyncio.create_task(hold(n)) for n in ("a", "b", "c", "d")]
        await asyncio.sleep(0.01)
        assert (metrics.in_flight, metrics.queued, order) == (2, 2, ["a", "b"])
        with pytest.raises(Busy):
            async with admission.slot():
                pass
        tasks[2].cancel()  # c gives up waiting
        await asyncio.sleep(0.01)
        assert metrics.queued == 1
        release.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert (metrics.in_flight, metrics.queued) == (0, 0)
        return order

    assert asyncio.run(scenario()) == ["a", "b", "d"]


def test_percentiles() -> None:
    from hwtp.training.serve.metrics import percentile

    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 95), percentile(values, 99)) == (50.0, 95.0, 99.0)
    assert percentile([], 50) is None and percentile([3.0], 99) == 3.0


# --------------------------------------------------------------------------- one request must not fail others


def _raw(url: str) -> Any:
    """A plain TCP connection to the service at ``url`` (for clients that misbehave below HTTP)."""
    import socket

    host, port = url.removeprefix("http://").rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=120)


@pytest.mark.sim
def test_a_completion_that_is_not_unicode_costs_only_its_own_reward(states: dict[str, Any]) -> None:
    """One scoring thread held by a long request, then 5 valid requests and 1 whose completion holds a
    lone surrogate (JSON "\\ud800") arrive together and are batched: the 5 get their rewards, the
    surrogate gets the invalid reward (0) for itself alone, the echo of /verify carries it escaped; a
    5000-digit integer is 400 naming it; a client that disconnects mid-body is no traceback."""
    srv = ServeProcess(states["mutdir"], states["root"], "--threads", "1", "--workers", "1")
    try:
        first = states["ids"][0]
        valid = [{"query": [fenced(drive_plan(f"v{i}", i + 1))], "labels": [truth(states, "golden")]} for i in range(4)]
        valid.append({"query": [states["witnesses"][first]], "labels": [truth(states, first)]})
        expected = [[1.0]] * 4 + [[2.0]]
        surrogate = {
            "query": [fenced(drive_plan("s", 2)).replace("name: s", "name: s\ud800")],
            "labels": [truth(states, "golden")],
        }
        answers: dict[int, Any] = {}

        def send(i: int, body: dict[str, Any]) -> None:
            with httpx.Client(base_url=srv.url, timeout=300.0) as c:  # JSON as trainers send it: ASCII, \ud800 escaped
                answers[i] = c.post("/reward", content=json.dumps(body), headers={"content-type": "application/json"})

        hold = threading.Thread(target=send, args=(-1, long_body(states, 12, "h")))
        hold.start()
        deadline = time.monotonic() + 60
        while srv.metrics()["in_flight"] == 0:
            assert time.monotonic() < deadline and hold.is_alive()
            time.sleep(0.005)
        threads = [threading.Thread(target=send, args=(i, b)) for i, b in enumerate([*valid, surrogate])]
        for t in threads:
            t.start()
        for t in [hold, *threads]:
            t.join()
        assert answers[-1].status_code == 200, answers[-1].text
        for i, want in enumerate(expected):
            assert answers[i].status_code == 200, answers[i].text
            assert answers[i].json()["rewards"] == want
        bad = answers[len(valid)]
        assert bad.status_code == 200, bad.text
        assert bad.json()["rewards"] == [0.0] and bad.json()["extra_logs"]["hwtp_invalid"] == [1.0]

        rollout = {
            "responses_create_params": {"input": "\ud800"},
            "response": {"output": [{"type": "message", "content": [{"type": "output_text", "text": "\ud800"}]}]},
            "ground_truth": truth(states, "golden", as_text=False),
        }
        echoed = srv.client.post("/verify", content=json.dumps(rollout), headers={"content-type": "application/json"})
        assert echoed.status_code == 200, echoed.text
        assert echoed.json()["reward"] == 0.0 and echoed.json()["hwtp_outcome"] == "invalid"
        assert echoed.json()["responses_create_params"] == {"input": "\ud800"}

        digits = b'{"query": [' + b"1" * 5000 + b'], "labels": []}'
        big = srv.client.post("/reward", content=digits, headers={"content-type": "application/json"})
        assert big.status_code == 400 and "5000 digits" in big.json()["error"], big.text

        with _raw(srv.url) as sock:  # announces 10 000 bytes, sends 10, goes away
            sock.sendall(b"POST /reward HTTP/1.1\r\nHost: x\r\nContent-Length: 10000\r\n\r\n" + b'{"query": ')
        assert srv.client.get("/health").status_code == 200
        deadline = time.monotonic() + 60
        while srv.metrics()["rejected"].get("disconnected", 0) == 0:
            assert time.monotonic() < deadline, srv.metrics()
            time.sleep(0.05)
    finally:
        code, _, err = srv.stop()
    assert code == 0, err
    assert "Traceback" not in err and "failed" not in err, err


@pytest.mark.sim
def test_slow_clients_are_cut_off(states: dict[str, Any]) -> None:
    """A client that sends its headers a byte at a time, one that sends half a body and one that sends
    nothing are disconnected after --read-timeout; the service goes on answering."""
    srv = ServeProcess(states["mutdir"], states["root"], "--read-timeout", "1")
    try:
        silent, half, drip = _raw(srv.url), _raw(srv.url), _raw(srv.url)
        half.sendall(b"POST /reward HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        header = b"POST /reward HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 10_000
        closed: dict[str, bool] = {}
        for name, sock in (("silent", silent), ("half", half)):
            sock.settimeout(120)
            closed[name] = _closed(sock)
        drip.settimeout(0.2)
        deadline = time.monotonic() + 120  # a byte every 0.2 s would last 2000 s
        for byte in header:
            try:
                drip.sendall(bytes([byte]))
                if drip.recv(1024) == b"":
                    closed["drip"] = True
                    break
            except TimeoutError:
                pass
            except OSError:  # reset by the server
                closed["drip"] = True
                break
            assert time.monotonic() < deadline, "the dripping client was never cut off"
        for sock in (silent, half, drip):
            sock.close()
        assert closed == {"silent": True, "half": True, "drip": True}
        assert srv.client.get("/health").status_code == 200
    finally:
        code, _, err = srv.stop()
    assert code == 0, err
    assert "Traceback" not in err, err


def _closed(sock: Any) -> bool:
    """Whether the server closes ``sock`` within its timeout (the read ends, or a reset)."""
    try:
        while sock.recv(1024):
            pass
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_listening_beyond_this_machine_without_a_token_warns(states: dict[str, Any]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HWTP_SERVE_TOKEN"}
    proc = subprocess.Popen(
        [HWTP, "serve", str(states["mutdir"]), "--host", "0.0.0.0", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=states["root"],
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "listening on http://0.0.0.0:" in line, line
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "WARNING" in err and "WITHOUT a token" in err and "export HWTP_SERVE_TOKEN=" in err, err
