"""SARIF 2.1.0 of ``hwtp ci`` (``--sarif FILE``): survivors for code-scanning views.

One run of the tool ``hwtp ci``; one rule per mutation operator that has a survivor; one result
per survivor (level ``warning``, or ``note`` when a baseline accepts it), located at the
mutated text (file relative to the repository root, as ``uriBaseId`` ``%SRCROOT%``; line,
column, the line as snippet), its message naming the change and holding the unified diff
(``message.markdown`` and ``properties.diff``), and a ``partialFingerprints`` entry from the
survivor's stable identity (:mod:`hwtp.ci.baseline`), so code scanning follows a survivor across
commits as the baseline does. The score and its formula are run ``properties``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from hwtp.ci.mutation import CiReport
from hwtp.ci.reports import source_path

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
VERSION = "2.1.0"


def sarif(report: CiReport, base: Path | None = None) -> str:
    """The SARIF log of ``report`` (paths relative to ``base`` when inside it)."""
    accepted = set(report.baseline.accepted) if report.baseline else set()
    operators = sorted({m.operator for m in report.survivors})
    rules = [{"id": op, "name": op.replace(".", "_"),
              "shortDescription": {"text": f"A {op} mutant survives the tests"},
              "fullDescription": {"text": f"hwtp ci changed the design with the mutation operator {op} and "
                                          "every test still passed: a behaviour no test checks."},
              "defaultConfiguration": {"level": "warning"}} for op in operators]
    index = {op: i for i, op in enumerate(operators)}
    results: list[dict[str, Any]] = []
    for m in report.survivors:
        change = f"{m.golden_line} -> {m.mutant_line}"
        results.append({
            "ruleId": m.operator,
            "ruleIndex": index[m.operator],
            "level": "note" if m.id in accepted else "warning",
            "message": {
                "text": f"Surviving mutant {m.id}: no test fails when the line becomes `{m.mutant_line}` "
                        f"({change}). Diagnosis: {m.why}.",
                "markdown": f"Surviving mutant **{m.id}** ({m.operator}): no test fails on this change. "
                            f"Diagnosis: {m.why}.\n\n```diff\n{m.diff.rstrip()}\n```",
            },
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": source_path(report.root, m.file, base), "uriBaseId": "%SRCROOT%"},
                "region": {"startLine": m.line, "startColumn": max(1, m.col),
                           "snippet": {"text": m.golden_line}},
            }}],
            "partialFingerprints": {"hwtpMutant/v1": hashlib.sha256(m.key.encode()).hexdigest()},
            "properties": {"mutant": m.id, "original": m.original, "replacement": m.replacement,
                           "diff": m.diff, "accepted_by_baseline": m.id in accepted,
                           "diagnosis": m.diagnosis.value if m.diagnosis else None},
        })
    log = {
        "$schema": SCHEMA,
        "version": VERSION,
        "runs": [{
            "tool": {"driver": {"name": "hwtp ci", "rules": rules}},
            "results": results,
            "properties": {"design": report.design, "top": report.top, "score": report.score,
                           "formula": report.formula, "timeouts_as": report.timeouts_as,
                           "gate_passed": report.gate_passed, "counts": report.counts},
        }],
    }
    return json.dumps(log, indent=2) + "\n"
