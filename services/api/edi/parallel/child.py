"""The mapping child of ``services/api/edi/parallel/parent.py``: how it is started, its
life, the frames it writes, the word it and the parent share, and the parent's
end of its pipe.

The pipe is the queue: a child blocks on its write once the pipe (1 MiB where
Linux allows) is full, so it runs at most about a block ahead and the parent
holds at most a block of its lines (a few MiB). A reader thread was not needed:
it would take the GIL from the mapping thread for the same bytes.

A child is never forked from the API, a threaded process: the mapping fork
server forks it (``forkserver.py`` says why). It is sent the file (its spool's
descriptor), its part of the layout, the query, its pipe and the shared page;
it reads the file again from the page cache (``read_file``: about a third of
the mapping's time, on the child's own core while the parent maps its first
blocks, which it would map alone anyway), then maps its blocks. Where there is
no fork server, or ``SETTLEQ_X12_MAP_PROCESSES=1``, mapping stays in process.
"""

from __future__ import annotations

import atexit
import gc
import mmap
import os
import select
import signal
import struct
import sys
import time
from collections import deque
from collections.abc import Iterator
from contextlib import suppress
from itertools import islice
from typing import cast

import msgspec

try:
    import fcntl  # POSIX, as the fork server
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

from services.api.edi.parallel import forkserver
from services.api.edi.parallel.layout import Layout
from services.api.edi.spool.pages import Spooled
from shared.domain.kinds import KINDS
from shared.domain.x12 import EdiRefused
from shared.domain.x12.mapping.files import map_stream
from shared.domain.x12.mapping.freight_210.fast import FastLine, fast_210_line
from shared.domain.x12.mapping.sets import Place, Query
from shared.domain.x12.reading.reader import read_file

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


class _Order(msgspec.Struct, array_like=True):
    """What a child is sent besides its descriptors: the query, and its part of
    the layout (its blocks follow from the file's count of sets, which it reads)."""

    contract_version: int
    partition_key: str | None
    period: str | None
    children: int
    ours: int
    theirs: int
    min_cycles: int
    child: int
    # Each sender's own query (ISA05, ISA06, version, partition, period), when
    # a file's senders settle at different profiles (``Query.senders``).
    senders: list[tuple[str, str, int, str | None, str | None]] = msgspec.field(
        default_factory=list
    )

    def layout(self) -> Layout:
        return Layout(self.children, self.ours, self.theirs, self.min_cycles)


_order = msgspec.msgpack.Encoder().encode
_read_order = msgspec.msgpack.Decoder(_Order).decode
CAN_START = forkserver.CAN_FORK and hasattr(os, "memfd_create")
# The mapping children's fork server: this module run as its main.
SERVER = forkserver.ForkServer(__name__)
atexit.register(SERVER.stop)  # the API exits: so does its server

# The audit event (``sys.audit``) the parent raises after each block it takes
# from a child, with the child's pid and the block's number: how a tracer (or a
# test) watches the children's work. With no audit hook it costs a C call.
BLOCK_TAKEN = "settleq.edi.block_taken"


class Child:
    """One mapping process, the read end of its pipe, and the page it shares with
    the parent: its progress (block, sets mapped), and the parent's limit (the
    block the parent maps from its end, and the set the child stops before)."""

    def __init__(self, pid: int, pidfd: int | None, fd: int, shared: mmap.mmap) -> None:
        self.pid, self.pidfd, self.fd, self.shared = pid, pidfd, fd, shared
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
                    sys.audit(BLOCK_TAKEN, self.pid, number)
                    ours.reverse()
                    return lines[:mine] + ours
                if self.ended:
                    break  # gone without it
                progress = _WORD.unpack_from(self.shared, _PROGRESS)[0]
                at, done = progress >> 32, progress & _LOW
                if layout.share and at <= number and done < mine - 1:
                    low = max(mine - _EVERY, done + 1)
                    _WORD.pack_into(self.shared, _LIMIT, number << 32 | low)
                    ours += [
                        fast_210_line(places[i], query.at(places[i].interchange))
                        for i in range(mine - 1, low - 1, -1)
                    ]
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
        """Kill it if it still runs, and wait for its end; once. (The fork server's
        children are reaped by the kernel: none stays a zombie.)"""
        if not self.alive:
            return
        self.alive = False
        if self.pidfd is not None:
            with suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
                select.select([self.pidfd], [], [], _GONE_S)  # readable once it has ended
            os.close(self.pidfd)
        os.close(self.fd)
        self.shared.close()
        self.buffer = bytearray()


_GONE_S = 5.0  # the longest a killed child is waited for


def start_child(source: int, query: Query, layout: Layout, child: int) -> Child | None:
    """Child ``child`` of ``layout``, to map its blocks of the file open at
    ``source`` if it is a 210 file large enough, or None if none could be started."""
    if not CAN_START:
        return None
    order = _Order(
        query.contract_version,
        query.partition_key,
        query.period,
        layout.children,
        layout.ours,
        layout.theirs,
        layout.min_cycles,
        child,
        [
            (q, i, s.contract_version, s.partition_key, s.period)
            for (q, i), s in (query.senders or {}).items()
        ],
    )
    opened: list[int] = []
    try:
        page = os.memfd_create("settleq-x12-page")
        opened.append(page)
        os.ftruncate(page, 2 * _WORD.size)
        shared = mmap.mmap(page, 2 * _WORD.size)  # MAP_SHARED: both see it
    except OSError:
        for fd in opened:
            os.close(fd)
        return None
    _WORD.pack_into(shared, _LIMIT, -1)  # no block
    read = None
    try:
        read, write = os.pipe()
        opened.append(write)
        # Where it cannot be, the default pipe (64 KiB) only makes the child wait sooner.
        with suppress(AttributeError, OSError):
            fcntl.fcntl(read, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        pid = SERVER.launch(_order(order), (source, write, page))
    except OSError:
        shared.close()
        if read is not None:
            os.close(read)
        return None
    finally:
        # Only the child holds the write end now: its end is the pipe's end.
        for fd in opened:
            os.close(fd)
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except OSError:  # it has ended already
        pidfd = None
    return Child(pid, pidfd, read, shared)


def run(message: bytes, fds: list[int]) -> None:
    """The child's whole life, in a process the fork server just forked: read
    the file, map its blocks if it is a 210 file large enough, write them.
    Whatever fails, the parent maps what is missing."""
    source, out, page = fds
    order = _read_order(message)
    os.nice(_NICE)
    gc.disable()  # it makes objects and frees none until it ends
    shared = mmap.mmap(page, 2 * _WORD.size)
    os.close(page)
    body = Spooled(source, 0, access=mmap.ACCESS_READ)
    os.close(source)
    try:
        stream = map_stream(
            read_file(cast(bytes, body)),  # it reads a spooled file's pages as bytes
            contract_version=order.contract_version,
            partition_key=order.partition_key,
            period=order.period,
            senders={(q, i): Query(v, k, p) for q, i, v, k, p in order.senders} or None,
        )
    except EdiRefused:  # refused by the parent too, which reads the same bytes
        return
    del body  # the interchanges hold it while they live
    layout, total = order.layout(), stream.set_count()
    if not wanted(stream.kind, total, layout):
        return
    spans = layout.spans(order.child, total)
    places, query = stream.places(spans), stream.query
    try:
        for cycle, (start, stop) in enumerate(spans):
            lines = _block(islice(places, stop - start), query, cycle, shared)
            # Said before the write, which may wait.
            _WORD.pack_into(shared, _PROGRESS, (cycle + 1) << 32)
            frame = _encode((cycle, lines))
            _write(out, _HEADER.pack(len(frame)) + frame)
    except BrokenPipeError:  # the parent no longer wants them, or is gone: not a fault
        return


def wanted(kind: str, total: int, layout: Layout) -> bool:
    """Whether a file of ``kind`` and ``total`` sets is mapped by children too (a
    kind of the fast path, ``Kind.x12_fast_path``: its sets' ``fast_210_line``):
    the parent and each child decide alike, on the same file."""
    fast = kind in KINDS and KINDS[kind].x12_fast_path
    return fast and layout.children >= 1 and total >= layout.min_cycles * layout.cycle


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
        lines.append(fast_210_line(place, query.at(place.interchange)))
    return lines


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


if __name__ == "__main__":
    forkserver.serve(int(sys.argv[1]), run)
