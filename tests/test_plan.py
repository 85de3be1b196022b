"""Plan format v1: parsing, validation against ports, LLM-text extraction, the schema."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwtp.errors import PlanError
from hwtp.plans import format as format_module
from hwtp.plans.format import extract_plan, json_schema, load_plan_file, parse_plan, to_data, validate
from hwtp.rtl.design import Design, load_design

GOOD = """\
reasoning: count five enabled cycles
tests:
  - name: counts
    description: five enabled cycles give 5
    steps:
      - drive: {en: 1}
      - wait: 5
      - expect: {q: 5, tc: 0}
"""


@pytest.fixture(scope="module")
def counter(request: pytest.FixtureRequest) -> Design:
    return load_design(Path(__file__).parent / "data" / "counter.v")


def test_parses_the_design_md_example(counter: Design) -> None:
    plan = parse_plan(GOOD)
    validate(plan, counter)
    assert [s.kind for s in plan.tests[0].steps] == ["drive", "wait", "expect"]
    assert plan.reasoning == "count five enabled cycles"
    assert plan.cycles == 5


def test_json_equivalent_parses_to_the_same_plan() -> None:
    data = {"tests": [{"name": "t", "steps": [{"drive": {"en": 1}}, {"wait": 2}, {"expect": {"q": "8'h02"}}]}]}
    assert (
        parse_plan(json.dumps(data)).tests
        == parse_plan('tests:\n- name: t\n  steps:\n  - drive: {en: 1}\n  - wait: 2\n  - expect: {q: "8\'h02"}\n').tests
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("tests: [\n  - name: x", "not valid YAML/JSON"),
        ("reasoning: hi\n", "has no tests"),
        ("tests: []\n", "has no tests"),
        ("tests:\n  - name: t\n    steps: []\n", "steps must be a non-empty list"),
        ("tests:\n  - name: 't-1'\n    steps: [{wait: 1}]\n", "name must be an identifier"),
        ("tests:\n  - name: t\n    steps:\n      - jump: 3\n", "unknown step 'jump'"),
        ("tests:\n  - name: t\n    steps:\n      - wait: 0\n", "expected a cycle count"),
        ("tests:\n  - name: t\n    steps:\n      - drive: {en: 1}\n        wait: 1\n", "exactly one of"),
        ('tests:\n  - name: t\n    steps:\n      - drive: {en: "4\'b1x"}\n', "cannot drive x"),
        ("tests:\n  - name: t\n    steps:\n      - expect: {q: banana}\n", "not a number or Verilog literal"),
        ("tests:\n  - {name: t, steps: [{wait: 1}]}\n  - {name: t, steps: [{wait: 1}]}\n", "duplicate test name"),
    ],
)
def test_structural_errors_name_the_problem(text: str, needle: str) -> None:
    with pytest.raises(PlanError, match=needle):
        parse_plan(text, source="p.yaml")


def test_errors_name_file_line_test_step_and_port(counter: Design) -> None:
    text = GOOD.replace("expect: {q: 5, tc: 0}", "expect: {qq: 5}")
    with pytest.raises(PlanError) as info:
        validate(parse_plan(text, source="p.yaml"), counter)
    message = str(info.value)
    assert message.startswith("p.yaml:8: test 'counts' step 3 (expect): unknown port 'qq'")
    assert "valid: q, tc" in message


@pytest.mark.parametrize(
    ("step", "needle"),
    [
        ("drive: {q: 1}", "port 'q' is an output; only inputs can be driven"),
        ("expect: {en: 1}", "port 'en' is an input; only outputs can be expected"),
        ("expect: {q: 256}", "needs 9 bits, wider than the 8-bit port"),
        ('expect: {q: "9\'h0"}', "9-bit literal, wider than the 8-bit port"),
        ("drive: {en: 2}", "wider than the 1-bit port"),
        ("expect: {q: -1}", "negative but the 8-bit port is unsigned"),
        ("drive: {clk: 1}", "is the clock"),
        ("drive: {rst_n: 0}", "use a 'reset: N' step"),
        ("drive: {nope: 0}", "unknown port 'nope' (valid: en)"),
    ],
)
def test_port_errors(counter: Design, step: str, needle: str) -> None:
    plan = parse_plan(f"tests:\n  - name: t\n    steps:\n      - {step}\n", source="p.yaml")
    with pytest.raises(PlanError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        validate(plan, counter)


def test_reset_step_needs_a_design_with_reset(data_dir: Path) -> None:
    comb = load_design(data_dir / "mux.sv", top="mux_reg")
    from dataclasses import replace

    no_reset = replace(comb, reset=None)
    with pytest.raises(PlanError, match="has no reset"):
        validate(parse_plan("tests:\n- name: t\n  steps: [{reset: 2}]\n"), no_reset)


def test_big_file_refused_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("tests:\n" + "#" * (5 * 1024 * 1024))
    start = time.perf_counter()
    with pytest.raises(PlanError, match="larger than"):
        load_plan_file(big)
    assert time.perf_counter() - start < 1.0


def test_alias_bomb_refused_quickly() -> None:
    levels = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 10):
        prev = chr(ord("a") + i - 1)
        cur = chr(ord("a") + i)
        levels.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    bomb = "\n".join(levels) + "\ntests: *j\n"
    start = time.perf_counter()
    with pytest.raises(PlanError, match="aliases"):
        parse_plan(bomb)
    assert time.perf_counter() - start < 0.5


def test_yaml_tags_are_refused() -> None:
    with pytest.raises(PlanError, match=r"tag"):
        parse_plan("tests: !!python/object:os.system {}\n")


def test_port_names_that_yaml_would_read_as_booleans() -> None:
    plan = parse_plan("tests:\n- name: t\n  steps:\n  - drive: {on: 1, y: 0, off: 1}\n")
    assert [name for name, _ in plan.tests[0].steps[0].values] == ["on", "y", "off"]


@pytest.mark.parametrize(
    "wrapper",
    [
        "{plan}",
        "Here is my plan:\n```yaml\n{plan}```\nIt covers the counter.",
        "<think>\nThe counter counts. tests: maybe\n</think>\n```\n{plan}```",
        "<think>I think `{{not: a plan}}`</think>\nSure! Below is the plan.\n\n{plan}",
        "Reasoning first.\n```json\n{json}\n```",
        "```yaml\nnot: the plan\n```\nfinal:\n```yaml\n{plan}```",
    ],
)
def test_extracts_plan_from_llm_text(wrapper: str) -> None:
    as_json = json.dumps(to_data(parse_plan(GOOD)))
    text = wrapper.format(plan=GOOD, json=as_json)
    plan = extract_plan(text)
    assert plan.tests == parse_plan(GOOD).tests


@pytest.mark.parametrize("text", ["", "I cannot help with that.", "```python\nprint('hi')\n```", "<think>tests: 1"])
def test_no_plan_found_is_a_plan_error(text: str) -> None:
    with pytest.raises(PlanError, match=r"no plan found|has no tests"):
        extract_plan(text)


# The regular expressions the literal scanners in hwtp.plans.format replace (slow on long
# reasoning: a lazy match tries the closing tag at every character): their results must agree.
_THINK_ORACLE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE_ORACLE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
# text made of the pieces that matter (tags in mixed case, backticks, newlines) and some filler
_LLM_PIECES = st.lists(
    st.sampled_from(["<think>", "</think>", "<THINK>", "</Think>", "<", "</", "`", "```", "```yaml", "\n", "a", " \t"])
    | st.text(max_size=3),
    max_size=16,
).map("".join)


@settings(max_examples=1000, deadline=None)
@given(_LLM_PIECES)
def test_thinking_and_fences_are_found_as_the_regular_expressions_find_them(text: str) -> None:
    assert format_module._without_thinking(text) == _THINK_ORACLE.sub("", text)
    assert format_module._fences(text) == [m.group(2) for m in _FENCE_ORACLE.finditer(text)]


def test_long_reasoning_is_removed_before_the_fenced_plan() -> None:
    text = "<think>" + "the counter wraps at 15; `en` gates it. " * 500 + "</THINK>\n```yaml\n" + GOOD + "```\n"
    assert extract_plan(text).tests == parse_plan(GOOD).tests


def test_truncated_plan_is_invalid_with_reason() -> None:
    with pytest.raises(PlanError):
        extract_plan("```yaml\n" + GOOD[:-12])


def test_schema_accepts_the_example_and_is_json() -> None:
    schema = json_schema()
    assert schema["required"] == ["tests"]
    step_kinds = [
        next(iter(s["properties"]))
        for s in schema["properties"]["tests"]["items"]["properties"]["steps"]["items"]["oneOf"]
    ]
    assert step_kinds == ["drive", "expect", "wait", "reset"]
    json.dumps(schema)


def test_round_trip_through_to_data() -> None:
    text = GOOD.replace("tc: 0", 'tc: "1\'bx"')
    plan = parse_plan(text)
    again = parse_plan(json.dumps(to_data(plan)))
    assert again.tests == plan.tests
