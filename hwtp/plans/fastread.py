"""The fast plan reader of the reward path: completions to compiled plans in C-backed parsers.

:func:`hwtp.plans.format.extract_plan` reads a plan with :mod:`hwtp.yamlio` (libyaml's composer and
a Python walk that records every line) and checks it in three passes (structure, ports,
compile): about 1-2 ms of the caller's thread per completion. :class:`Reader` does the same
work in one pass from parsed data to the harness ops, the document parsed by rapidyaml
(``ryml``) and its JSON read by ``orjson`` (the ``fast`` extra), in tens of microseconds.

It decides only what it can decide exactly as the old path would; everything else is
:data:`UNDECIDED` and goes to the old path, which stays the one that writes located error
messages. So a reward, an error and its message are those of the old path, byte for byte
(tests/test_fastread.py compares both on a random corpus):

- the text is refused before parsing when it holds what PyYAML 1.1 reads otherwise than
  rapidyaml or refuses: tags, anchors and aliases, directives and document markers, explicit
  keys, tabs, carriage returns, backslash escapes, YAML 1.1's extra line breaks, characters
  PyYAML will not read, deep nesting;
- every string value is resolved with PyYAML's own resolver as if it were a plain scalar:
  one that PyYAML would read as a bool, number, null or timestamp (``yes``, ``on``, ``012``,
  ``1:30``, ``0x1f``, ``1_000``, ``.inf``, ``~``) is undecided, except a port value whose
  literal means the same either way (``0xff`` as text and as the integer 255);
- a number rapidyaml writes as JSON is the plain scalar's own text, which PyYAML reads as the
  same integer (any float is undecided); duplicate keys, which JSON readers merge, are found
  by counting the document's nodes against rapidyaml's tree;
- any plan that fails a check is undecided: the old path finds the message.

rapidyaml writes each parse error to file descriptor 2 before it raises; :func:`_parse` sends
that descriptor to a private file for the parse and forwards whatever else was written there
meanwhile (another thread's output), so a trainer's log never shows the reader's failed
guesses. Only candidates that may be plans (they contain ``tests``) are parsed. Without the
``fast`` extra every completion is undecided and the old path reads it (``FAST`` says which).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Iterable
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple

import yaml

from hwtp.plans.format import MAX_STEPS, MAX_TESTS, MAX_WAIT, STEP_KINDS, candidates, no_plan
from hwtp.plans.values import Value, ValueError_, parse_value
from hwtp.sim.job import encode_json

if TYPE_CHECKING:
    from hwtp.rtl.design import Design


def _optional(name: str) -> Any:
    """Module ``name`` of the fast extra, or None when it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:  # pragma: no cover - exercised by forcing FAST off in the tests
        return None


orjson = _optional("orjson")
ryml = _optional("ryml")

#: Whether the C-backed reader is installed (``pip install 'hwtp[fast]'``).
FAST = orjson is not None and ryml is not None

UNDECIDED = None
#: The old path's message for a completion without a plan (hwtp.plans.format.extract_plan).
NO_PLAN = no_plan("completion")
#: Texts longer than this go to the old path (it also refuses deep nesting and huge documents).
_MAX_TEXT = 100_000
_SURROGATES = re.compile("[\ud800-\udfff]")
# Characters where PyYAML 1.1 and rapidyaml may part ways (see the module doc): tabs, carriage
# returns, backslashes, YAML 1.1's extra line breaks, a byte order mark and what PyYAML will not read.
# (A raw string: the escapes are the regular expression's, so the `]` of \x5d cannot close the class.)
_REFUSED_CHARS = re.compile(
    r"[^\n\x20-\x5b\x5d-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)
_PLAIN_ASCII = bytes([10, *range(0x20, 0x5C), *range(0x5D, 0x7F)])  # of ASCII, what is never refused
_INDICATORS = "&*!%@`?"
# anchor, alias, tag, directive and reserved indicators where a node may start; explicit keys
_NODE_START = re.compile(r"(?:^|[\s\[\]{},:?-])[&*!%@`]|(?:^|[\s\[\]{},])\?(?:\s|$)", re.MULTILINE)
_DEEP = re.compile(r"(?:-[ ]+){16,}")  # one-line nesting
_NAME_FULL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MAX_BRACKETS = 256
_resolver = yaml.resolver.Resolver()
_constructor = yaml.constructor.SafeConstructor()
_SCALARS = frozenset((int, str, bool))
# what the reader does not accept (a port value, a step): empty, so false, so that all() over a
# test's steps finds it and a step not yet seen (None) in one pass in C
_BAD: tuple[()] = ()
_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"


def plan_key(tests: Any) -> str:
    """The id of a plan by its tests (:func:`hwtp.plans.format.to_data`'s ``tests``): completions
    whose tests are equal simulate once."""
    text = _dumps(tests)
    return _key(text if text is not None else _plain_dumps(tests))


def _dumps(data: Any) -> bytes | None:
    """``data`` as :func:`plan_key` writes it with orjson (compact, keys sorted), or None (no
    orjson, or an integer wider than 64 bits)."""
    if orjson is None:
        return None
    try:
        return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # an integer wider than 64 bits
        return None


def _text(text: str) -> bytes:
    """A string as orjson writes it (the reader runs only with orjson)."""
    return orjson.dumps(text)  # type: ignore[no-any-return]


def _plain_dumps(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, default=str).encode()


def _key(text: bytes) -> str:
    return "p" + hashlib.sha256(text).hexdigest()[:16]


def _plain_tag(text: str) -> str:
    """The tag PyYAML gives ``text`` as a plain scalar (kept for short texts: names repeat)."""
    tag = _tags.get(text)
    if tag is None:
        tag = str(_resolver.resolve(yaml.ScalarNode, text, (True, False)))
        if len(text) <= 64:
            if len(_tags) >= 1 << 14:
                _tags.clear()
            _tags[text] = tag
    return tag


_tags: dict[str, str] = {}


_RYML_MESSAGE = re.compile(rb"line=\d+ col=\d+ \(\d+B\): ERROR: [^\n]*\n(?:[^\n]*: \(detected here\)\n)?")
_sink: tuple[int, int] | None = None  # (process id, descriptor): a forked child makes its own


def _sink_fd() -> int:
    global _sink
    if _sink is None or _sink[0] != os.getpid():
        if hasattr(os, "memfd_create"):
            fd = os.memfd_create("hwtp-ryml")
        else:  # pragma: no cover - not Linux
            fd, path = tempfile.mkstemp(prefix="hwtp-ryml-")
            os.unlink(path)
        _sink = (os.getpid(), fd)
    return _sink[1]


class _Quiet:
    """Descriptor 2 pointed at a private file while held (re-entrant, one thread at a time);
    on the outermost exit what landed there apart from rapidyaml's own messages goes on to
    the real descriptor 2. :func:`quiet` holds it over many parses (one redirection for a
    chunk of completions, not five system calls per parse)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._depth = 0
        self._saved = -1

    def __enter__(self) -> None:
        self._lock.acquire()
        self._depth += 1
        if self._depth == 1:
            try:
                sink = _sink_fd()
                self._saved = os.dup(2)
                os.dup2(sink, 2)
            except BaseException:
                self._depth -= 1
                self._lock.release()
                raise

    def __exit__(self, *_exc: object) -> None:
        try:
            self._depth -= 1
            if self._depth == 0:
                sink = _sink_fd()
                os.dup2(self._saved, 2)
                os.close(self._saved)
                if os.fstat(sink).st_size:
                    os.lseek(sink, 0, os.SEEK_SET)
                    written = b""
                    while chunk := os.read(sink, 65536):
                        written += chunk
                    os.ftruncate(sink, 0)
                    os.lseek(sink, 0, os.SEEK_SET)
                    rest = _RYML_MESSAGE.sub(b"", written)
                    if rest:
                        os.write(2, rest)
        finally:
            self._lock.release()


_quiet = _Quiet()


def quiet() -> contextlib.AbstractContextManager[None]:
    """Hold rapidyaml's parse-error messages off standard error across the reads inside
    (``with quiet(): ...``); each parse holds it anyway, so this only saves the redirections."""
    return _quiet if FAST else contextlib.nullcontext()


class _Arena(threading.local):
    """Each thread's rapidyaml tree and JSON buffer, reused from one parse to the next."""

    def __init__(self) -> None:
        self.tree = ryml.Tree() if ryml is not None else None
        self.buffer = bytearray(1 << 16)


_arena = _Arena()


def _parse(data: bytes) -> Any:
    """rapidyaml's tree of ``data`` (the calling thread's tree, reused), with its parse-error
    message kept off standard error (:class:`_Quiet`)."""
    tree: Any = _arena.tree
    with _quiet:
        tree.clear()
        tree.clear_arena()
        return ryml.parse_in_arena(data, tree)


def _json(tree: Any, root: int) -> Any:
    """The data of ``tree`` below ``root``: written as JSON by rapidyaml into the thread's
    buffer (grown when short), read by orjson."""
    buffer = _arena.buffer
    failed, size = ryml.emit_json_to_substr(tree, root, buffer)
    if failed:
        buffer = _arena.buffer = bytearray(size + (size >> 2))
        failed, size = ryml.emit_json_to_substr(tree, root, buffer)
    with memoryview(buffer) as view, view[:size] as written:
        return orjson.loads(written)


def _deep(candidate: str) -> bool:
    """Whether the text may nest deep enough for the old loader's recursion limit."""
    return candidate.count("[") + candidate.count("{") > _MAX_BRACKETS or bool(
        "- -" in candidate and _DEEP.search(candidate)
    )


def _load(candidate: str) -> tuple[Any, int] | None:
    """(data, rapidyaml's node count) of one candidate, or None when not decidable here."""
    data = candidate.encode("utf-8")
    if data.translate(None, _PLAIN_ASCII) and _REFUSED_CHARS.search(candidate):  # C speed for ASCII text
        return None
    if _deep(candidate) or (any(c in candidate for c in _INDICATORS) and _NODE_START.search(candidate)):
        return None
    if candidate.startswith(("---", "...")) or "\n---" in candidate or "\n..." in candidate:
        return None  # document markers
    try:
        tree = _parse(data)
        root = tree.root_id()
        if tree.is_stream(root):
            return None
        return _json(tree, root), tree.size()
    except Exception:  # rapidyaml's parse errors, JSON it cannot write: the old path decides
        return None


def _count(value: Any) -> int:
    """Nodes of a value in rapidyaml's tree, below the node holding it."""
    if isinstance(value, dict):
        return sum(1 + _count(v) for v in value.values())
    if isinstance(value, list):
        return sum(1 + _count(v) for v in value)
    return 0


def _strings_plain(value: Any) -> bool:
    """Whether every string in ``value`` means text to PyYAML too, even if it was plain."""
    if isinstance(value, str):  # rapidyaml writes an empty plain scalar as null: "" was quoted
        return not value or _plain_tag(value) == _STR
    if isinstance(value, dict):
        return all(_strings_plain(v) for v in value.values())
    if isinstance(value, list):
        return all(_strings_plain(v) for v in value)
    return not isinstance(value, float)


class _Step(NamedTuple):
    """What one step compiles to, kept by the reader for every plan that holds the same step."""

    op: bytes  # the harness op (hwtp.sim.job.compile_plan's), written as the socket carries it
    written: bytes | None  # the step of to_data's tests as plan_key writes it (None: orjson cannot)
    counts: int  # its nodes in rapidyaml's tree below the steps list, plus its cycles << _SHIFT
    data: dict[str, Any]  # the step as hwtp.plans.format.to_data writes it


# a step's node count and cycles packed in one integer, so that one sum over a test's steps
# gives both (a test has at most MAX_STEPS steps of fewer than 2**_SHIFT nodes each)
_SHIFT = 32
_LOW = (1 << _SHIFT) - 1
_OP, _WRITTEN, _COUNTS = itemgetter(0), itemgetter(1), itemgetter(2)


def _counts(nodes: int, cycles: int) -> int:
    return nodes | cycles << _SHIFT


def _shapes_key(shapes: list[tuple[str, str, list[_Step]]]) -> str:
    """:func:`plan_key` of the tests (name, description, steps), from the steps' written bytes
    (the same bytes orjson writes of the whole; the data form when one cannot be written)."""
    keyed: list[bytes] = []
    try:
        for name, description, steps in shapes:
            head = b'{"description":%b,"name":' % _text(description) if description else b'{"name":'
            keyed.append(b'%b%b,"steps":[%b]}' % (head, _text(name), b",".join(map(_WRITTEN, steps))))
        return _key(b"[%b]" % b",".join(keyed))
    except TypeError:  # a step orjson cannot write (None in the join): the data form below
        pass
    tests = []
    for name, description, steps in shapes:
        entry: dict[str, Any] = {"name": name}
        if description:
            entry["description"] = description
        entry["steps"] = [step.data for step in steps]
        tests.append(entry)
    return plan_key(tests)


class Reader:
    """Reads completions into compiled plans for one design and cycle limit.

    :meth:`read` gives ``(plan id, tests, cycles)`` (the :func:`plan_key` of the plan's tests as
    :func:`hwtp.plans.format.to_data` writes them; the tests of :func:`hwtp.sim.job.compile_plan`
    written as JSON, as the socket carries them, so that they are never built as data;
    :func:`hwtp.sim.job.plan_cycles`), :data:`NO_PLAN`, or :data:`UNDECIDED`. Steps and port
    values are looked up in bounded tables of those seen.
    """

    _TABLE = 1 << 16

    def __init__(self, design: Design, max_cycles: int) -> None:
        self.max_cycles = max_cycles
        self.per_test = design.reset.cycles if design.reset else 0
        self.has_reset = design.reset is not None
        first: dict[str, Any] = {}
        for p in design.ports:
            first.setdefault(p.name, p)
        self.widths = {p.name: p.width for p in design.ports}  # hwtp.sim.job.compile_plan's
        control = design.control_ports
        self.drive = {n: p for n, p in first.items() if p.direction == "input" and n not in control}
        self.expect = {n: p for n, p in first.items() if p.direction != "input"}
        # (port, value as read) -> (the op's entry, the canonical literal), or _BAD; True and 1
        # share an entry (they are the same value to hwtp.plans.values.parse_value)
        self._drive: dict[tuple[str, Any], Any] = {}
        self._expect: dict[tuple[str, Any], Any] = {}
        # a step's JSON bytes (orjson's, of the step as read) -> what _step_of makes of it (a
        # _Step, or _BAD): steps repeat across plans
        self._steps: dict[bytes, Any] = {}

    def read(self, text: str) -> tuple[str, bytes, int] | str | None:
        """What the old path makes of a completion's response ``text``, when decidable here."""
        if not FAST or len(text) > _MAX_TEXT or (not text.isascii() and _SURROGATES.search(text)):
            return UNDECIDED
        for candidate in candidates(text):
            if "tests" not in candidate:
                if "\\" in candidate or _deep(candidate):  # an escape could spell the key; a recursion limit
                    return UNDECIDED
                continue  # the old path skips it too: it cannot hold a 'tests' key
            loaded = _load(candidate)
            if loaded is None:
                return UNDECIDED
            data, size = loaded
            if not isinstance(data, dict) or "tests" not in data:
                return UNDECIDED
            return self._compile(data, size)
        return NO_PLAN

    def _compile(self, data: dict[str, Any], size: int) -> Any:
        """The fused check and compile of a plan's data: None on any doubt or fault."""
        nodes = 1 + len(data)
        for key, value in data.items():
            if key == "tests":
                continue
            if key not in ("reasoning", "format"):
                return None
            if key == "reasoning" and value and not isinstance(value, str):
                return None
            if (key == "format" and isinstance(value, (dict, list))) or not _strings_plain(value):
                return None
            nodes += _count(value)
        tests = data["tests"]
        if not isinstance(tests, list) or not tests or len(tests) > MAX_TESTS:
            return None
        nodes += len(tests)
        names: set[str] = set()
        shapes: list[tuple[str, str, list[_Step]]] = []  # (name, description, steps) of each test
        compiled: list[bytes] = []  # each test's harness ops, written
        total = self.per_test * len(tests)
        steps_seen = self._steps
        for raw in tests:
            if not isinstance(raw, dict):
                return None
            nodes += len(raw)
            name = raw.get("name")
            if not isinstance(name, str) or not _NAME_FULL.match(name) or name in names:
                return None
            names.add(name)
            description = raw.get("description") or ""
            steps = raw.get("steps")
            if len(raw) != 2 + ("description" in raw) or not isinstance(steps, list) or not steps:
                return None
            if not isinstance(description, str) or "\n" in description or len(steps) > MAX_STEPS:
                return None
            if _plain_tag(name) != _STR or not _strings_plain(raw.get("description")):
                return None
            try:  # each step by its JSON bytes (C speed): equal bytes, equal data of equal types
                written = list(map(orjson.dumps, steps))
            except TypeError:  # an integer wider than 64 bits
                return None
            known: list[Any] = list(map(steps_seen.get, written))
            if not all(known):  # a step not seen yet (None), or one not accepted (_BAD)
                for at, found in enumerate(known):
                    if found is None:
                        found = known[at] = self._step_of(steps[at])
                        if len(steps_seen) >= self._TABLE:
                            steps_seen.clear()
                        steps_seen[written[at]] = found
                if not all(known):
                    return None
            counts = sum(map(_COUNTS, known))
            nodes += len(steps) + (counts & _LOW)
            total += counts >> _SHIFT
            shapes.append((name, description, known))
            # the test of hwtp.sim.job.compile_plan as the socket carries it, joined in C
            compiled.append(b'{"name":%b,"ops":[%b]}' % (_text(name), b",".join(map(_OP, known))))
        if nodes != size or total > self.max_cycles:
            return None
        return _shapes_key(shapes), b"[%b]" % b",".join(compiled), total

    def _step_of(self, step: Any) -> Any:
        """What one step as read compiles to (:class:`_Step`), or ``_BAD``."""
        if step.__class__ is not dict or len(step) != 1:
            return _BAD
        ((kind, body),) = step.items()
        if body.__class__ is dict:
            if not _SCALARS.issuperset(map(type, body.values())):
                return _BAD
        elif body.__class__ is not int:
            return _BAD
        return self._step(kind, body)

    def _step(self, kind: str, body: Any) -> Any:
        """What a step compiles to (:class:`_Step`), or ``_BAD`` when not decidable here."""
        if kind == "wait" or kind == "reset":
            if body.__class__ is not int or not 1 <= body <= MAX_WAIT or body > self.max_cycles:
                return _BAD
            if kind == "reset" and not self.has_reset:
                return _BAD
            counted: dict[str, Any] = {kind: body}
            return _Step(encode_json((kind[0], body)), _dumps(counted), _counts(1, body), counted)
        if kind not in STEP_KINDS or body.__class__ is not dict or not body:
            return _BAD
        table = self._drive if kind == "drive" else self._expect
        entries, literals = [], {}
        for port, raw_value in body.items():
            if raw_value.__class__ not in _SCALARS:  # a float would equal an int as a key
                return _BAD
            known = table.get((port, raw_value))
            if known is None:
                known = self._learn(table, kind, port, raw_value)
            if known is _BAD:
                return _BAD
            entries.append(known[0])
            literals[port] = known[1]
        data: dict[str, Any] = {kind: literals}
        op = encode_json(("d" if kind == "drive" else "e", entries))
        return _Step(op, _dumps(data), _counts(1 + len(body), 0), data)

    def _learn(self, table: dict[Any, Any], kind: str, port: str, raw: Any) -> Any:
        """The table entry of ``raw`` on ``port`` (``_BAD`` when not decidable), kept."""
        known = self._check(kind, port, raw)
        if len(table) >= self._TABLE:
            table.clear()
        table[(port, raw)] = _BAD if known is None else known
        return table[(port, raw)]

    def _check(self, kind: str, port: str, raw: Any) -> tuple[list[Any], Any] | None:
        ports = self.drive if kind == "drive" else self.expect
        spec = ports.get(port)
        if spec is None or isinstance(raw, float) or (isinstance(raw, str) and "\n" in raw):
            return None
        value = _parsed(raw)
        if value is None:
            return None
        if (kind == "drive" and value.has_dont_care) or value.fits(spec.width, spec.signed) is not None:
            return None
        bits, mask = value.masked(self.widths[port])
        literal = value.literal()
        return ([port, bits] if kind == "drive" else [port, bits, mask, literal]), literal


def _parsed(raw: Any) -> Value | None:
    """The value PyYAML's reading of ``raw`` gives: a string that PyYAML would read as an
    integer when plain counts only when both readings give the same value."""
    try:
        value = parse_value(raw)
    except ValueError_:
        return None
    if not isinstance(raw, str):
        return value
    tag = _plain_tag(raw)
    if tag == _STR:
        return value
    if tag != _INT:
        return None
    try:
        other = parse_value(_constructor.construct_yaml_int(yaml.ScalarNode(tag, raw)))
    except (ValueError, ValueError_):
        return None
    return value if other == value else None


def example_keys(tests: Iterable[Any]) -> frozenset[str]:
    """The :func:`plan_key` of each example plan's tests (their :func:`hwtp.plans.format.to_data` form)."""
    from hwtp.plans.format import Plan, to_data

    return frozenset(plan_key(to_data(Plan(t)).get("tests")) for t in tests)
