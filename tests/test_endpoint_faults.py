"""Endpoint faults in ``hwtp plan`` and ``hwtp run``: a sample the policy never produced is not
a sample (no plan record, never scored or exported, asked again by a rerun, exit 1), a wrong
key stops at once (exit 2, the variable named, never the value), every request is bounded in
time (total deadline) and size, and odd completions (lone surrogates, the key reflected,
truncation) are stored safely.

The endpoint is the scripted server of tests/openai_server.py, in its own process on
127.0.0.1, with the named faults of tests/fault_server.py.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tables import table

from hwtp.errors import EndpointAuthError, PolicyError
from hwtp.mutators import engine, mutantset
from hwtp.policy.llm.chat import ClientConfig
from hwtp.policy.llm.client import ChatClient
from hwtp.rtl.design import load_design

_spec = importlib.util.spec_from_file_location("hwtp_tests_fault_server", Path(__file__).with_name("fault_server.py"))
assert _spec is not None and _spec.loader is not None
faults = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(faults)

KEY_VAR = "HWTP_FAULT_KEY"
KEY = "sk-hwtp-FAULTS-do-not-leak-8d1c2b"
#: A valid plan for adder_carry, as a model would write it.
PLAN = (
    "Here is the plan:\n```yaml\ntests:\n  - name: small_sum\n    steps:\n"
    "      - drive: {a: 1, b: 2, cin: 0}\n      - expect: {sum: 3, cout: 0}\n```\n"
)
#: Per mode: what the message says, and how long the command may take at most (s).
NO_SAMPLE = {
    "unavailable": ("HTTP 503 Service Unavailable: the model is loading", 10.0),
    "drip": ("timed out: no complete response within 1 s", 10.0),
    "oversized": ("response exceeds 4194304 bytes", 10.0),
}


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    url, proc = faults.start_server({})
    try:
        yield url
    finally:
        faults.stop_server(proc)


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_VAR, KEY)


@pytest.fixture(scope="module")
def mutdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two mutants of adder_carry (no witness search: no simulator needed)."""
    root = tmp_path_factory.mktemp("mut")
    mutantset.write(engine.mutate(load_design("adder_carry"), engine.MutationConfig(n=2, witness_cycles=0)), root)
    return root


def model() -> str:
    """A model name of its own per command line: cached completions never cross tests."""
    return f"m-{uuid.uuid4().hex[:8]}"


def plan_args(mutdir: Path, out: Path, url: str, name: str, *extra: Any) -> list[Any]:
    return ["plan", mutdir, "-o", out, "--states", "golden,m0001", "-G", "2", "--endpoint", url,
            "--model", name, "--api-key-env", KEY_VAR, "--timeout", "1", "--retries", "1", *extra]  # fmt: skip


def records(out: Path) -> list[dict[str, Any]]:
    index = out / "plans.jsonl"
    if not index.exists():
        return []
    return [json.loads(line) for line in index.read_text(encoding="utf-8").splitlines()]


def everything(*folders: Path) -> bytes:
    return b"".join(p.read_bytes() for f in folders if f.exists() for p in sorted(f.rglob("*")) if p.is_file())


# --- hwtp plan --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", sorted(NO_SAMPLE))
def test_plan_failure_is_no_sample_and_rerun_asks_again(
    mode: str, server: str, mutdir: Path, tmp_path: Path, run_cli: Any
) -> None:
    faults.switch(server, mode, PLAN)
    out, name = tmp_path / "plans", model()
    start = time.monotonic()
    code, stdout, err = run_cli(*plan_args(mutdir, out, server, name))
    elapsed = time.monotonic() - start
    message, bound = NO_SAMPLE[mode]
    assert code == 1, err
    assert "4 of 4 samples could not be produced" in err and message in err, err
    assert "rerun the same command" in err and "Traceback" not in err
    assert elapsed < bound, elapsed
    assert records(out) == []  # nothing to score, advantage or export
    assert "0 plans" in stdout
    faults.switch(server, "healthy", PLAN)
    code, stdout, err = run_cli(*plan_args(mutdir, out, server, name))
    assert code == 0, err
    got = records(out)
    assert len(got) == 4 and all(r["error"] is None and r["completion"] == PLAN for r in got)


def test_plan_refused_connection(mutdir: Path, tmp_path: Path, run_cli: Any) -> None:
    start = time.monotonic()
    code, _, err = run_cli(*plan_args(mutdir, tmp_path / "plans", faults.refused_url(), model()))
    assert code == 1 and "ConnectError" in err and "4 of 4 samples could not be produced" in err, err
    assert time.monotonic() - start < 10
    assert records(tmp_path / "plans") == []


def test_plan_partial_failure_keeps_received_samples_and_rerun_asks_only_for_the_rest(
    server: str, mutdir: Path, tmp_path: Path, run_cli: Any
) -> None:
    # single requests (n refused); the sample with seed 1 always gets a 503
    faults.switch(server, "healthy", PLAN, reject_n=True, fail_seeds=[1])
    out, name = tmp_path / "plans", model()
    code, _, err = run_cli(*plan_args(mutdir, out, server, name, "--seed", "0"))
    assert code == 1 and "2 of 4 samples could not be produced" in err and "seed 1 always fails" in err, err
    got = records(out)
    assert sorted((r["state"], r["sample"]) for r in got) == [("golden", 0), ("m0001", 0)]
    assert all(r["error"] is None for r in got)
    faults.switch(server, "healthy", PLAN, reject_n=True)
    code, _, err = run_cli(*plan_args(mutdir, out, server, name, "--seed", "0"))
    assert code == 0, err
    assert faults.stats(server)["requests"] == 2  # only the two missing samples
    assert len(records(out)) == 4


def test_plan_wrong_key_stops_at_once_naming_the_variable(
    server: str, mutdir: Path, tmp_path: Path, run_cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    faults.switch(server, "unauthorized", PLAN)
    code, stdout, err = run_cli(*plan_args(mutdir, tmp_path / "plans", server, model()))
    assert code == 2, err
    assert "HTTP 401" in err and f"${KEY_VAR}" in err and "Traceback" not in err
    assert KEY not in stdout + err
    assert faults.stats(server)["requests"] <= 2  # no retries
    assert not (tmp_path / "plans" / "plans.jsonl").exists()
    monkeypatch.delenv(KEY_VAR)
    code, _, err = run_cli(*plan_args(mutdir, tmp_path / "plans", server, model()))
    assert code == 2 and f"${KEY_VAR} is not set" in err, err


def test_plan_lone_surrogate_is_stored_as_a_replacement_character(
    server: str, mutdir: Path, tmp_path: Path, run_cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HWTP_CACHE_DIR", str(tmp_path / "cache"))
    faults.switch(server, "surrogate", PLAN)
    out, name = tmp_path / "plans", model()
    code, _, err = run_cli(*plan_args(mutdir, out, server, name))
    assert code == 0, err
    got = records(out)
    assert len(got) == 4 and all("odd text: \ufffd end" in r["completion"] and r["error"] is None for r in got)
    assert "\ufffd" in (out / "golden" / "s00.txt").read_text(encoding="utf-8")
    code, _, err = run_cli(*plan_args(mutdir, tmp_path / "again", server, name))  # from the cache
    assert code == 0, err
    assert [r["completion"] for r in records(tmp_path / "again")] == [r["completion"] for r in got]


def test_plan_truncation_is_kept_and_reported(server: str, mutdir: Path, tmp_path: Path, run_cli: Any) -> None:
    faults.switch(server, "truncated", PLAN)
    code, stdout, err = run_cli(*plan_args(mutdir, tmp_path / "plans", server, model()))
    assert code == 0, err
    assert "4 truncated (finish_reason=length)" in stdout
    got = records(tmp_path / "plans")
    assert len(got) == 4
    assert all(r["finish_reason"] == "length" for r in got)
    assert all(r["error"].startswith("truncated (finish_reason=length)") for r in got)


def test_plan_reflected_key_is_redacted_everywhere(
    server: str, mutdir: Path, tmp_path: Path, run_cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HWTP_CACHE_DIR", str(tmp_path / "cache"))
    faults.switch(server, "reflect", PLAN)
    out = tmp_path / "plans"
    code, stdout, err = run_cli(*plan_args(mutdir, out, server, model()))
    assert code == 0, err
    assert faults.stats(server)["auth"] == [f"Bearer {KEY}"]  # the key was sent, and echoed
    assert all("your key is [redacted]" in r["completion"] for r in records(out))
    assert KEY.encode() not in everything(out, tmp_path / "cache")
    assert KEY not in stdout + err


def test_plan_oversized_body_is_not_read_into_memory(server: str, mutdir: Path, tmp_path: Path) -> None:
    """50 MB answers: hwtp stops reading at the cap, so its memory stays that of a normal run."""
    faults.switch(server, "oversized", PLAN)
    wrapper = (
        # VmHWM is this process image's own peak: ru_maxrss would carry the forking pytest's peak over exec
        "import sys\nfrom hwtp.cli.main import main\ncode = main(sys.argv[1:])\n"
        "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
        "print('MAXRSS_KB', hwm, file=sys.stderr)\nsys.exit(code)\n"
    )
    args = [str(a) for a in plan_args(mutdir, tmp_path / "plans", server, model())]
    done = subprocess.run(
        [sys.executable, "-c", wrapper, *args[:-2], "--retries", "0"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,  # not the repository: the installed package
    )
    assert done.returncode == 1, done.stderr
    assert "response exceeds 4194304 bytes" in done.stderr
    peak_kb = int(done.stderr.split("MAXRSS_KB")[1].split()[0])
    assert peak_kb < 200 * 1024, peak_kb  # a normal run needs ~75 MB; reading 50 MB took ~430 MB
    assert sum(p.stat().st_size for p in (tmp_path / "plans").rglob("*") if p.is_file()) < 1024


def test_client_refuses_a_declared_oversized_body_before_reading_it(server: str) -> None:
    faults.switch(server, "oversized", PLAN, huge_declared=True)
    config = ClientConfig(endpoint=server, model=model(), api_key_env=KEY_VAR, max_retries=3, max_response_bytes=1000)

    async def ask() -> None:
        async with ChatClient(config) as client:
            await client.complete([{"role": "user", "content": "plan"}])

    with pytest.raises(PolicyError, match="response exceeds 1000 bytes"):
        asyncio.run(ask())
    assert faults.stats(server)["requests"] == 1  # not retried


def test_client_wrong_key_fails_later_requests_without_asking(server: str) -> None:
    faults.switch(server, "unauthorized", PLAN)
    config = ClientConfig(endpoint=server, model=model(), api_key_env=KEY_VAR, max_retries=3)

    async def ask() -> list[BaseException]:
        async with ChatClient(config) as client:
            errors = []
            for _ in range(3):
                try:
                    await client.complete([{"role": "user", "content": "plan"}])
                except PolicyError as exc:
                    errors.append(exc)
            return errors

    errors = asyncio.run(ask())
    assert len(errors) == 3 and all(isinstance(e, EndpointAuthError) for e in errors)
    assert faults.stats(server)["requests"] == 1
    assert all(KEY not in str(e) and KEY_VAR in str(e) for e in errors)


# --- hwtp run ---------------------------------------------------------------------------------


def run_args(rundir: Path, url: str, name: str, *extra: Any) -> list[Any]:
    return ["run", "adder_carry", "-o", rundir, "--states", "2", "-G", "2", "--witness-cycles", "100", "-j", "1",
            "--policy", "openai", "--endpoint", url, "--model", name, "--api-key-env", KEY_VAR,
            "--timeout", "1", "--retries", "0", *extra]  # fmt: skip


def assert_nothing_downstream(rundir: Path) -> None:
    assert table(rundir, "SELECT COUNT(*) FROM samples") == [(0,)]
    assert table(rundir, "SELECT COUNT(*) FROM advantages") == [(0,)]
    assert table(rundir, "SELECT stage FROM stages") == [("mutate",)]  # plan not done
    assert not (rundir / "export").exists()


@pytest.mark.sim
def test_run_endpoint_faults_then_a_healthy_rerun_completes(server: str, tmp_path: Path, run_cli: Any) -> None:
    rundir, name = tmp_path / "run", model()
    healthy = PLAN + "\n# notes: \ud800 and your key is {key}\n"
    for mode in ("unavailable", "drip", "oversized"):
        faults.switch(server, mode, PLAN)
        start = time.monotonic()
        code, _, err = run_cli(*run_args(rundir, server, name))
        assert code == 1, (mode, err)
        assert "planning adder_carry could not finish: 6 samples could not be produced" in err, err
        assert NO_SAMPLE[mode][0] in err and "Traceback" not in err, err
        assert time.monotonic() - start < 30, mode
        assert table(rundir, "SELECT COUNT(*) FROM plans") == [(0,)]
        assert_nothing_downstream(rundir)
    faults.switch(server, "unauthorized", PLAN)
    code, out, err = run_cli(*run_args(rundir, server, name))
    assert code == 2 and f"${KEY_VAR}" in err and KEY not in out + err, err
    # part of the samples: those with seed 1 fail (single requests, n refused)
    faults.control(server, texts=[healthy], reject_n=True, fail_seeds=[1])
    code, _, err = run_cli(*run_args(rundir, server, name))
    assert code == 1 and "3 samples could not be produced (3 of 6 still missing)" in err, err
    stored = table(rundir, "SELECT state, sample, record FROM plans ORDER BY state, sample")
    assert [(s, k) for s, k, _ in stored] == [("golden", 0), ("m0001", 0), ("m0002", 0)]
    assert all(json.loads(r)["error"] is None for _, _, r in stored)
    assert_nothing_downstream(rundir)
    code, out, err = run_cli("status", rundir)
    assert code == 0 and "3/6" in out, out
    # the endpoint is back: only the three missing samples are asked for; the run completes
    faults.control(server, texts=[healthy], reject_n=True)
    code, out, err = run_cli(*run_args(rundir, server, name, "--timeout", "30", "--retries", "2"))
    assert code == 0, err
    assert faults.stats(server)["requests"] == 3
    assert table(rundir, "SELECT COUNT(*) FROM plans") == [(6,)]
    exported = [
        json.loads(line)
        for f in sorted((rundir / "export" / "jsonl").rglob("*.jsonl"))
        for line in f.read_text(encoding="utf-8").splitlines()
    ]
    assert len(exported) == 6 and all(r["completion"].startswith(PLAN) for r in exported)
    assert all("\ufffd and your key is [redacted]" in r["completion"] for r in exported)
    assert KEY.encode() not in everything(rundir)
    assert b"\\ud800" not in everything(rundir)


@pytest.mark.sim
def test_run_refused_connection_and_truncation(server: str, tmp_path: Path, run_cli: Any) -> None:
    code, _, err = run_cli(*run_args(tmp_path / "refused", faults.refused_url(), model()))
    assert code == 1 and "ConnectError" in err and "could not finish" in err, err
    assert_nothing_downstream(tmp_path / "refused")
    faults.switch(server, "truncated", PLAN)
    code, out, err = run_cli(*run_args(tmp_path / "cut", server, model()))
    assert code == 0, err
    assert "(6 truncated, finish_reason=length)" in out, out
    records = [json.loads(r) for (r,) in table(tmp_path / "cut", "SELECT record FROM plans")]
    assert len(records) == 6 and all(r["error"].startswith("truncated (finish_reason=length)") for r in records)


def test_run_bounds_come_from_hwtp_yaml_and_are_not_part_of_the_fingerprint(
    tmp_path: Path, run_cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("hwtp.yaml").write_text("run:\n  timeout: 2.5\n  retries: 0\n  max_response_bytes: 100000\n")
    code, out, err = run_cli("run", "adder_carry", "-o", "r", "--dry-run", "--retries", "1")
    assert code == 0, err
    config = json.loads(out)["config"]
    assert not {"timeout", "retries", "max_response_bytes"} & set(config)  # they do not change results
    for bad, message in (("timeout: 0", "run.timeout: must be above 0"), ("retries: -1", "run.retries: must be at")):
        Path("hwtp.yaml").write_text(f"run:\n  {bad}\n")
        code, _, err = run_cli("run", "adder_carry", "-o", "r", "--dry-run")
        assert code == 2 and f"hwtp.yaml:2: {message}" in err, err
    Path("hwtp.yaml").unlink()
    code, _, err = run_cli("run", "adder_carry", "-o", "r", "--dry-run", "--max-response-bytes", "0")
    assert code == 2 and "--max-response-bytes: must be at least 1" in err, err
