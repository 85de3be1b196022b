"""hwtp.plans.fastread: the fast plan reader gives what the old path gives, byte for byte.

A reward is a function of what :func:`hwtp.scoring.score.prepare` makes of a completion: its plan
id (which completions simulate together) and either its error message or its harness ops
and cycles (simulated on the states, then :func:`hwtp.scoring.score.assemble`). So every completion
of a large seeded random corpus (valid plans written many ways, near-valid ones, YAML 1.1
edge scalars, tags, anchors, duplicate keys, several documents, JSON, fenced blocks, prose,
garbage) is read twice, by the old path (``_plan_input`` without a reader: hwtp.yamlio and
hwtp.plans.format) and with the reader, and the id, the error and the compiled ops must be equal.
"""

from __future__ import annotations

import functools
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hwtp.plans import fastread
from hwtp.plans.format import CYCLE_LIMIT
from hwtp.rewards import core
from hwtp.rewards.completion import _builtin_format, response_text, strip_trailing_special
from hwtp.rtl.design import Design, load_design
from hwtp.scoring.score import compile_input

pytest.importorskip("ryml")
pytest.importorskip("orjson")

CASES = 2500  # per design and seed: 10,000 completions in all


class Raw(str):
    """A scalar written into the YAML text exactly as it is."""


EDGE = [
    "yes", "no", "on", "off", "y", "n", "Y", "N", "Yes", "NO", "On", "OFF", "true", "True", "FALSE", "false",
    "~", "null", "Null", "NULL", "", ".inf", "-.inf", ".NaN", ".nan", "0o17", "017", "0017", "08", "09", "0x1F",
    "-0x1f", "0b101", "-0b11", "1_000", "1__0", "_1", "1:30", "190:20:30", "-1:30", "1:61", "1e5", "1.0e+5", "1.5",
    "1.", ".5", "+5", "-0", "+0", "0", "00", "2001-12-14", "2001-12-14 21:59:43.10 -5", "=", "<<", "!!str 5",
    "!!int '7'", "!!bool yes", "&a 5", "*a", "!foo 3", "'5'", '"0x10"', "'yes'", '"on"', "8'hff", "4'b1x0x",
    "'8''hff'", '"8\'hff"', "x", "?", "'?'", "z", "3'b1_1_1", "|\n        5", ">-\n        7", "[1]", "{}", "[]",
    "12345678901234567890123", "-12", "255", "256", "'0x_f'", "0x_f", "1_2_3", "0b", "0x", "- 1", "5 # comment",
    "'caf\u00e9'", "\u00e9", "a\\nb", '"a\\x41"', '"\\u0041"', "0o", "1 2", "  7", "7  ", "'  7 '",
]  # fmt: skip
PROSE = [
    "Here is the plan.", "I think the tests should cover the load path!", "Note: *important*", "yes", "on",
    "The design has tests: none yet.", "tests", "Answer:", "```", "{not json}", "a & b", "50% done", "@here",
    "reasoning: first", "- item", "---", "...", "`code`", "\t tabbed", "caf\u00e9 \u2028 line", "\\escaped",
]  # fmt: skip
SPECIALS = [
    "<|im_end|>",
    "<|endoftext|>",
    "</s>",
    "<eos>",
    "<pad>",
    "<end_of_turn>",
    "<｜end▁of▁sentence｜>",
    "[/INST]",
]


def _value(rng: random.Random, width: int, expect: bool) -> Any:
    pick = rng.random()
    if pick < 0.5:
        return rng.randrange(0, 1 << width)
    if pick < 0.6:
        return Raw(f"0x{rng.randrange(0, 1 << width):x}")
    if pick < 0.7:
        return f"{width}'h{rng.randrange(0, 1 << width):x}"
    if pick < 0.75 and expect:
        return f"{width}'b" + "".join(rng.choice("01x") for _ in range(width))
    if pick < 0.8:
        return Raw(f"{rng.randrange(0, 1 << width):_d}")
    if pick < 0.85:
        return rng.choice([True, False, -1, 1 << width, f"{rng.randrange(0, 1 << width)}", 0, 1])
    return Raw(rng.choice(EDGE)) if rng.random() < 0.2 else rng.randrange(0, 1 << width)


def _plan(rng: random.Random, design: Design) -> dict[str, Any]:
    drive = [p for p in design.inputs if p.name not in design.control_ports]
    outputs = list(design.outputs)
    tests = []
    for t in range(rng.choice([1, 1, 2, 3])):
        steps: list[Any] = []
        for _ in range(rng.randint(1, 14)):
            kind = rng.choice(["drive", "drive", "expect", "expect", "wait", "wait", "reset"])
            if kind == "reset" and design.reset is None and rng.random() < 0.9:
                kind = "wait"
            if kind in ("wait", "reset"):
                steps.append({kind: rng.choice([1, 1, 2, 3, 5, 16])})
                continue
            ports = drive if kind == "drive" else outputs
            chosen = rng.sample(ports, rng.randint(1, len(ports)))
            steps.append({kind: {p.name: _value(rng, p.width, kind == "expect") for p in chosen}})
        test: dict[str, Any] = {"name": rng.choice([f"t{t}", f"check_{t}", "load_path", "_x"])}
        if rng.random() < 0.5:
            test["description"] = rng.choice(["drives and checks", "the counter loads", "caf\u00e9 check", ""])
        test["steps"] = steps
        tests.append(test)
    plan: dict[str, Any] = {}
    if rng.random() < 0.3:
        plan["reasoning"] = rng.choice(["check the enable", "line one\nline two\n", "yes", "a: b"])
    plan["tests"] = tests
    return plan


def _scalar(rng: random.Random, value: Any, indent: str) -> str:
    if isinstance(value, Raw):
        return str(value).replace("\n", "\n" + indent) if "\n" in value else str(value)
    if isinstance(value, bool):
        return rng.choice(["true", "false"]) if rng.random() < 0.1 else ("true" if value else "false")
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if "\n" in text:
        return "|\n" + "".join(f"{indent}  {line}\n" for line in text.splitlines()).rstrip("\n")
    style = rng.random()
    if style < 0.4 and re.fullmatch(r"[A-Za-z_][\w' ]*", text) and not text.endswith(" "):
        return text
    if style < 0.7:
        return "'" + text.replace("'", "''") + "'"
    return json.dumps(text)


def _yaml(rng: random.Random, value: Any, indent: str = "") -> str:
    """Block YAML of ``value`` written with random styles (flow maps, comments, indentation)."""
    step = rng.choice(["  ", "  ", "    "])
    if isinstance(value, dict):
        if value and all(not isinstance(v, (dict, list)) for v in value.values()) and rng.random() < 0.4:
            body = ", ".join(f"{k}: {_scalar(rng, v, indent)}" for k, v in value.items())
            return "{" + body + "}"
        lines = []
        for k, v in value.items():
            comment = "  # note" if rng.random() < 0.05 else ""
            inner = _yaml(rng, v, indent + step) if isinstance(v, (dict, list)) and v else ""
            if inner and not inner.startswith("{"):
                lines.append(f"{indent}{k}:{comment}\n{inner}")
            elif inner:
                lines.append(f"{indent}{k}: {inner}{comment}")
            else:
                lines.append(f"{indent}{k}: {_yaml(rng, v, indent + step)}{comment}")
        return "\n".join(lines)
    if isinstance(value, list):
        if not value:
            return "[]"
        inner = indent
        out = []
        for item in value:
            if isinstance(item, dict) and item:
                text = _yaml(rng, item, inner + "  ")
                out.append(f"{inner}- {text.lstrip()}" if not text.startswith("{") else f"{inner}- {text}")
            else:
                out.append(f"{inner}- {_yaml(rng, item, inner + '  ')}")
        return "\n".join(out)
    return _scalar(rng, value, indent)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return str(value) if isinstance(value, Raw) else value


def _mutate_data(rng: random.Random, plan: dict[str, Any], design: Design) -> None:
    test = rng.choice(plan["tests"])
    pick = rng.random()
    if pick < 0.15:
        test["name"] = Raw(rng.choice(EDGE))
    elif pick < 0.25:
        test[rng.choice(["extra", "steps", "description"])] = Raw(rng.choice(EDGE))
    elif pick < 0.35:
        plan[rng.choice(["format", "reasoning", "other"])] = Raw(rng.choice(EDGE))
    elif pick < 0.45:
        test["steps"].append({rng.choice(["wait", "reset", "sample", "drive", "expect"]): Raw(rng.choice(EDGE))})
    elif pick < 0.55:
        test["steps"].append({"wait": rng.choice([0, CYCLE_LIMIT, CYCLE_LIMIT + 1, -1, 2**70])})
    elif pick < 0.65:
        step = rng.choice(test["steps"])
        kind = next(iter(step))
        if isinstance(step[kind], dict):
            step[kind][rng.choice(["nope", "clk", "rst", *(p.name for p in design.ports)])] = _value(rng, 4, True)
    elif pick < 0.75:
        plan["tests"].append(dict(test))  # a duplicate name
    else:
        test["steps"].append({"wait": 1, "expect": {"q": 1}})


def _mutate_text(rng: random.Random, text: str) -> str:
    pick = rng.random()
    if pick < 0.2 and text:
        at = rng.randrange(len(text))
        return text[:at] + text[at + rng.randint(1, 4) :]
    if pick < 0.4:
        at = rng.randrange(len(text) + 1)
        return (
            text[:at]
            + rng.choice([":", "-", " ", "\t", "\n", "{", "[", "'", '"', "#", "&", "*", "!", "\\"])
            + text[at:]
        )
    if pick < 0.5:
        return rng.choice(["---\n", "%YAML 1.1\n---\n", "\ufeff", "--- !!map\n"]) + text
    if pick < 0.6:
        return text + rng.choice(["\n---\ntests: []\n", "\n...\n", "\n- extra\n", "\ntests: again\n"])
    if pick < 0.7:
        return text.replace("\n", rng.choice(["\r\n", "\x85", "\n\n", "\n  "]))
    if pick < 0.8:
        lines = text.split("\n")
        k = rng.randrange(len(lines))
        lines.insert(k, lines[k])  # a duplicate key or item
        return "\n".join(lines)
    if pick < 0.9:
        return text.replace("  ", "\t", 1)
    return text.replace("tests", rng.choice(["'tests'", '"tests"', '"te\\x73ts"', "Tests"]), 1)


def _wrap(rng: random.Random, body: str, lang: str) -> str:
    pick = rng.random()
    if pick < 0.25:
        text = body
    elif pick < 0.7:
        fence = rng.choice([lang, "", "yml", "text"])
        text = f"{rng.choice(PROSE)}\n\n```{fence}\n{body}\n```\n{rng.choice(PROSE) if rng.random() < 0.5 else ''}"
    elif pick < 0.8:
        text = f"<think>{rng.choice(PROSE)}\ntests:\n- x\n</think>\n{body}"
    elif pick < 0.9:
        text = f"```yaml\n{_builtin_format().split('```yaml')[-1].split('```')[0]}```\nmine:\n```\n{body}\n```"
    else:
        text = f"{rng.choice(PROSE)} {body}"
    if rng.random() < 0.2:
        text += "".join(rng.choice([*SPECIALS, "\n", " "]) for _ in range(rng.randint(1, 4)))
    return text


def _garbage(rng: random.Random) -> str:
    pick = rng.random()
    if pick < 0.3:
        return "".join(rng.choice("abc tests:-{}[]'\"\n#&*!yes0x1") for _ in range(rng.randint(0, 200)))
    if pick < 0.5:
        return " ".join(rng.choice(PROSE) for _ in range(rng.randint(1, 8)))
    if pick < 0.6:
        return "tests:\n" + "- " * rng.randint(1, 40) + "x"
    if pick < 0.7:
        return '{"tests": [' * rng.randint(1, 300)
    if pick < 0.8:
        return "tests: [\ud800]"
    if pick < 0.9:
        return _builtin_format()  # the prompt's own example, echoed
    return "".join(chr(rng.randrange(0, 0x3000)) for _ in range(rng.randint(1, 80)))


def completion(rng: random.Random, design: Design) -> str:
    """One random completion: mostly plans (valid or near), some garbage."""
    if rng.random() < 0.12:
        return _garbage(rng)
    plan = _plan(rng, design)
    if rng.random() < 0.35:
        _mutate_data(rng, plan, design)
    if rng.random() < 0.25:
        indent = rng.choice([None, None, 2, 1])
        body = json.dumps(_plain(plan), indent=indent, separators=rng.choice([(",", ":"), (", ", ": ")]))
        lang = "json"
    else:
        body = _yaml(rng, plan)
        lang = "yaml"
    if rng.random() < 0.25:
        body = _mutate_text(rng, body)
    return _wrap(rng, body, lang)


def _outcome(text: str, state: str, reader: fastread.Reader | None, design: Design) -> tuple[Any, ...]:
    """(id, error, the compiled tests as the harness reads them and cycles, or why not, read fast)."""
    p = core._plan_input(text, state, None, reader)
    compiled = compile_input(p, design, CYCLE_LIMIT)
    if not isinstance(compiled, str):  # the reader writes the tests as JSON, compile_plan gives data
        tests, cycles = compiled
        compiled = (json.loads(tests if isinstance(tests, bytes) else json.dumps(tests)), cycles)
    return p.id, p.error, compiled, p.compiled is not None


@pytest.mark.parametrize("name", ["counter_en_load", "adder_carry"])
@pytest.mark.parametrize("seed", [1, 2])
def test_the_reader_gives_the_old_paths_ids_errors_and_ops(name: str, seed: int) -> None:
    design = load_design(name)
    reader = fastread.Reader(design, CYCLE_LIMIT)
    rng = random.Random(seed)
    fast = valid = 0
    for k in range(CASES):
        text = completion(rng, design)
        old = _outcome(text, "golden", None, design)
        new = _outcome(text, "golden", reader, design)
        assert new[:3] == old[:3], f"case {k}: {text!r}"
        fast += new[3]
        valid += not isinstance(old[2], str)
    # the fast path must carry most valid plans (else this compares the old path with itself); the
    # corpus puts a backslash, tab or YAML 1.1 line break in about a quarter of them, which it refuses
    assert valid > CASES // 10 and fast > valid * 0.6, (fast, valid)


@functools.cache
def _reader_of(name: str) -> tuple[Design, fastread.Reader]:
    design = load_design(name)
    return design, fastread.Reader(design, CYCLE_LIMIT)


_SLOW = settings(max_examples=800, deadline=None, suppress_health_check=list(HealthCheck))


@_SLOW
@given(st.randoms(use_true_random=False), st.sampled_from(["counter_en_load", "adder_carry"]))
def test_hypothesis_completions_read_alike(rng: random.Random, name: str) -> None:
    design, reader = _reader_of(name)
    text = completion(rng, design)
    assert _outcome(text, "m0001", reader, design)[:3] == _outcome(text, "m0001", None, design)[:3]


_ALPHABET = st.sampled_from(list("tes:-{}[]'\"#&*!?|>%@`~\t\r\n ,.0123456789xyzonf_\u00e9\x85\ufeff"))


@_SLOW
@given(st.text(_ALPHABET, max_size=60), st.text(_ALPHABET, max_size=20))
@example(noise="", tail="\r\t")  # PyYAML reads a line break in the flow mapping; rapidyaml read `1\t`
def test_hypothesis_text_around_a_plan_reads_alike(noise: str, tail: str) -> None:
    design, reader = _reader_of("counter_en_load")
    text = f"tests:\n- name: t{noise}\n  steps:\n  - drive: {{d: 1{tail}}}\n  - wait: 1\n"
    assert _outcome(text, "golden", reader, design)[:3] == _outcome(text, "golden", None, design)[:3]


@pytest.mark.parametrize("char", ["\r", "\t", "\\", "\x85", "\u2028", "\u2029", "\ufeff", "\x00", "\x7f"])
def test_characters_where_the_loaders_may_part_ways_take_the_old_path(char: str) -> None:
    design = load_design("counter_en_load")
    text = f"tests:\n- name: t\n  steps:\n  - drive: {{d: 1{char}}}\n  - wait: 1\n"
    assert fastread.Reader(design, CYCLE_LIMIT).read(text) is fastread.UNDECIDED
    assert fastread.Reader(design, CYCLE_LIMIT).read(text.replace(char, "")) is not fastread.UNDECIDED


def test_without_the_extra_everything_takes_the_old_path(monkeypatch: pytest.MonkeyPatch) -> None:
    design = load_design("counter_en_load")
    reader = fastread.Reader(design, CYCLE_LIMIT)
    rng = random.Random(3)
    monkeypatch.setattr(fastread, "FAST", False)
    for _ in range(200):
        text = completion(rng, design)
        old = _outcome(text, "golden", None, design)
        new = _outcome(text, "golden", reader, design)
        assert new == old and not new[3]


def test_edge_scalars_as_port_values_read_as_pyyaml_reads_them() -> None:
    design = load_design("counter_en_load")
    reader = fastread.Reader(design, CYCLE_LIMIT)
    decided = set()
    for token in EDGE:
        for quoted in (token, f"'{token}'", json.dumps(token)):
            text = f"tests:\n- name: t\n  steps:\n  - drive: {{d: {quoted}}}\n  - expect:\n      q: {quoted}\n"
            old = _outcome(text, "golden", None, design)
            new = _outcome(text, "golden", reader, design)
            assert new[:3] == old[:3], text
            if new[3]:
                decided.add(quoted)
    assert {"0x1F", "255", '"0x10"', "8'hff", "'8''hff'", "1_2_3"} <= decided  # equal either way: read fast
    assert not {"yes", "on", "017", "1:30", "~", "!!str 5", "&a 5"} & decided  # YAML 1.1 reads them otherwise


def test_steps_equal_as_values_but_not_in_type_each_read_as_the_old_path() -> None:
    """The reader keeps a step's record by the step's JSON bytes: 1, true, '1' and 1.0 are four
    steps (the old path reads some of them alike, some not), each read as the old path reads it,
    in either order; an integer past 64 bits, which orjson cannot write, takes the old path."""
    design = load_design("counter_en_load")
    values = ["1", "true", "'1'", "1.0", "0x1", "123456789012345678901234567890", "-1", "1"]
    for order in (values, values[::-1]):
        reader = fastread.Reader(design, CYCLE_LIMIT)
        for value in order:
            text = (
                f"tests:\n- name: t\n  steps:\n  - drive: {{en: {value}}}\n  - wait: 1\n"
                f"  - expect: {{tc: {value}}}\n"
            )
            old = _outcome(text, "golden", None, design)
            assert _outcome(text, "golden", reader, design)[:3] == old[:3], value
            # the same step again, now from the reader's table
            assert _outcome(text, "golden", reader, design)[:3] == old[:3], value
    wide = "tests:\n- name: t\n  steps:\n  - drive: {en: 123456789012345678901234567890}\n"
    assert fastread.Reader(design, CYCLE_LIMIT).read(wide) is fastread.UNDECIDED


_OLD_TRAILING = re.compile(
    r"(?:\s|<\|[A-Za-z0-9_.:-]{1,40}\|>|</s>|<eos>|<pad>|<end_of_turn>|<｜[^<>｜]{1,40}｜>|\[/?INST\])+\Z"
)


def test_trailing_special_tokens_are_cut_as_the_old_expression_cut_them() -> None:
    rng = random.Random(5)
    pieces = [
        *SPECIALS,
        " ",
        "\n",
        "\t",
        "x",
        "|>",
        "<|",
        "<｜a b｜>",
        "<|" + "a" * 41 + "|>",
        "[INST]",
        "｜>",
        "\u3000",
    ]
    for _ in range(5000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
        assert strip_trailing_special(text) == _OLD_TRAILING.sub("", text), repr(text)


def test_rapidyaml_parse_errors_never_reach_standard_error(capfd: pytest.CaptureFixture[str]) -> None:
    design, reader = _reader_of("counter_en_load")
    broken = [
        "tests:\n  - name: [a\n",
        "tests:\n - name: t\n  steps: 2\n",
        "tests: a: b\n",
        'tests:\n  - name: "t\n',
    ]
    for text in broken:
        assert fastread._load(text) is None  # rapidyaml refused it: the old path decides
        assert _outcome(text, "golden", reader, design)[:3] == _outcome(text, "golden", None, design)[:3]
    assert capfd.readouterr().err == ""


def test_other_output_written_during_a_parse_is_forwarded(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def parse(data: bytes, tree: object = None) -> None:  # as rapidyaml fails, with another thread's line in between
        import os

        os.write(2, b"another thread's line\n")
        os.write(2, b"line=3 col=1 (20B): ERROR: [parse] missing terminating ]\n")
        os.write(2, b"/project/cpp/src/c4/yml/parse_engine.def.hpp:5683: (detected here)\n")
        raise RuntimeError("parse")

    monkeypatch.setattr(fastread.ryml, "parse_in_arena", parse)
    with pytest.raises(RuntimeError):
        fastread._parse(b"tests: [\n")
    assert capfd.readouterr().err == "another thread's line\n"


def test_socket_lines_with_shared_tests_are_the_bytes_of_each_entry() -> None:
    from hwtp.sim.job import Evaluation, encode_line, encode_lines

    design = load_design("counter_en_load")
    reader = fastread.Reader(design, CYCLE_LIMIT)
    rng = random.Random(5)
    written = []  # the reader's tests, written as JSON
    while len(written) < 20:
        read = reader.read(completion(rng, design))
        if isinstance(read, tuple):
            written.append(read[1])
    compiled = ({"name": "t", "ops": [["d", [["d", 1]]], ["w", 2]]},)  # compile_plan's: data
    wide = ({"name": "t", "ops": [["d", [["d", 1 << 70]]]]},)  # past 64 bits: the plain JSON writer
    evaluations = [
        Evaluation(f"p{k}@{state}", tests, mutant, stop_on_fail=k % 3 != 0, cycles=5, observe=k % 4 == 0)
        for k, tests in enumerate([*written, compiled, wide])
        for state, mutant in (("golden", 0), ("m0003", 3))  # golden and a state share one tests object
    ]
    lines = encode_lines(evaluations)
    assert lines == [encode_line(ev.as_job_entry()) for ev in evaluations]
    assert [json.loads(line) for line in lines] == [json.loads(json.dumps(ev.as_job_entry())) for ev in evaluations]


def test_the_reader_writes_the_tests_as_the_socket_carries_the_old_paths_compiled_plan(tmp_path: Path) -> None:
    """The reader never builds the harness ops as data: it writes each test's JSON from its
    steps' written ops. Those bytes are the old path's compiled plan written for the socket, byte
    for byte, on random plans and on a port wider than 64 bits (the plain JSON writer's case)."""
    from hwtp.plans.format import extract_plan
    from hwtp.sim.job import compile_plan, encode_json

    design = load_design("counter_en_load")
    reader = fastread.Reader(design, CYCLE_LIMIT)
    rng = random.Random(11)
    checked = 0
    while checked < 40:
        text = completion(rng, design)
        read = reader.read(response_text(text))
        if isinstance(read, tuple):
            plan = extract_plan(response_text(text))
            assert read[1] == encode_json(list(compile_plan(plan, design))), text
            checked += 1
    source = tmp_path / "wide.v"
    source.write_text("module wide(input [99:0] d, output [99:0] q);\n  assign q = ~d;\nendmodule\n")
    wide = load_design(source)
    text = "tests:\n- name: t\n  steps:\n  - drive: {d: \"100'h8_0000_0000_0000_0000_0000_0001\"}\n  - expect: {q: 5}\n"
    read = fastread.Reader(wide, CYCLE_LIMIT).read(text)
    assert isinstance(read, tuple)
    assert read[1] == encode_json(list(compile_plan(extract_plan(text), wide)))
    assert json.loads(read[1])[0]["ops"][0] == ["d", [["d", (1 << 99) + 1]]]
