"""Transaction sets whose body segments are split when first asked for.

A 60 MB file holds some three million segments; making each a ``Segment``
costs about a microsecond, three seconds in all, while the reader needs only
the envelope segments. So a set read from a file keeps its bytes and makes its
body on first use; the mappings ask only for the tags they map (``tagged``),
and its ``raw_payload`` is its bytes as sent (``raw_bytes``).

``ReadSet`` is a ``TransactionSet`` to everyone else: the same fields, equal
to a plain set of the same segments, and it pickles and copies as one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from shared.domain.x12.model import Segment, TransactionSet
from shared.domain.x12.scan import Text

_ST, _SE, _BODY = (TransactionSet.__dict__[name] for name in ("st", "se", "body"))


class ReadSet(TransactionSet):
    __slots__ = ("_lazy",)
    _lazy: tuple[Text, int, int, int, int] | None

    def __init__(self, st: Segment, se: Segment, body: Iterable[Segment]) -> None:
        # The dataclass's own signature, eager (``dataclasses.replace`` calls it).
        _ST.__set__(self, st)
        _SE.__set__(self, se)
        _BODY.__set__(self, tuple(body))
        _LAZY.__set__(self, None)

    @classmethod
    def of(cls, st: Segment, se: Segment, lazy: tuple[Text, int, int, int, int]) -> ReadSet:
        """``lazy``: the bytes, the body's span in ``text.buf`` (after ST's terminator, up
        to the terminator ending the last body segment), and the first and last bytes of
        the set in ``text.buf`` (mapped to the file's for ``raw_bytes``)."""
        made = _new(cls)
        _ST.__set__(made, st)
        _SE.__set__(made, se)
        _LAZY.__set__(made, lazy)
        return made

    @property
    def body(self) -> tuple[Segment, ...]:
        try:
            return _BODY.__get__(self, ReadSet)  # type: ignore[no-any-return]
        except AttributeError:
            text, start, stop = self._lazy[:3]  # type: ignore[index]
            made = tuple(_split(text, start, stop, self.st.position + 1))
            _BODY.__set__(self, made)
            return made

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TransactionSet):
            return NotImplemented
        return (self.st, self.se, self.body) == (other.st, other.se, other.body)

    __hash__ = TransactionSet.__hash__

    def __reduce__(self) -> tuple[Any, ...]:
        return TransactionSet, (self.st, self.se, self.body)


_LAZY = ReadSet.__dict__["_lazy"]
_new = object.__new__


def _lazy(transaction_set: TransactionSet) -> tuple[Text, int, int, int, int] | None:
    return _LAZY.__get__(transaction_set) if isinstance(transaction_set, ReadSet) else None


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
    text, _, _, first, last = lazy
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
    position = transaction_set.st.position + 1
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
