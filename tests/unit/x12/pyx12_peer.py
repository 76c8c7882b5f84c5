"""pyx12 (a dev dependency only) as an independent judge of what we write.

pyx12 4.0.0 ships 4010 maps for HIPAA sets and the 997, none for the 210 or
the 810. So:

- a 997 is validated in full (``x12n_document``) against pyx12's own
  997.4010.xml, with one change: that map is HIPAA's implementation of the 997
  and lists only HIPAA groups (AK101) and sets (AK201); the X12 997 itself
  takes any, so ``IM``/``IN`` and ``210``/``810`` are added to those two code
  lists and nothing else is touched;
- a 210 or 810 file is validated as an envelope (``X12Reader``: the fixed ISA,
  SE01/GE01/IEA01 counts, SE02/GE02/IEA02 control numbers, unique ST02/GS06/
  ISA13, nesting and trailers).
"""

from __future__ import annotations

import io
import logging
import shutil
from pathlib import Path

import pyx12
import pyx12.errors
import pyx12.params
import pyx12.x12file
import pyx12.x12n_document

_PATCHES = [
    # (the first code of the list as it stands, the codes put in front of it)
    ("<code>BE</code>\n                <code>HB</code>", "<code>IM</code><code>IN</code>"),
    ("<code>270</code>\n                  <code>271</code>", "<code>210</code><code>810</code>"),
]


def map_dir(into: Path) -> Path:
    """A copy of pyx12's maps whose 997 takes 210/810 groups (module docstring)."""
    target = into / "pyx12-maps"
    if not target.exists():
        shutil.copytree(Path(pyx12.__file__).parent / "map", target)
        path = target / "997.4010.xml"
        text = path.read_text()
        for anchor, added in _PATCHES:
            assert text.count(anchor) == 1, anchor
            text = text.replace(anchor, added + anchor)
        path.write_text(text)
    return target


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def validate_997(data: bytes, maps: Path) -> list[str]:
    """pyx12's errors for a 997 file; [] when it is valid."""
    errors = _Errors()
    logger = logging.getLogger("pyx12")
    logger.addHandler(errors)
    try:
        valid = pyx12.x12n_document.x12n_document(
            pyx12.params.params(),
            io.StringIO(data.decode("ascii")),
            None,
            None,
            fd_json=io.StringIO(),
            map_path=str(maps),
        )
    finally:
        logger.removeHandler(errors)
    if not valid and not errors.messages:
        errors.messages.append("x12n_document: not valid")
    return errors.messages


def envelope_errors(data: bytes) -> list[str]:
    """pyx12's envelope errors for any X12 file; [] when its envelopes are sound."""
    try:
        reader = pyx12.x12file.X12Reader(io.StringIO(data.decode("ascii")))
    except pyx12.errors.X12Error as exc:
        return [str(exc)]
    found: list[str] = []
    for segment in reader:
        found += [f"{segment.get_seg_id()}: {error[2]}" for error in reader.pop_errors()]
    reader.cleanup()
    found += [error[2] for error in reader.pop_errors()]
    return found
