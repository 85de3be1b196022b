"""Completion text cleanup shared by every adapter: the response, never the prompt.

Trainers hand over the response alone (TRL, verl) or the prompt and the response in one
string with special tokens kept (OpenRLHF). :func:`response_text` cuts the prompt when it
is there and the end-of-sequence tokens that trail the answer; :func:`strip_examples`
removes the example plan that hwtp's own prompt prints (``hwtp/policy/templates/format.md``, or a
custom template's example when the prompt is given), and :func:`is_example` refuses a plan
equal to it: echoing the prompt is never a plan. Completions are data: they are only cut,
searched and parsed, never executed or interpolated.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from hwtp import yamlio
from hwtp.errors import PlanError
from hwtp.plans import fastread
from hwtp.plans.format import Plan, TestCase, plan_from_data
from hwtp.policy.prompt import Templates

# Special tokens that end a turn or a sequence: <|im_end|>, <|eot_id|>, <|endoftext|>, <|end|>...,
# </s>, <eos>, <end_of_turn>, <pad>, DeepSeek's <｜end▁of▁sentence｜>; only trailing ones are cut.
_LAST_SPECIAL = re.compile(
    r"(?:<\|[A-Za-z0-9_.:-]{1,40}\|>|</s>|<eos>|<pad>|<end_of_turn>|<｜[^<>｜]{1,40}｜>|\[/?INST\])\Z"
)
_SPECIAL_MAX = 44  # the longest token's length
# Where an assistant turn starts in chat-template text, used when the prompt is not a prefix.
_ASSISTANT_START = re.compile(
    r"<\|im_start\|>assistant[^\n]*\n|<\|start_header_id\|>assistant<\|end_header_id\|>\s*"
    r"|<\|assistant\|>\s*|<start_of_turn>model\s*|<｜Assistant｜>|\[/INST\]"
)
_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_+-]*[^\n]*\n(.*?)```", re.DOTALL)
_TAIL_LENGTHS = (256, 96, 48)


def message_text(value: Any) -> str:
    """Text of a completion or prompt as trainers pass it: a string, a message, or a list of
    messages (the assistant's content for a completion; a message's content may be a list of
    ``{"type": "text", "text": ...}`` parts)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        content = value.get("content")
        if isinstance(content, list):
            return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
        return "" if content is None else str(content)
    if isinstance(value, Sequence):
        return "\n".join(message_text(m) for m in value)
    return str(value)


def completion_text(completion: Any) -> str:
    """The response of a TRL completion: plain text, or the assistant messages' content."""
    if isinstance(completion, Sequence) and not isinstance(completion, str):
        messages = [m for m in completion if isinstance(m, Mapping)]
        assistant = [m for m in messages if m.get("role", "assistant") == "assistant"]
        return "\n".join(message_text(m) for m in (assistant or messages))
    return message_text(completion)


def strip_trailing_special(text: str) -> str:
    """``text`` without the whitespace and special tokens it ends with. Peeled from the end one
    token at a time (a token's end fixes where it starts), which is what one regular expression
    anchored at the end would cut, without trying every position of the text."""
    while True:
        text = text.rstrip()
        token = _LAST_SPECIAL.search(text, max(0, len(text) - _SPECIAL_MAX))
        if token is None:
            return text
        text = text[: token.start()]


def cut_prompt(text: str, prompt: str | None) -> str:
    """``text`` without the prompt it starts with. When the prompt is not an exact prefix
    (a decode round trip changed it), cut after the first place the prompt's end occurs, else
    after the first assistant-turn marker; text that shows no prompt is returned unchanged."""
    if not prompt:
        return text
    if text.startswith(prompt):
        return text[len(prompt) :]
    stripped = prompt.rstrip()
    for n in _TAIL_LENGTHS:
        # only tails long enough to be the prompt's own text: a short prompt's last characters
        # ("x") would be found inside the response ("expect")
        tail = stripped[-n:] if len(stripped) >= min(_TAIL_LENGTHS) else ""
        if tail:
            at = text.find(tail)
            if at >= 0:
                rest = text[at + len(tail) :]
                spaces = prompt[len(stripped) :]  # the prompt's own trailing whitespace
                return rest[len(spaces) :] if spaces and rest.startswith(spaces) else rest
    marker = _ASSISTANT_START.search(text)
    return text[marker.end() :] if marker else text


@functools.lru_cache(maxsize=1)
def _builtin_format() -> str:
    return Templates.load().format


def _fenced_plans(text: str) -> tuple[tuple[str, ...], tuple[Plan, ...]]:
    """Fenced blocks of ``text`` that hold a plan: their bodies and the parsed plans."""
    bodies, plans = [], []
    for m in _FENCE.finditer(text):
        body = m.group(1)
        try:
            located = yamlio.load(body)
        except yamlio.YamlLoadError:
            continue
        if not isinstance(located.data, dict) or "tests" not in located.data:
            continue
        try:
            plans.append(plan_from_data(located, "example"))
        except PlanError:
            continue
        bodies.append(body)
    return tuple(bodies), tuple(plans)


@functools.lru_cache(maxsize=256)
def examples(prompt: str | None = None) -> tuple[tuple[str, ...], tuple[tuple[TestCase, ...], ...]]:
    """Texts to remove from a completion and example plans' tests to refuse: hwtp's built-in
    format example, plus the plan examples printed in ``prompt`` (a custom template's)."""
    fmt = _builtin_format()
    texts, plans = _fenced_plans(fmt)
    removals = [fmt, *texts]
    tests = [p.tests for p in plans]
    if prompt:
        extra_texts, extra_plans = _fenced_plans(prompt)
        removals += [t for t in extra_texts if t.strip()]
        tests += [p.tests for p in extra_plans]
    ordered = sorted(set(removals), key=len, reverse=True)  # the whole format text before its parts
    return tuple(ordered), tuple(dict.fromkeys(tests))


#: Characters that plans and prose seldom hold, rarest first: an example text holding one is
#: looked for only in a completion that holds it too (a scan of one character, not of the text).
_RARE = "`~^$@|#"


@functools.lru_cache(maxsize=256)
def _removals(prompt: str | None) -> tuple[tuple[str, str], ...]:
    """The texts :func:`strip_examples` removes, each with the rarest of :data:`_RARE` it
    holds ("" when none): a completion without that character cannot hold the text."""
    return tuple((text, next((c for c in _RARE if c in text), "")) for text in examples(prompt)[0])


def strip_examples(text: str, prompt: str | None = None) -> str:
    for example, rare in _removals(prompt):
        if rare in text and example in text:
            text = text.replace(example, "")
    return text


@functools.lru_cache(maxsize=256)
def example_keys(prompt: str | None = None) -> frozenset[str]:
    """The :func:`hwtp.plans.fastread.plan_key` of each example plan of the prompt (:func:`examples`)."""
    return fastread.example_keys(examples(prompt)[1])


def is_example(plan: Plan, prompt: str | None = None) -> bool:
    """Whether ``plan`` is an example plan of the prompt (same tests, whatever the reasoning)."""
    return plan.tests in examples(prompt)[1]


def response_text(completion: str, prompt: str | None = None) -> str:
    """The response part of ``completion``: the prompt cut, trailing special tokens dropped,
    hwtp's prompt examples removed."""
    text = strip_trailing_special(cut_prompt(completion, prompt))
    return strip_examples(text, prompt)
