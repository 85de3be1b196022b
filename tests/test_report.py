"""hwtp report: pages for real runs and a real ``hwtp ci`` report, opened in headless Chromium.

Chromium (Debian's ``chromium``, installed by ``.ci/run``) is driven over the Chrome DevTools
Protocol with a small client on websocket-client: every console message, uncaught exception,
log entry and network request of the page is recorded while it loads. The page must load
with no error and no request beyond its own file, show every section, draw something (the
screenshot's pixels vary) and keep text from the LLM and from source files as text. The HTML
is parsed by html5lib in strict mode (any parse error fails).
"""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import html5lib
import numpy as np
import pytest
import websocket
from PIL import Image

from hwtp.run import loop

Run_ = Callable[..., tuple[int, str, str]]
ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
RUN_SECTIONS = {"summary", "rewards", "kill-matrix", "advantages", "mutants", "slowest", "llm"}
CI_SECTIONS = {"ci-score", "survivors", "killed-per-test", "source"}
PAYLOAD = "<script>document.title='pwned'</script>"
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium)")


class Page:
    """One page loaded in a fresh headless Chromium, with what happened while it loaded."""

    def __init__(self, url: str, profile: Path) -> None:
        self.url = url
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.proc = subprocess.Popen(
            [CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--remote-debugging-port=0", f"--user-data-dir={profile}", "--window-size=1400,1000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.is_file() and len(port_file.read_text().splitlines()) == 2):
            assert time.monotonic() < deadline and self.proc.poll() is None, "chromium did not start"
            time.sleep(0.1)
        port, path = port_file.read_text().splitlines()
        self.ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=30)
        self.next_id = 0
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=True)
        self.call("Page.navigate", session=True, url=url)
        self.wait_for("Page.loadEventFired")

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        self.ws.send(json.dumps(message))
        while True:
            reply = self.receive()
            if reply.get("id") == self.next_id:
                assert "error" not in reply, reply
                return dict(reply.get("result", {}))

    def receive(self) -> dict[str, Any]:
        msg = json.loads(self.ws.recv())
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert", "warning"):
            self.errors.append(f"console.{params['type']}: {params['args']}")
        elif method == "Runtime.exceptionThrown":
            self.errors.append(f"exception: {params['exceptionDetails']}")
        elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
            self.errors.append(f"log: {params['entry']}")
        elif method == "Network.requestWillBeSent" and params["request"]["url"] != self.url:
            self.requests.append(params["request"]["url"])
        return dict(msg)

    def wait_for(self, event: str) -> None:
        while self.receive().get("method") != event:
            pass
        end = time.monotonic() + 0.5  # late console messages and requests
        self.ws.settimeout(0.5)
        try:
            while time.monotonic() < end:
                self.receive()
        except websocket.WebSocketTimeoutException:
            pass
        self.ws.settimeout(30)

    def js(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def screenshot(self) -> np.ndarray:
        data = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True)["data"]
        return np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("L"), dtype=float)

    def close(self) -> None:
        self.ws.close()
        self.proc.kill()
        self.proc.wait(timeout=30)


@pytest.fixture
def open_page(tmp_path: Path) -> Iterator[Callable[[Path], Page]]:
    pages: list[Page] = []

    def make(html: Path) -> Page:
        profile = tmp_path / f"profile{len(pages)}"
        profile.mkdir()
        pages.append(Page(html.resolve().as_uri(), profile))
        return pages[-1]

    yield make
    for p in pages:
        p.close()


def check_html(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parse(text)  # raises on any parse error
    return text


def check_page(page: Page, sections: dict[str, set[str]]) -> None:
    """No error, no request, the sections of each source, no script, something drawn."""
    assert page.errors == [], page.errors
    assert page.requests == [], page.requests
    assert page.js("document.title").startswith("hwtp report")
    assert page.js("document.scripts.length") == 0
    found = page.js("[...document.querySelectorAll('[data-section]')].map(e => [e.closest('article')?.id ?? '',"
                    " e.dataset.section, e.textContent.trim().length])")
    by_source: dict[str, set[str]] = {}
    for source, name, length in found:
        assert length > 40, f"{source} {name} is empty"
        by_source.setdefault(source, set()).add(name)
    assert by_source == sections
    pixels = page.screenshot()
    assert pixels.shape[0] > 1000 and pixels.std() > 20, "blank screenshot"
    pdf = base64.b64decode(page.call("Page.printToPDF", session=True)["data"])  # the print stylesheet
    assert pdf.startswith(b"%PDF") and re.search(rb"/Type\s*/Page\b", pdf)


# --------------------------------------------------------------------------- run folders


def _replay_source(folder: Path) -> Path:
    """An ``hwtp plan`` folder for ``--policy replay`` whose completions hold a script tag."""
    folder.mkdir()
    records = [
        {"plan": f"{state}-s00", "state": state, "sample": 0, "policy": "openai",
         "completion": f"{PAYLOAD} & no plan here", "finish_reason": "stop",
         "usage": {"prompt_tokens": 100, "completion_tokens": 9}, "model": "test-model"}
        for state in ("golden", "m0001")
    ]
    (folder / "plans.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return folder


@pytest.mark.sim
@needs_chromium
def test_run_report_in_chromium(tmp_path: Path, run_cli: Run_, open_page: Callable[[Path], Page]) -> None:
    two, replayed = tmp_path / "two", tmp_path / "replayed"
    code, _, err = run_cli("run", "counter_en_load", "adder_carry", "--states", "3", "-G", "3", "-o", two)
    assert code == 0, err
    code, _, err = run_cli("run", "counter_en_load", "--states", "1", "-G", "1", "--policy", "replay",
                           "--from", _replay_source(tmp_path / "plans"), "-o", replayed)
    assert code == 0, err
    scores = tmp_path / "scores.json"
    code, _, err = run_cli("score", two / "designs" / "adder_carry" / "mutants", "--plans",
                           ROOT / "designs" / "adder_carry" / "plans", "--json", scores)
    assert code == 0, err
    html = tmp_path / "report.html"
    code, out, err = run_cli("report", two, replayed, scores, "-o", html)
    assert code == 0 and out == "", err
    text = check_html(html)
    assert PAYLOAD not in text and "&lt;script&gt;document.title=" in text

    page = open_page(html)
    check_page(page, {"": {"comparison"}, "src0": RUN_SECTIONS, "src1": RUN_SECTIONS, "src2": RUN_SECTIONS})
    assert page.js("document.querySelectorAll('#comparison th.n').length") == 3
    # a scores file has no mutants, evaluation times or plan records: said, not left blank
    assert page.js("document.querySelector('#src2-slowest').innerText").endswith("not recorded in this source.")
    # the completion is shown as text, under its invalid plan
    shown = page.js("[...document.querySelectorAll('#src1 details.completion pre')].map(e => e.textContent)")
    assert shown and all(s.startswith(PAYLOAD) for s in shown)
    # the numbers are the run's own (hwtp status), per design and overall
    summary = loop.status(two)["summary"]
    rows = page.js("[...document.querySelectorAll('#src0-summary tr')].map(r => r.innerText.split('\\t'))")
    for name, numbers in [*summary["designs"].items(), ("overall", summary["overall"])]:
        row = next(r for r in rows if r[0] == name)
        assert row[1] == str(numbers["samples"])
        assert row[2] == f"{numbers['golden_pass_rate']:.1%}" and row[3] == f"{numbers['detection_rate']:.1%}"
        assert row[5:7] == [f"{numbers['zero_advantage_groups'][k]:.1%}" for k in ("state", "design")]
    statuses = page.js("[...document.querySelectorAll('#src0-slowest td:nth-child(3)')].map(e => e.textContent)")
    assert statuses and set(statuses) <= {"pass", "fail", "timeout", "error"}, statuses
    # one kill matrix per design, one cell per (sample, state), and the replayed run's tokens
    assert page.js("document.querySelectorAll('#src0-kill-matrix svg').length") == 2
    llm = page.js("document.querySelector('#src1-llm').innerText")
    assert "test-model" in llm and "200" in llm and "retries" not in llm  # not in plan records: no row


# --------------------------------------------------------------------------- hwtp ci


@pytest.mark.sim
@needs_chromium
def test_ci_report_in_chromium(tmp_path: Path, run_cli: Run_, open_page: Callable[[Path], Page]) -> None:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "examples" / "ci", project)
    code, _, err = run_cli("ci", "--config", project / "hwtp.yaml", "-n", "8", "-j", "2", "--min-score", "0",
                           "--json", tmp_path / "ci.json")
    assert code == 0, err
    report = json.loads((tmp_path / "ci.json").read_text())
    html = tmp_path / "ci.html"
    code, _, err = run_cli("report", tmp_path / "ci.json", "-o", html, "--root", project)
    assert code == 0, err
    check_html(html)

    page = open_page(html)
    check_page(page, {"src0": CI_SECTIONS})
    survivors = [m["id"] for m in report["mutants"] if m["status"] == "survived"]
    shown = page.js("[...document.querySelectorAll('#src0-survivors td:first-child')].map(e => e.textContent)")
    assert shown == sorted(survivors, key=lambda i: next((m["line"], i) for m in report["mutants"] if m["id"] == i))
    # each survivor's diagnosis (hwtp ci diagnoses by default), after activated / propagated / detected
    header = page.js("[...document.querySelectorAll('#src0-survivors tr:first-child th')].map(e => e.textContent)")
    assert header[-4:] == ["activated", "propagated", "detected", "diagnosis"]
    why = page.js("[...document.querySelectorAll('#src0-survivors tr')].filter(r => r.cells[0].tagName == 'TD')"
                  ".map(r => r.cells[r.cells.length - 1].textContent)")
    by_id = {m["id"]: m for m in report["mutants"]}
    assert why == [by_id[i]["why"] for i in shown] and all(why)
    # the source view: every line of the file, as text, with its kill counts
    source = (project / "rtl" / "sat_counter.v").read_text().splitlines()
    lines = page.js("[...document.querySelectorAll('#src0-source table.src tr')].slice(1)"
                    ".map(r => [...r.cells].map(c => c.textContent))")
    assert [cells[4] for cells in lines] == source and any("<=" in s for s in source)
    assert sum(int(cells[1] or 0) for cells in lines) == report["counts"]["killed"]
    assert sum(int(cells[2] or 0) for cells in lines) == report["counts"]["survived"]
    killed = page.js("[...document.querySelectorAll('#src0-killed-per-test tr')].slice(1)"
                     ".map(r => [r.cells[0].textContent, +r.cells[1].textContent])")
    expected: dict[str, int] = {}
    for m in report["mutants"]:
        for t in m["killed_by"] if m["status"] == "killed" else ():
            expected[t] = expected.get(t, 0) + 1
    assert dict(killed) == expected and expected


# --------------------------------------------------------------------------- progress


@pytest.mark.sim
def test_progress_is_plain_lines_on_stderr_when_not_a_tty(tmp_path: Path) -> None:
    """``hwtp score`` in a pipe: stdout is only the command's output, stderr has whole lines with
    the count, the rate and the time left (no carriage return, no escape sequence)."""
    hwtp = [str(Path(sys.executable).with_name("hwtp"))]
    mutants = tmp_path / "mutants"
    done = subprocess.run([*hwtp, "mutate", "counter_en_load", "-n", "4", "-o", mutants], capture_output=True,
                          text=True, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    plans = ROOT / "designs" / "counter_en_load" / "plans"
    done = subprocess.run([*hwtp, "score", mutants, "--plans", plans, "--json", tmp_path / "s.json"],
                          capture_output=True, text=True, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    assert "scoring" not in done.stdout and "\r" not in done.stderr and "\x1b" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("scoring: ")]
    counts = [tuple(map(int, re.match(r"scoring: (\d+)/(\d+) ", line).groups())) for line in lines]  # type: ignore[union-attr]
    total = counts[-1][1]
    assert total > 1 and counts[-1] == (total, total) and lines[-1].endswith(" s"), done.stderr
    assert [c[0] for c in counts] == sorted(c[0] for c in counts) and len(counts) > 1
    assert all(re.search(r" [0-9.]+/s, \d+ (s|min) left$", line) for line in lines[:-1]), done.stderr
