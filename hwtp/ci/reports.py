"""Reports of ``hwtp ci``: terminal summary and survivors table, JUnit XML, Markdown, lcov, JSON.

Every function renders a :class:`hwtp.ci.mutation.CiReport` to text; the command writes the files.

- JUnit: one ``testcase`` per mutant. Killed mutants pass; a survivor is a ``failure`` whose
  message is its diagnosis and one-line diff (the failure text: why it survived, with the first
  time and output where known, then the unified diff); timeout, error, equivalent and
  not_elaborated mutants are ``skipped`` with the reason. The document keeps to the elements and
  attributes of the common JUnit schema (Jenkins/pytest ``junit-10.xsd``).
- lcov: per source line, one ``BRDA`` branch per mutant (taken ``1`` killed, ``0`` survived,
  ``-`` indeterminate) and a ``DA`` hit count: the number killed, or 0 when one survived, so
  coverage viewers paint lines with survivors red.
- Markdown: for ``$GITHUB_STEP_SUMMARY``.
- GitHub workflow annotations: one ``::warning file=…,line=…,col=…,title=…::`` command per
  survivor (its diff in the message), which GitHub shows on the pull request's changed lines.

The score's formula is in every header; :mod:`hwtp.ci.sarif` writes SARIF.
"""

from __future__ import annotations

import html
import json
import platform
import re
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from xml.etree.ElementTree import Element, SubElement, tostring

from hwtp.ci.mutation import INDETERMINATE, UNSCORED, CiReport, MutantResult, Status
from hwtp.scoring.reach import LABELS

_XML_INVALID = re.compile("[^\u0009\u000a\u000d\u0020-\u007e\u0080-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_TABLE_CHANGE_WIDTH = 100


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def summary(report: CiReport) -> str:
    """Two or three lines: the score with its counts, and the gate."""
    c = report.counts
    score = report.score
    head = (f"{report.design}: mutation score {_percent(score)} = {report.formula}"
            + (f" = {report.detected}/{c['scored']}" if c["scored"] else "")
            + f" (timeouts {report.timeouts_as})")
    detail = (f"survived {c['survived']}, timeout {c['timeout']}, error {c['error']}, "
              f"equivalent {c['equivalent']}, not elaborated {c['not_elaborated']} (with the configured "
              "parameters), "
              f"rejected by hwtp mutate {c['rejected']}; golden {len(report.golden.tests)} tests in "
              f"{report.golden.seconds:.1f} s; {report.seconds:.1f} s in all")
    lines = [head, detail, *_baseline_lines(report)]
    if report.min_score is not None:
        verdict = "passed" if report.gate_passed else "FAILED"
        if not c["scored"]:
            why = "no mutant could be scored" if c["indeterminate"] else "no mutant to score"
            lines.append(f"gate min_score {report.min_score:.1%}: {verdict} ({why})")
        else:
            lines.append(f"gate min_score {report.min_score:.1%}: {verdict}")
    return "\n".join(lines)


def _baseline_lines(report: CiReport) -> list[str]:
    check = report.baseline
    if check is None:
        return []
    lines = [f"baseline {check.path}: {len(check.accepted)} accepted survivors, {len(check.new)} new"
             + (" (the gate fails on new survivors: " + ", ".join(check.new) + ")" if check.new else "")]
    if check.now_killed:
        lines.append(f"  now killed, remove from the baseline: {', '.join(e.where for e in check.now_killed)}")
    if check.gone:
        lines.append(f"  gone (no such mutant in this run): {', '.join(e.where for e in check.gone)}")
    return lines


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _label(m: MutantResult) -> str:
    diagnosis = m.diagnosis
    return LABELS[diagnosis] if diagnosis else ""


def survivors_table(report: CiReport) -> str:
    """The survivors (id, operator, file:line, diagnosis, one-line diff), then the indeterminate ones."""
    rows = [(m.id, m.operator, f"{m.file}:{m.line}", _label(m), _clip(m.one_line_diff, _TABLE_CHANGE_WIDTH))
            for m in report.survivors]
    if not rows:
        out = ["no survivor: every scored mutant was killed" if report.counts["scored"] else "no survivor"]
    else:
        header = ("id", "operator", "location", "diagnosis", "change (golden  ->  mutant)")
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
        out = [f"survivors ({len(rows)}):"]
        for row in [header, *rows]:
            out.append("  " + "  ".join(row[i].ljust(widths[i]) for i in range(4)) + "  " + row[4])
    odd = [m for m in report.mutants if m.status in INDETERMINATE]
    if odd:
        out.append(f"indeterminate ({len(odd)}, not counted):")
        for m in odd:
            reason = (m.reason or "").splitlines()[0] if m.reason else ""
            out.append(f"  {m.id}  {m.status.value:<8} {m.file}:{m.line}  {reason}")
    return "\n".join(out)


# --------------------------------------------------------------------------- JUnit


def _x(text: str) -> str:
    """Text safe for XML 1.0 (characters it cannot hold are shown as #xNN)."""
    return _XML_INVALID.sub(lambda m: f"#x{ord(m.group()):02X}", text)


def _time(seconds: float) -> str:
    return f"{max(0.0, seconds):.3f}"


def _testcase(parent: Element, classname: str, m: MutantResult) -> None:
    case = SubElement(parent, "testcase", name=_x(f"{m.id} {m.operator} {m.file}:{m.line}"),
                      classname=_x(classname), time=_time(m.seconds))
    if m.status == Status.SURVIVED:
        failure = SubElement(case, "failure", type="survived",
                             message=_x(f"survived ({_label(m)}): {m.file}:{m.line}: {m.one_line_diff}"))
        failure.text = _x(f"{m.why}\n\n{m.diff}")
    elif m.status != Status.KILLED:
        reason = (m.reason or m.status.value).splitlines()[0]
        SubElement(case, "skipped", type=m.status.value, message=_x(f"{m.status.value}: {reason}"))
    else:
        out = SubElement(case, "system-out")
        out.text = _x(f"killed by: {', '.join(m.killed_by)}\n")


def junit(report: CiReport) -> str:
    """JUnit XML: one test case per mutant (see the module docstring)."""
    c = report.counts
    failures, skipped = c["survived"], c["valid"] - c["killed"] - c["survived"]
    total = _time(sum(m.seconds for m in report.mutants))
    root = Element("testsuites", name="hwtp ci", tests=str(c["valid"]), failures=str(failures), errors="0",
                   time=total)
    classname = f"hwtp.mutants.{report.design}"
    suite = SubElement(root, "testsuite", name=_x(classname), tests=str(c["valid"]), failures=str(failures),
                       errors="0", skipped=str(skipped), time=total,
                       timestamp=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                       hostname=_x(platform.node() or "localhost"))
    props = SubElement(suite, "properties")
    values = {"score": "" if report.score is None else f"{report.score:.6f}", "formula": report.formula,
              "min_score": "" if report.min_score is None else f"{report.min_score:g}",
              "gate": "passed" if report.gate_passed else "failed", "top": report.top,
              "seed": str(report.seed),
              **{f"count.{k}": str(v) for k, v in c.items()}}
    for name, value in values.items():
        SubElement(props, "property", name=name, value=_x(value))
    for m in report.mutants:
        _testcase(suite, classname, m)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + tostring(root, encoding="unicode") + "\n"


# --------------------------------------------------------------------------- Markdown


def _code(text: str) -> str:
    """Inline code that survives a Markdown table cell."""
    return "<code>" + html.escape(text, quote=False).replace("|", "&#124;") + "</code>"


def markdown(report: CiReport) -> str:
    """A summary for ``$GITHUB_STEP_SUMMARY`` (GitHub-flavoured Markdown)."""
    c = report.counts
    gate = ""
    if report.min_score is not None:
        gate = f" — gate {report.min_score:.0%}: " + ("✅ passed" if report.gate_passed else "❌ failed")
    lines = [f"## hwtp ci: mutation score {_percent(report.score)}{gate}", "",
             f"Design `{report.design}` (top `{report.top}`), tests: "
             + ", ".join(f"`{t}`" for t in report.test_modules) + ".", "",
             f"Score = {report.formula}" + (f" = {report.detected}/{c['scored']}." if c["scored"] else ".")
             + f" Timeouts and errors are indeterminate: neither killed nor survived (timeouts "
             f"{report.timeouts_as}).", "",
             "| killed | survived | timeout | error | equivalent | not elaborated | valid | rejected |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|",
             f"| {c['killed']} | {c['survived']} | {c['timeout']} | {c['error']} | {c['equivalent']} "
             f"| {c['not_elaborated']} | {c['valid']} | {c['rejected']} |", "",
             "Not scored: *equivalent* mutants (proved so) and *not elaborated* ones (in generate branches, "
             "loops or modules the configured parameters never elaborate).", ""]
    if report.since:
        lines += [f"Only lines changed since `{html.escape(report.since)}` were mutated.", ""]
    if report.baseline is not None:
        lines += [f"Baseline: {'; '.join(_baseline_lines(report))}", ""]
    if report.survivors:
        lines += [f"### Survivors ({len(report.survivors)})", "",
                  "A survivor is a change to the design that every test still passes. Diagnosis: *weak "
                  "stimulus* (no test made the mutated code compute a different value), *not propagated* "
                  "(it did, but no output differed from golden), *weak checking* (an output differed and "
                  "the tests passed).", "",
                  "| mutant | operator | location | golden → mutant | diagnosis |", "|---|---|---|---|---|"]
        for m in report.survivors:
            lines.append(f"| {m.id} | {_code(m.operator)} | {_code(f'{m.file}:{m.line}')} | "
                         f"{_code(m.golden_line)} → {_code(m.mutant_line)} | "
                         f"{html.escape(m.why, quote=False).replace('|', '&#124;')} |")
        fence = "````" if "```" in "".join(m.diff for m in report.survivors) else "```"
        lines += ["", "<details><summary>Diffs of the survivors</summary>", "", f"{fence}diff"]
        lines += [m.diff.rstrip("\n") for m in report.survivors]
        lines += [fence, "", "</details>", ""]
    odd = [m for m in report.mutants if m.status in INDETERMINATE]
    if odd:
        lines += [f"### Indeterminate ({len(odd)}, not counted)", "", "| mutant | status | location |",
                  "|---|---|---|"]
        lines += [f"| {m.id} | {m.status.value} | {_code(f'{m.file}:{m.line}')} |" for m in odd]
        lines.append("")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- lcov


def source_path(root: Path, rel: str, base: Path | None) -> str:
    full = (root / rel).resolve()
    if base is not None:
        try:
            return full.relative_to(base.resolve()).as_posix()
        except ValueError:
            pass
    return full.as_posix()


def lcov(report: CiReport, base: Path | None = None) -> str:
    """An lcov tracefile (see the module docstring). Paths are relative to ``base`` when inside it."""
    by_file: dict[str, dict[int, list[MutantResult]]] = defaultdict(lambda: defaultdict(list))
    for m in report.mutants:
        if m.status not in UNSCORED:
            by_file[m.file][m.line].append(m)
    out = []
    for rel in sorted(by_file):
        out += ["TN:hwtp_ci", f"SF:{source_path(report.root, rel, base)}"]
        lines = by_file[rel]
        branches = hit_branches = found = hit = 0
        for line in sorted(lines):
            for i, m in enumerate(lines[line]):
                taken = {Status.KILLED: "1", Status.SURVIVED: "0"}.get(m.status, "-")
                out.append(f"BRDA:{line},0,{i},{taken}")
                branches += 1
                hit_branches += taken == "1"
        out += [f"BRF:{branches}", f"BRH:{hit_branches}"]
        for line in sorted(lines):
            statuses = [m.status for m in lines[line]]
            if Status.SURVIVED in statuses:
                count = 0
            elif Status.KILLED in statuses:
                count = statuses.count(Status.KILLED)
            else:
                continue  # only indeterminate mutants here: say nothing about the line
            out.append(f"DA:{line},{count}")
            found += 1
            hit += count > 0
        out += [f"LF:{found}", f"LH:{hit}", "end_of_record"]
    return "\n".join(out) + ("\n" if out else "")


def json_report(report: CiReport) -> str:
    return json.dumps(report.as_dict(), indent=2) + "\n"


# --------------------------------------------------------------------------- GitHub annotations


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(report: CiReport, base: Path | None = None) -> str:
    """GitHub workflow commands: a warning per survivor at its file, line and column (paths
    relative to ``base``, the repository root, when inside it), its diff in the message.
    Survivors a baseline accepts are left out."""
    accepted = set(report.baseline.accepted) if report.baseline else set()
    out = []
    for m in report.survivors:
        if m.id in accepted:
            continue
        props = {"file": source_path(report.root, m.file, base), "line": str(m.line), "col": str(m.col),
                 "title": f"hwtp ci: surviving mutant {m.id} ({m.operator})"}
        head = ",".join(f"{k}={_escape_property(v)}" for k, v in props.items())
        message = f"No test fails when {m.golden_line!r} becomes {m.mutant_line!r}: {m.why}.\n{m.diff.rstrip()}"
        out.append(f"::warning {head}::{_escape_data(message)}")
    return "\n".join(out) + ("\n" if out else "")
