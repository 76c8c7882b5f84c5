"""Transaction sets whose body segments are split when first asked for.

A 60 MB file holds some three million segments; making each a ``Segment``
would cost more than the rest of the read, while the reader needs only
the envelope segments. So a set read from a file keeps its bytes and makes its
body on first use; the mappings ask only for the tags they map (``tagged``),
and its ``raw_payload`` is its bytes as sent (``raw_bytes``).

Nor does it keep its ST and SE, which every set of the file would hold all
through mapping and storage: it keeps where they lie (``Spans``) and makes
them again, equal, each time they are asked for.

``ReadSet`` is a ``TransactionSet`` to everyone else: the same fields, equal
to a plain set of the same segments, and it pickles and copies as one.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable
from functools import lru_cache
from struct import Struct
from typing import Any

from shared.domain.x12.model import Segment, TransactionSet, segment
from shared.domain.x12.reading.scan import Text

_ST, _SE, _BODY = (TransactionSet.__dict__[name] for name in ("st", "se", "body"))
_FIELDS = 7  # per set in ``Spans.offsets``: see ``Spans.add``


class Spans:
    """Where the sets of one interchange lie in its text: seven numbers a set in one
    array (28 bytes), instead of an ST and an SE ``Segment`` each and a tuple of
    offsets, with their tuples, strings and ints: a 100,000-set file's sets held
    58 MiB that way, 20 MiB this way (``ReadSet`` and ST02 included)."""

    __slots__ = ("count", "head", "offsets", "pack", "size", "text", "unpack")

    def __init__(self, text: Text) -> None:
        self.text = text
        self.count = 0  # sets added (the reader may add them to ``offsets`` itself)
        # Offsets and positions are below len(buf): 4 bytes each unless buf is 4 GB.
        code = "Q" if len(text.buf) >= 1 << (8 * array("I").itemsize) else "I"
        self.offsets = array(code)
        # A set's numbers to and from the array's bytes in one call each (``extend``
        # and slicing the array are several calls, and slower).
        numbers = Struct(f"{_FIELDS}{code}")
        self.pack, self.unpack, self.size = numbers.pack, numbers.unpack_from, numbers.size
        self.head = Struct(f"3{code}").unpack_from  # ST's three

    def add(
        self, st: int, st_begin: int, st_end: int, stop: int, se: int, se_begin: int, last: int
    ) -> int:
        """A set's index, given ST's and SE's positions, each one's first byte (its tag),
        ST's end (its terminator, as ``Text.segment`` takes it), ``stop``, the terminator
        ending the last body segment (ST's when the body is empty), and ``last``, the
        set's last byte (SE's terminator, or its last byte when none follows it)."""
        self.offsets.frombytes(self.pack(st, st_begin, st_end, stop, se, se_begin, last))
        self.count += 1
        return self.count - 1


class ReadSet(TransactionSet):
    """A set read from a file: its ``st`` and ``se`` are read again from the bytes when
    asked for (a ``Segment`` each time, equal every time), its body when first asked for;
    ST01 and ST02, which every set's mapping reads, are kept as strings."""

    __slots__ = ("_code", "_index", "_number", "_spans")
    _spans: Spans | None
    _index: int
    _code: str
    _number: str

    def __init__(self, st: Segment, se: Segment, body: Iterable[Segment]) -> None:
        # The dataclass's own signature, eager (``dataclasses.replace`` calls it).
        _ST.__set__(self, st)
        _SE.__set__(self, se)
        _BODY.__set__(self, tuple(body))
        _SPANS.__set__(self, None)

    @classmethod
    def of(cls, spans: Spans, index: int, code: str, number: str) -> ReadSet:
        """Set ``index`` of ``spans``; ``code`` and ``number``: its ST01 and ST02 as sent."""
        return new_set(spans, index, code, number)

    @property
    def st(self) -> Segment:
        spans = self._spans
        if spans is None:
            return _ST.__get__(self, ReadSet)  # type: ignore[no-any-return]
        position, begin, end = spans.head(spans.offsets, self._index * spans.size)
        code, number = self._code, self._number
        # Its bytes "ST", a separator, ST01, a separator, a non-empty ST02 and nothing
        # else (ASCII, so a character is a byte; an empty ST02 could be a blank space
        # stripped): the elements are the two kept. Every set's mapping asks for its
        # ST once (``mapping._one_kind``); this spares it the parse.
        size = 4 + len(code) + len(number)
        if end - begin == size and number and code.isascii() and number.isascii():
            return segment(position, "ST", (code, number))
        return spans.text.segment(position, "ST", begin, end)

    @property
    def se(self) -> Segment:
        spans = self._spans
        if spans is None:
            return _SE.__get__(self, ReadSet)  # type: ignore[no-any-return]
        numbers = spans.unpack(spans.offsets, self._index * spans.size)
        position, begin, last = numbers[4:]
        text = spans.text
        end = last if text.buf[last : last + 1] == text.terminator else last + 1
        return text.segment(position, "SE", begin, end)

    @property
    def code(self) -> str:
        return self.st.get(1) if self._spans is None else self._code

    @property
    def control_number(self) -> str:
        return self.st.get(2) if self._spans is None else self._number

    @property
    def body(self) -> tuple[Segment, ...]:
        try:
            return _BODY.__get__(self, ReadSet)  # type: ignore[no-any-return]
        except AttributeError:
            text, start, stop, _, _, position = _lazy(self)  # type: ignore[misc]
            made = tuple(_split(text, start, stop, position + 1))
            _BODY.__set__(self, made)
            return made

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TransactionSet):
            return NotImplemented
        return (self.st, self.se, self.body) == (other.st, other.se, other.body)

    __hash__ = TransactionSet.__hash__

    def __reduce__(self) -> tuple[Any, ...]:
        return TransactionSet, (self.st, self.se, self.body)


_SPANS, _INDEX, _CODE, _NUMBER = (
    ReadSet.__dict__[name] for name in ("_spans", "_index", "_code", "_number")
)
_new = object.__new__
_set_spans, _set_index, _set_code, _set_number = (
    slot.__set__ for slot in (_SPANS, _INDEX, _CODE, _NUMBER)
)


def new_set(spans: Spans, index: int, code: str, number: str) -> ReadSet:
    """``ReadSet.of``, as the reader calls it 100,000 times for a large file: the
    frozen dataclass's ``__setattr__`` refuses, so its slots are set directly."""
    made = _new(ReadSet)
    _set_spans(made, spans)
    _set_index(made, index)
    _set_code(made, code)
    _set_number(made, number)
    return made


def _lazy(transaction_set: TransactionSet) -> tuple[Text, int, int, int, int, int] | None:
    """(the text, the body's first byte and the terminator ending it, the set's first
    and last bytes, ST's position) for a set read from a file, else None."""
    if not isinstance(transaction_set, ReadSet):
        return None
    spans = transaction_set._spans
    if spans is None:
        return None
    numbers = spans.unpack(spans.offsets, transaction_set._index * spans.size)
    st, first, st_end, body_stop, _, _, last = numbers
    return spans.text, st_end + 1, body_stop, first, last, st


def lazy_bytes(transaction_set: TransactionSet) -> tuple[Text, int, int] | None:
    """Where a set read from a file has its body: (the bytes, the body's first byte,
    the terminator ending its last body segment); None for a set built in memory."""
    lazy = _lazy(transaction_set)
    return None if lazy is None else lazy[:3]


def raw_bytes(transaction_set: TransactionSet) -> bytes | None:
    """The set's bytes as sent: from its ST tag through SE's terminator (a line break
    when those end segments), with whatever lies between, line breaks and indentation
    included; None for a set not read from a file."""
    lazy = _lazy(transaction_set)
    if lazy is None:
        return None
    text, _, _, first, last, _ = lazy
    return text.file[text.source(first) : text.source(last) + 1]


def tagged(transaction_set: TransactionSet, tags: tuple[str, ...]) -> list[Segment]:
    """The set's body segments with one of ``tags``, in order, without splitting the others."""
    lazy = _lazy(transaction_set)
    if lazy is None or _has_body(transaction_set):
        return [segment for segment in transaction_set.body if segment.tag in tags]
    text, start, stop = lazy[:3]
    buf, t = text.buf, text.terminator
    element = text.element.decode()
    trail = (b" \t\r" if t == b"\n" else b" \t") if text.newline else None
    position = lazy[5] + 1
    found: list[Segment] = []
    counted, count, find = start, buf.count, buf.find
    # From the ST's terminator, and one byte past the body to see a last tag's end.
    for match in _pattern(t, text.element, text.newline, tags).finditer(buf, start - 1, stop + 1):
        at = match.start()
        if at >= stop:
            break
        position += count(t, counted, at + 1)
        counted = at + 1
        end = find(t, at + 1, stop)
        raw = buf[match.start(1) : stop if end < 0 else end]
        parts = (raw.rstrip(trail) if trail else raw).decode("utf-8").split(element)
        found.append(Segment(position, parts[0], tuple(parts[1:])))
    return found


def _has_body(transaction_set: TransactionSet) -> bool:
    try:
        _BODY.__get__(transaction_set, type(transaction_set))
    except AttributeError:
        return False
    return True


@lru_cache(maxsize=64)
def _pattern(terminator: bytes, element: bytes, newline: bool, tags: tuple[str, ...]) -> Any:
    t, e = re.escape(terminator), re.escape(element)
    lead = rb"[ \t]*+" if newline else rb"[ \t\r\n]*+"
    alternatives = b"|".join(re.escape(tag.encode()) for tag in tags)
    return re.compile(rb"%s%s(%s)(?=%s|%s|[ \t\r]|\Z)" % (t, lead, alternatives, e, t))


def _split(text: Text, start: int, stop: int, first: int) -> list[Segment]:
    """The segments in ``buf[start:stop]`` (terminators between them), positions from ``first``."""
    if start >= stop:
        return []
    t, e = text.terminator.decode(), text.element.decode()
    pieces = text.decode(start, stop).split(t)
    if text.newline:
        trail = " \t\r" if t == "\n" else " \t"
        pieces = [piece.strip(" \t").rstrip(trail) for piece in pieces]
    else:
        pieces = [piece.lstrip(" \t\r\n") for piece in pieces]
    out = []
    for n, piece in enumerate(pieces, first):
        parts = piece.split(e)
        out.append(Segment(n, parts[0], tuple(parts[1:])))
    return out
