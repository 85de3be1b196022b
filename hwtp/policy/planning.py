"""``hwtp plan``: ask a policy for G plans per state and write them where ``hwtp score`` reads them.

PLANDIR gets ``plans.jsonl`` (one record per (state, sample): the chat prompt exactly as
sent, the completion exactly as received, the plan id, and the metadata: policy, model,
parameters, token usage, latency, finish reason, the extraction error if any) and, for
people, ``<state>/sNN.txt`` (raw completion) and ``<state>/sNN.yaml`` (the extracted plan).

A sample the policy never produced (its endpoint failed after the retries) is not a sample:
it gets no record, only a :class:`SampleFailure`, so it is never scored or exported and a
rerun asks for it again. A completion cut off by ``max_tokens`` (``finish_reason: length``)
is a sample; when no plan can be extracted from it, its error says it was truncated.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from hwtp import yamlio
from hwtp.errors import PlanError, PolicyUnavailable
from hwtp.mutators.mutantset import GOLDEN, MutantSet
from hwtp.outputs import staged
from hwtp.plans.files import PLAN_INDEX, PlanRecord, plan_id
from hwtp.plans.format import extract_plan, to_data, validate
from hwtp.policy.policies import PlanRequest, Policy
from hwtp.policy.prompt import Templates, build_messages
from hwtp.yamlio import clean_text

#: Most plans per state (``-G``): GRPO groups are 2-64 samples; past this a run would hold
#: millions of records in memory before writing one.
MAX_SAMPLES = 1024

#: The error prefix of a truncated completion with no extractable plan.
TRUNCATED = "truncated (finish_reason=length)"


def state_requests(mutant_set: MutantSet, states: Sequence[str], templates: Templates) -> list[PlanRequest]:
    """The prompt of each state, built from its standalone RTL (never the schemata)."""
    design = mutant_set.design
    out = []
    for state in states:
        sources = design.sources if state == GOLDEN else mutant_set.sources_of(mutant_set.get(state))
        out.append(PlanRequest(state, build_messages(design, sources, templates)))
    return out


@dataclass(frozen=True)
class SampleFailure:
    """A (state, sample) the policy could not produce, and why."""

    state: str
    sample: int
    reason: str


def failure_reasons(failures: Sequence[SampleFailure]) -> str:
    """Why samples could not be produced: the most common reasons, with their counts."""
    reasons = Counter(f.reason for f in failures)
    if len(reasons) == 1:
        return next(iter(reasons))
    why = "; ".join(f"{reason} ({n} samples)" for reason, n in reasons.most_common(3))
    return why + (f"; and {len(reasons) - 3} other reasons" if len(reasons) > 3 else "")


def describe_failures(failures: Sequence[SampleFailure], asked: int) -> str:
    """One line: how many samples could not be produced and why."""
    return f"{len(failures)} of {asked} samples could not be produced: {failure_reasons(failures)}"


def plan_states(
    mutant_set: MutantSet,
    states: Sequence[str],
    samples: int,
    policy: Policy,
    templates: Templates,
    failures: list[SampleFailure] | None = None,
) -> list[PlanRecord]:
    """G samples for every state, each parsed and checked against the design's ports.

    Samples the policy could not produce get no record: they are appended to ``failures``,
    or, without that list, raise :class:`PolicyUnavailable`.
    """
    requests = state_requests(mutant_set, states, templates)
    generated = policy.generate(requests, samples)
    params = policy.parameters()
    design, hash_ = mutant_set.design.name, mutant_set.set_hash
    records = []
    missed: list[SampleFailure] = []
    for request, row in zip(requests, generated, strict=True):
        for g in row:
            if g.unavailable:
                missed.append(SampleFailure(request.state, g.index, g.error or "no completion"))
                continue
            if g.text is not None:
                g = replace(g, text=clean_text(g.text))
            error = g.error
            if error is None and g.text is not None:
                try:
                    validate(extract_plan(g.text, source=plan_id(request.state, g.index)), mutant_set.design)
                except PlanError as exc:
                    error = f"{TRUNCATED}: {exc}" if g.finish_reason == "length" else str(exc)
            records.append(
                PlanRecord(
                    plan_id(request.state, g.index),
                    request.state,
                    g.index,
                    policy.name,
                    params,
                    request.messages,
                    g,
                    error,
                    design,
                    hash_,
                )
            )
    if missed and failures is None:
        raise PolicyUnavailable(describe_failures(missed, len(requests) * samples))
    if failures is not None:
        failures.extend(missed)
    return records


def write_plans(records: Sequence[PlanRecord], outdir: Path, per_state_files: bool = True) -> Path:
    """Write plans.jsonl and (unless ``per_state_files`` is False) the per-state files for
    people; returns the index path."""
    index = outdir / PLAN_INDEX
    with staged(sync=False) as files:  # a failed write (a full disk) names its file and leaves none half written
        outdir.mkdir(parents=True, exist_ok=True)
        for r in records if per_state_files else ():
            folder = outdir / r.state
            folder.mkdir(exist_ok=True)
            if r.generated.text is not None:
                files.write_text(folder / f"s{r.sample:02d}.txt", r.generated.text)
                if r.error is None:
                    plan = extract_plan(r.generated.text)
                    files.write_text(folder / f"s{r.sample:02d}.yaml", yamlio.dump(to_data(plan)))
        files.write_text(index, "".join(json.dumps(r.as_json()) + "\n" for r in records))
    return index
