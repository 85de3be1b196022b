"""How far a mutant got with some tests or plans: activated, propagated, detected; why a survivor survived.

For each (test or plan, mutant) an observed simulation records whether a probe of the mutant
fired (the mutated code computed a value golden's would not have: :mod:`hwtp.mutators.probes`),
whether an output port differed from golden's in the same test, and when and on which port
first; the test's own result says whether it detected the mutant. A survivor then gets one
:class:`Diagnosis`:

- ``weak_stimulus``: no test activated it (its code never computed a different value);
- ``not_propagated``: some test activated it, but no output differed from golden's in any test
  (the stimulus did not carry the difference to an output, or the design hides it);
- ``weak_checking``: an output differed from golden's in some test, and every test passed;
- ``unknown``: activation or propagation was not measured (see :class:`Observation`).

``hwtp ci`` reads observations of a user's cocotb tests (:mod:`hwtp.ci.diagnosis`), ``hwtp score
--diagnose`` those of plans (:func:`hwtp.scoring.score.stages`); both summarize them here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Reached(str, Enum):
    """How far a mutant got with the tests: the furthest of the three it reached."""

    DETECTED = "detected"  # a test failed
    PROPAGATED = "propagated"  # an output differed from golden's
    ACTIVATED = "activated"  # its code computed a different value
    NONE = "none"  # never activated
    UNKNOWN = "unknown"  # not measured


class Diagnosis(str, Enum):
    """Why a survivor survived."""

    WEAK_STIMULUS = "weak_stimulus"
    NOT_PROPAGATED = "not_propagated"
    WEAK_CHECKING = "weak_checking"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Observation:
    """One test on one mutant. ``None``: not measured (no probe for this mutant's code, or no
    golden record to compare with); times are ns since the test's start."""

    test: str  # module.name
    activated: bool | None = None
    activated_ns: float | None = None
    propagated: bool | None = None
    propagated_ns: float | None = None
    signal: str | None = None  # the first output port that differed
    detected: bool = False  # the test failed

    def as_dict(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "activated": self.activated,
            "activated_ns": self.activated_ns,
            "propagated": self.propagated,
            "propagated_ns": self.propagated_ns,
            "signal": self.signal,
            "detected": self.detected,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Observation:
        return cls(
            str(d["test"]),
            d.get("activated"),
            d.get("activated_ns"),
            d.get("propagated"),
            d.get("propagated_ns"),
            d.get("signal"),
            bool(d.get("detected", False)),
        )


def _any(values: Sequence[bool | None]) -> bool | None:
    if any(v is True for v in values):
        return True
    if values and all(v is False for v in values):
        return False
    return None


@dataclass(frozen=True)
class Summary:
    """A mutant over all its tests."""

    activated: bool | None
    propagated: bool | None
    detected: bool
    first_activation: Observation | None  # the first test (in run order) that activated it
    first_propagation: Observation | None  # the first test in which an output differed

    @property
    def reached(self) -> Reached:
        if self.detected:
            return Reached.DETECTED
        if self.propagated:
            return Reached.PROPAGATED
        if self.activated:
            return Reached.ACTIVATED
        return Reached.NONE if self.activated is False else Reached.UNKNOWN

    @property
    def diagnosis(self) -> Diagnosis:
        """Why it survived (meaningful for a survivor: nothing detected it)."""
        if self.propagated:
            return Diagnosis.WEAK_CHECKING
        if self.activated is False:
            return Diagnosis.WEAK_STIMULUS
        if self.activated and self.propagated is False:
            return Diagnosis.NOT_PROPAGATED
        return Diagnosis.UNKNOWN


def summarize(observations: Sequence[Observation], detected: bool) -> Summary:
    """A mutant's summary from its tests' observations. An output that differed implies the code
    was activated (whatever the probe said)."""
    propagated = _any([o.propagated for o in observations])
    activated = _any([True if o.propagated else o.activated for o in observations])
    first_a = next((o for o in observations if o.activated), None)
    first_p = next((o for o in observations if o.propagated), None)
    return Summary(activated, propagated, detected, first_a, first_p)


#: Short labels (terminal table, JUnit message).
LABELS = {
    Diagnosis.WEAK_STIMULUS: "weak stimulus",
    Diagnosis.NOT_PROPAGATED: "not propagated",
    Diagnosis.WEAK_CHECKING: "weak checking",
    Diagnosis.UNKNOWN: "unknown",
}


def _at(ns: float | None, test: str) -> str:
    return f"at {ns:g} ns of {test}" if ns is not None else f"in {test}"


def explain(summary: Summary | None, probe: str | None = None, unprobed: str | None = None) -> str:
    """One sentence on why a survivor survived, with the first time and signal where known
    (``probe``: how its activation was measured, :class:`hwtp.mutators.probes.Coverage`)."""
    if summary is None:
        return "unknown: the tests were not observed (diagnose: false, or the probed build failed)"
    diagnosis = summary.diagnosis
    activation = summary.first_activation
    what = "its statement first ran" if probe == "reached" else "its code first computed a different value"
    activated = (
        f"{what} {_at(activation.activated_ns, activation.test)}"
        if activation is not None and activation.activated
        else ""
    )
    if diagnosis == Diagnosis.WEAK_CHECKING:
        first = summary.first_propagation
        assert first is not None
        return (
            f"weak checking: output {first.signal} first differed from golden "
            f"{_at(first.propagated_ns, first.test)} and every test passed" + (f" ({activated})" if activated else "")
        )
    if diagnosis == Diagnosis.NOT_PROPAGATED:
        return (
            f"not propagated to an output: {activated or 'its code computed a different value'}, but no output "
            "differed from golden in any test (weak stimulus or observability)"
        )
    if diagnosis == Diagnosis.WEAK_STIMULUS:
        return (
            "weak stimulus: no test ran its statement"
            if probe == "reached"
            else "weak stimulus: no test made its code compute a different value"
        )
    if summary.activated and summary.propagated is None:
        return f"unknown: {activated or 'activated'}, but its outputs could not be compared with golden's"
    return f"unknown: {unprobed}" if unprobed else "unknown: activation was not measured"


def fields(summary: Summary | None, detected: bool, observations: Sequence[Observation]) -> dict[str, Any]:
    """The JSON fields of a (test or plan, mutant) pair's three stages (docs/formats.md)."""
    out: dict[str, Any] = {
        "activated": summary.activated if summary else None,
        "propagated": summary.propagated if summary else None,
        "detected": detected,
        "first_activation": None,
        "first_propagation": None,
        "tests": [o.as_dict() for o in observations],
    }
    if summary and summary.first_activation and summary.first_activation.activated:
        first = summary.first_activation
        out["first_activation"] = {"test": first.test, "time_ns": first.activated_ns}
    if summary and summary.first_propagation:
        first = summary.first_propagation
        out["first_propagation"] = {"test": first.test, "time_ns": first.propagated_ns, "signal": first.signal}
    return out
