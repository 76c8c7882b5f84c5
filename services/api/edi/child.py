"""The forked child of ``services/api/edi/parallel.py``: its life, the frames it
writes, the word it and the parent share, and the parent's end of its pipe.

The pipe is the queue: a child blocks on its write once the pipe (1 MiB where
Linux allows) is full, so it runs at most about a block ahead and the parent
holds at most a block of its lines (a few MiB). A reader thread was not needed:
it would take the GIL from the mapping thread for the same bytes.

Why ``fork`` is acceptable in a threaded process (the database store thread,
pika's publisher threads, hashing threads): only the forking thread lives on in
the child, so any lock another thread held stays held there. The child
therefore runs nothing that takes one: it restores the default signal handlers
(uvicorn installed its own, which would run in it), closes every inherited
descriptor but its pipe (a socket, a database connection or another request's
pipe is then never held open by it; closing a descriptor only drops the
child's own reference), runs only pure mapping code already imported (no
import, no logging, no lock, no thread), and leaves by ``os._exit`` whatever
happens: it never returns into the server's code, runs no atexit handler and
no finalizer. Where ``os.fork`` does not exist, mapping stays in process, and
``SETTLEQ_X12_MAP_PROCESSES=1`` keeps it there anywhere. Python 3.12 warns of
any fork in a process with threads (the reasoning above is why this one is
safe); the lock pins 3.11, and an upgrade needs that warning filtered here.
"""

from __future__ import annotations

import gc
import mmap
import os
import select
import signal
import struct
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import suppress
from itertools import islice
from typing import TYPE_CHECKING, NoReturn

import msgspec

try:
    import fcntl  # POSIX, as fork
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

from shared.domain.x12.freight_fast import FastLine, fast_210_line
from shared.domain.x12.mapping import MappedStream
from shared.domain.x12.sets import Place, Query

if TYPE_CHECKING:
    from services.api.edi.layout import Layout

_PIPE_BYTES = 1 << 20
# The child yields its core to anything else that wants it (PostgreSQL storing
# the chunks already made, another request): the parent maps what it leaves.
_NICE = 10
_HEADER = struct.Struct("<Q")  # the frame's length
# Two words the processes share, each written by one: a block's number and a
# count of its sets in one aligned 8-byte word (block << 32 | count), which is
# read and written whole (it cannot be seen half old, half new).
_WORD = struct.Struct("<q")
_PROGRESS = 0  # by the child: its block, and the sets of it it has mapped
_LIMIT = _WORD.size  # by the parent: a block, and the set of it the child stops before
_LOW = (1 << 32) - 1
_EVERY = 8  # sets between the child's looks at the shared page
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(tuple[int, list[FastLine | None]]).decode
_SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGCHLD")
    if hasattr(signal, name)
)
CAN_FORK = hasattr(os, "fork")

# Tests only: called in the parent with the child's pid after each block taken
# from it (to kill or stop it mid-file).
after_block: Callable[[int, int], None] | None = None


class Child:
    """One forked mapper, the read end of its pipe, and the page it shares with
    the parent: its progress (block, sets mapped), and the parent's limit (the
    block the parent maps from its end, and the set the child stops before)."""

    def __init__(self, pid: int, fd: int, shared: mmap.mmap) -> None:
        self.pid, self.fd, self.shared = pid, fd, shared
        self.buffer = bytearray()
        self.alive = True
        self.ended = False  # its pipe

    def block(
        self, number: int, places: list[Place], query: Query, layout: Layout
    ) -> list[FastLine | None] | None:
        """The answers for its block ``number`` (``places``), or None if it cannot
        give them (dead, garbled, too slow: ``alive`` is then False). Rather than
        wait (``layout.share``), the parent maps the block from its end, a few
        sets at a time, each first marked in ``shared`` as sets the child must
        stop before, until it meets the child's progress: so neither process
        waits for the other, however fast each one runs."""
        size = len(places)
        ours: list[FastLine | None] = []  # answers of places[mine:], last first
        mine = size
        try:
            deadline = time.monotonic() + layout.timeout_s
            while True:
                self._fill(0)
                lines = self._lines(number)
                if lines is not None:
                    if not mine <= len(lines) <= size:
                        break  # it stopped short of the sets left to it
                    if after_block is not None:
                        after_block(self.pid, number)
                    ours.reverse()
                    return lines[:mine] + ours
                if self.ended:
                    break  # gone without it
                progress = _WORD.unpack_from(self.shared, _PROGRESS)[0]
                at, done = progress >> 32, progress & _LOW
                if layout.share and at <= number and done < mine - 1:
                    low = max(mine - _EVERY, done + 1)
                    _WORD.pack_into(self.shared, _LIMIT, number << 32 | low)
                    ours += [fast_210_line(places[i], query) for i in range(mine - 1, low - 1, -1)]
                    mine = low
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    break  # too slow
                self._fill(left)  # it is writing the block, or should be
        except (OSError, ValueError, msgspec.DecodeError, msgspec.ValidationError):
            pass
        self.stop()
        return None

    def _lines(self, number: int) -> list[FastLine | None] | None:
        """Block ``number``'s answers if its frame is in (``ValueError`` for a
        frame out of place)."""
        while len(self.buffer) >= _HEADER.size:
            need = _HEADER.size + _HEADER.unpack_from(self.buffer)[0]
            if len(self.buffer) < need:
                return None
            got, lines = _decode(self.buffer[_HEADER.size : need])
            del self.buffer[:need]
            if got != number:
                raise ValueError("a frame out of place")
            return lines
        return None

    def _fill(self, timeout_s: float) -> bool:
        """Read what the pipe holds, waiting up to ``timeout_s`` for it: whether
        anything came (``ended`` once the child closed its end)."""
        got = False
        while not self.ended and select.select([self.fd], [], [], timeout_s)[0]:
            data = os.read(self.fd, 1 << 20)
            self.ended = not data  # its last frames may still be in the buffer
            self.buffer += data
            got, timeout_s = bool(data), 0
        return got

    def stop(self) -> None:
        """Kill it if it still runs, and reap it; once."""
        if not self.alive:
            return
        self.alive = False
        with suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with suppress(ChildProcessError):  # someone else reaped it
            os.waitpid(self.pid, 0)
        os.close(self.fd)
        self.shared.close()
        self.buffer = bytearray()


def fork_child(stream: MappedStream, query: Query, spans: list[tuple[int, int]]) -> Child | None:
    """A child mapping ``spans``, or None if none could be made."""
    try:
        shared = mmap.mmap(-1, 2 * _WORD.size)  # MAP_SHARED: both see it
    except OSError:
        return None
    _WORD.pack_into(shared, _LIMIT, -1)  # no block
    try:
        read, write = os.pipe()
    except OSError:
        shared.close()
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        shared.close()
        return None
    if pid == 0:
        _child(stream, query, spans, write, shared)
    os.close(write)
    # Where it cannot be, the default pipe (64 KiB) only makes the child wait sooner.
    with suppress(AttributeError, OSError):
        fcntl.fcntl(read, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    return Child(pid, read, shared)


def _child(
    stream: MappedStream, query: Query, spans: list[tuple[int, int]], fd: int, shared: mmap.mmap
) -> NoReturn:
    """The child's whole life: map its blocks, write them, ``os._exit``."""
    code = 1
    try:
        for number in _SIGNALS:
            signal.signal(number, signal.SIG_DFL)
        gc.disable()  # touch no page of the parent's heap to walk it
        os.nice(_NICE)
        os.closerange(3, fd)
        os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))
        places = stream.places(spans)
        for cycle, (start, stop) in enumerate(spans):
            lines = _block(islice(places, stop - start), query, cycle, shared)
            _WORD.pack_into(
                shared, _PROGRESS, (cycle + 1) << 32
            )  # before the write, which may wait
            frame = _encode((cycle, lines))
            _write(fd, _HEADER.pack(len(frame)) + frame)
        code = 0
    except BaseException:  # noqa: BLE001, S110 - the parent maps whatever is missing
        pass
    finally:
        os._exit(code)


def _block(
    places: Iterator[Place], query: Query, cycle: int, shared: mmap.mmap
) -> list[FastLine | None]:
    """A child's block mapped from its front, up to the set the parent mapping
    it from its end got to (``_Child.block``), which it reads in ``shared``
    every ``_EVERY`` sets, where it says how far it is."""
    lines: list[FastLine | None] = []
    for place in places:
        if not len(lines) % _EVERY:
            limit = _WORD.unpack_from(shared, _LIMIT)[0]
            if limit >> 32 == cycle and len(lines) >= limit & _LOW:
                deque(places, maxlen=0)  # the parent's
                break
            _WORD.pack_into(shared, _PROGRESS, cycle << 32 | len(lines))
        lines.append(fast_210_line(place, query))
    return lines


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
