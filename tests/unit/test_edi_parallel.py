"""A 210 file mapped by a child process too (services/api/edi/parallel/parent.py), which
the mapping fork server starts (edi/forkserver.py): its chunks, counts, skipped
sets, 997 and refusals must be those of the in-process path in every case,
whatever becomes of the child or the server, and no child may outlive the
request. The blocks are made a few sets long, so that small files span many
of them."""

from __future__ import annotations

import json
import mmap
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.api.edi.parallel import child as edi_child
from services.api.edi.parallel import forkserver
from services.api.edi.parallel import parent as edi_parallel
from services.api.edi.parallel.layout import Layout
from services.api.edi.query import EdiQuery
from services.api.edi.spool.file import Spool
from shared.adapters.db.edi.partners import Partner
from shared.config.settings import Settings
from shared.domain.x12 import EdiRefused
from shared.domain.x12.mapping.files import map_stream
from shared.domain.x12.reading.reader import read_file
from shared.domain.x12.synthetic import freight_210_file, promo_810_file
from tests.support import edi_blocks
from tests.unit.test_edi_fast_route import x12_ingest
from tests.unit.x12.build import DATA, REALDATA

# The product's wait for a child's block (5 s), not less: with 0.5 s, a child
# slowed by a loaded machine (ci-like, the cluster suite beside the main one)
# was given up on and every block mapped by the parent, so tests that count
# the child's blocks failed. A child that is killed or stopped is still given
# up on at once or after this wait, whatever it is.
TINY = Layout(children=1, ours=3, theirs=5, min_cycles=1)
# The parent waits for each of the child's blocks: the child maps every set of them.
WAITING = Layout(children=1, ours=3, theirs=5, min_cycles=1, share=False)
taken: list[int] = []  # the blocks taken from a child, in the current test


def _settings(processes: int) -> Settings:
    # Small chunks, so that the cuts between chunks are compared too.
    return Settings(
        database_url="sqlite://",
        max_chunk_documents=7,
        max_chunk_lines=11,
        x12_map_processes=processes,
    )


def _descendants() -> set[int]:
    """This process's child processes and theirs (from /proc), but the mapping
    fork server, which stays for the next file."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    server = edi_child.SERVER.process
    return found - ({server.pid} if server is not None else set())


@pytest.fixture(autouse=True)
def _no_child_left(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    before = _descendants()
    monkeypatch.setattr(edi_parallel, "default_layout", TINY)
    taken.clear()
    with edi_blocks.listening(lambda pid, block: taken.append(block)):
        yield
    assert _descendants() <= before, "a mapping child outlived its file"


def _outcome(body: bytes, processes: int) -> Any:
    """Everything the front door makes of a file: its chunks' bytes and counts,
    partitions, skipped sets and 997, or its refusal's problems."""
    ingest = x12_ingest(_settings(processes))
    ingest.feed(body)
    try:
        batch = ingest.finish()
    except EdiRefused as exc:
        return ("refused", repr(exc.problems), len(exc.interchanges))
    assert batch.edi is not None
    chunks = [(c.documents, c.lines, c.payload) for c in batch.chunks]
    edi = (batch.edi.skipped, batch.edi.acknowledgement, batch.edi.senders)
    return (chunks, batch.documents, batch.lines, sorted(batch.partitions), edi)


def _same(body: bytes, layout: Layout = TINY) -> Any:
    """The outcome in process, checked to be the outcome with children."""
    alone = _outcome(body, 1)
    edi_parallel.default_layout = layout  # put back by the fixture's monkeypatch
    shared = _outcome(body, layout.children + 1)
    assert shared == alone
    return alone


def _real_files() -> list[tuple[str, bytes]]:
    real = sorted(REALDATA.glob("x12_210/*")) or [DATA / "210-MGCTLYST-SAMPLE.EDI"]
    return [(p.name, p.read_bytes()) for p in real if p.is_file()]


def _with_set(body: bytes, index: int, pattern: str, replacement: str) -> bytes:
    """``body`` with set ``index`` (0-based, in file order) changed: the first
    match of ``pattern`` replaced, and its SE count kept right."""
    text = body.decode("ascii")
    starts = [m.start() for m in re.finditer(r"ST\*210\*", text)]
    start = starts[index]
    end = text.index("~", text.index("SE*", start)) + 1
    changed = re.sub(pattern, replacement, text[start:end], count=1)
    added = changed.count("~") - text[start:end].count("~")
    changed = re.sub(r"SE\*(\d+)\*", lambda m: f"SE*{int(m[1]) + added}*", changed)
    return (text[:start] + changed + text[end:]).encode("ascii")


QUERY = map_stream(
    read_file(freight_210_file(1, seed=1, carriers=1)),
    contract_version=2,
    partition_key=None,
    period=None,
).query
SLOW = (r"C3\*USD~", "B2A*00~C3*USD~")  # valid, not for the fast path: map_210 maps it
BAD = (r"(L3\*[^~]*\*)(\d+)~", r"\1X\2~")  # a charge that does not read: a problem


def _name(value: object) -> str:
    return value if isinstance(value, str) else ""


@pytest.mark.parametrize(("name", "body"), _real_files(), ids=_name)
def test_a_real_file_is_the_same_on_two_processes(name: str, body: bytes) -> None:
    _same(body, Layout(children=1, ours=1, theirs=1, min_cycles=1, share=False))
    taken.clear()
    _same(body, Layout(children=1, ours=1, theirs=3, min_cycles=1))
    try:
        sets = sum(len(g.sets) for ic in read_file(body) for g in ic.groups)
    except EdiRefused:  # refused as read, before any set is mapped
        sets = 0
    assert taken or sets < 2  # a set mapped by the child, if it has two


def _launches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The children the fork server is asked for, from now on."""
    launched: list[int] = []
    real = edi_child.SERVER.launch
    monkeypatch.setattr(edi_child.SERVER, "launch", lambda *a: launched.append(1) or real(*a))
    return launched


def test_a_small_file_stays_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    launched = _launches(monkeypatch)
    _same(freight_210_file(200, seed=1, carriers=3), Layout(children=1))
    assert not launched


def test_a_file_of_another_kind_or_too_few_sets_stops_its_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Started when the file is received, before its kind and sets are known
    (here the 810's first bytes are taken to say nothing of its kind)."""
    launched = _launches(monkeypatch)
    few = Layout(children=1, ours=300, theirs=500, min_cycles=2)  # 1,600 sets, not 1,000
    _same(freight_210_file(1000, seed=2, carriers=3), few)
    monkeypatch.setattr(edi_parallel, "may_be_210", lambda head: True)
    _same(promo_810_file(300, seed=3, vendors=3), TINY)
    assert len(launched) == 2 and not taken


def test_a_file_whose_first_set_is_no_210_starts_no_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    launched = _launches(monkeypatch)
    _same(promo_810_file(300, seed=3, vendors=3), TINY)
    assert not launched


@pytest.mark.parametrize(
    ("head", "maybe"),
    [
        (freight_210_file(3, seed=1, carriers=1), True),
        (freight_210_file(3, seed=1, carriers=1).replace(b"~\n", b"~"), True),
        (promo_810_file(3, seed=1, vendors=1), False),
        (promo_810_file(3, seed=1, vendors=1).replace(b"*", b"|"), False),  # its own separator
        (promo_810_file(3, seed=1, vendors=1)[:130], True),  # no ST yet: maybe
        (b"not x12 at all", True),  # the reader will say what it is
    ],
)
def test_a_files_first_set_tells_whether_it_may_be_a_210(head: bytes, maybe: bool) -> None:
    assert edi_parallel.may_be_210(head) is maybe


@pytest.mark.parametrize(
    "layout",
    [
        TINY,
        WAITING,
        Layout(children=2, ours=2, theirs=3, min_cycles=1),
        Layout(children=1, ours=0, theirs=16, min_cycles=1),
    ],
)
def test_a_file_of_many_blocks_is_the_same_on_two_processes(layout: Layout) -> None:
    body = freight_210_file(300, seed=5, carriers=4, sets_per_group=7, groups_per_interchange=3)
    chunks = _same(body, layout)[0]
    assert sum(documents for documents, _, _ in chunks) == 300
    assert len(taken) == sum(len(layout.spans(child, 300)) for child in range(layout.children))


def test_a_block_mapped_from_both_ends_is_the_same() -> None:
    """Blocks of 64 sets: the child maps each from its front, the parent from its end."""
    body = freight_210_file(2000, seed=4, carriers=4, sets_per_group=50)
    for index in range(1000, 1064, 3):
        body = _with_set(body, index, *SLOW)
    layout = Layout(children=1, ours=0, theirs=64, min_cycles=1)
    _same(body, layout)
    # Each block came from the child, in whatever share: it was never dropped.
    blocks = list(range(len(layout.spans(0, 2000))))
    assert taken == blocks


@pytest.mark.parametrize("layout", [TINY, WAITING])
def test_slow_sets_in_the_childs_blocks_are_mapped_by_the_parent(layout: Layout) -> None:
    body = freight_210_file(120, seed=6, carriers=3, sets_per_group=11)
    for index in (3, 4, 7, 11, 12, 60, 119):  # the child's blocks are sets 3-7, 11-15, ...
        body = _with_set(body, index, *SLOW)
    chunks = _same(body, layout)[0]
    assert sum(documents for documents, _, _ in chunks) == 120
    assert taken


@pytest.mark.parametrize("layout", [TINY, WAITING])
def test_a_refusal_lists_the_same_problems_in_the_same_order(layout: Layout) -> None:
    body = freight_210_file(120, seed=7, carriers=3, sets_per_group=13)
    for index in (0, 3, 5, 9, 13, 14, 77, 118):  # in both processes' blocks
        body = _with_set(body, index, *BAD)
    for index in (4, 15):
        body = _with_set(body, index, *SLOW)
    refused = _same(body, layout)
    assert refused[0] == "refused"
    assert refused[1].count("edi_bad_number") == 8
    assert taken


def _kill_at(number: int, how: signal.Signals) -> Any:
    """A listener (after the fixture's, which counts the block in ``taken``)."""

    def hook(pid: int, block: int) -> None:
        if len(taken) == number:
            os.kill(pid, how)

    return hook


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP])
def test_a_child_killed_or_stopped_mid_file_changes_nothing(
    how: signal.Signals, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its 250 blocks of 5 sets do not fit in the pipe: it cannot be done before it is stopped.
    body = freight_210_file(2000, seed=8, carriers=3, sets_per_group=9)
    body = _with_set(body, 27, *SLOW)
    alone = _outcome(body, 1)
    with edi_blocks.listening(_kill_at(2, how)):
        assert _outcome(body, 2) == alone
        # The frames it wrote before are taken, in order, then no more. On a
        # loaded machine the parent may map every set before the child's first
        # frame comes (ci-like, with the cluster suite beside it: none taken),
        # which changes nothing either.
        assert taken == list(range(len(taken))) and len(taken) < 250
        taken.clear()
        refused = _with_set(body, 1990, *BAD)
        alone = _outcome(refused, 1)
        assert alone[0] == "refused"
        assert _outcome(refused, 2) == alone
        # The refusal may be found, and the child stopped, before the child's
        # first frames come (on a loaded machine it was): whatever was taken is
        # its file's blocks in order from the first, and not all of them.
        assert taken == list(range(len(taken))) and len(taken) < 250


def test_a_child_refused_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    body = freight_210_file(100, seed=9, carriers=3)
    alone = _outcome(body, 1)

    def refused(*_: object) -> int:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(edi_child.SERVER, "launch", refused)
    assert _outcome(body, 2) == alone
    assert not taken


def test_a_fork_server_killed_is_started_again() -> None:
    body = freight_210_file(100, seed=11, carriers=3)
    alone = _outcome(body, 1)
    edi_child.SERVER.start()
    server = edi_child.SERVER.process
    assert server is not None
    server.kill()
    server.wait()
    assert _outcome(body, 2) == alone  # in process: the server was found dead
    assert _outcome(body, 2) == alone
    assert taken  # a new server's child mapped blocks
    assert edi_child.SERVER.process is not None
    assert edi_child.SERVER.process.pid != server.pid


def test_a_fork_server_that_does_not_answer_is_stopped_and_the_file_mapped_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = freight_210_file(100, seed=13, carriers=3)
    alone = _outcome(body, 1)
    # A server of the mapping children's own module, waiting 0.3 s (not 10) for
    # its answer and for its exit: the one the file's request asks for a child.
    server = forkserver.ForkServer(edi_child.__name__, answer_s=0.3, exit_s=0.3)
    try:
        server.start()
        stuck = server.process
        assert stuck is not None
        os.kill(stuck.pid, signal.SIGSTOP)
        monkeypatch.setattr(edi_child.SERVER, "launch", server.launch)
        started = time.monotonic()
        assert _outcome(body, 2) == alone
        assert time.monotonic() - started < 5
        assert stuck.poll() is not None  # killed, not left stopped
        assert server.process is None  # started again on the next file
        assert not taken
    finally:
        server.stop()


def test_a_request_stopped_early_leaves_no_child() -> None:
    """A consumer that stops (an exception, a closed generator) kills and reaps
    the child: the fixture finds none left."""
    spool = Spool()
    data = freight_210_file(200, seed=10, carriers=3)
    spool.write(data)
    stream = map_stream(
        read_file(spool.mapped()), contract_version=2, partition_key=None, period=None
    )
    source = spool.fileno()
    assert source is not None
    mappers = edi_parallel.start(source, spool.size, data[:4096], stream.query, 2)
    entries = edi_parallel.entries(stream, mappers)
    got = [next(entries) for _ in range(20)]
    # A child was started (whether it still runs when the 20th line is read
    # depends on the machine's load: it may have mapped its half already).
    assert len(got) == 20 and mappers is not None
    assert any(child is not None for child in mappers.children)
    entries.close()
    spool.close()


def test_a_file_received_but_not_mapped_leaves_no_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """A request that ends between the read and the mapping (a 409, a 503):
    closing the ingest stops the children started when the file came."""
    launched: list[int] = []
    launch = edi_child.SERVER.launch

    def counted(message: bytes, fds: Any) -> int:
        launched.append(launch(message, fds))
        return launched[-1]

    monkeypatch.setattr(edi_child.SERVER, "launch", counted)
    ingest = x12_ingest(_settings(2))
    ingest.feed(freight_210_file(200, seed=12, carriers=3))
    ingest.read()
    # A child was started when the file came: whether it still runs now depends
    # on the machine's load (a loaded one let it map its blocks and end first,
    # and ``_descendants()`` was then empty).
    assert launched
    ingest.close()


def _child_writing(frame: bytes, progress: tuple[int, int]) -> edi_child.Child:
    """A real child that writes ``frame`` and says it is at ``progress``, then waits."""
    shared = mmap.mmap(-1, 16)
    edi_child._WORD.pack_into(shared, edi_child._PROGRESS, progress[0] << 32 | progress[1])
    edi_child._WORD.pack_into(shared, edi_child._LIMIT, -1)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, frame)
            time.sleep(30)
        finally:
            os._exit(0)
    os.close(write)
    return edi_child.Child(pid, os.pidfd_open(pid), read, shared)


def _four_places() -> list[Any]:
    """The places of a 4-set 210 file, for a child's block 0."""
    stream = map_stream(
        read_file(freight_210_file(4, seed=1, carriers=1)),
        contract_version=2,
        partition_key=None,
        period=None,
    )
    return list(stream.places())


@pytest.mark.parametrize(
    "frame",
    [
        b"",  # gone before a word
        edi_child._HEADER.pack(1000) + b"short",  # a frame cut short
        edi_child._HEADER.pack(5) + b"\xc1garb",  # not msgpack
        edi_child._HEADER.pack(3) + b"\x92\x01\x90",  # block 1 where 0 is due
        edi_child._HEADER.pack(3) + b"\x92\x00\x90",  # block 0 of no set: short of 4
    ],
)
def test_a_garbled_slow_or_short_child_is_dropped_and_reaped(frame: bytes) -> None:
    child = _child_writing(frame, (1, 0))  # past its block 0: the parent waits for it
    places = _four_places()
    assert child.block(0, places, QUERY, Layout(children=1, timeout_s=0.3)) is None
    assert not child.alive
    assert os.waitpid(child.pid, 0)[0] == child.pid  # ended (this test's own child)


def test_a_child_that_does_not_start_leaves_its_block_to_the_parent() -> None:
    """A child that never gets to its block (a busy machine): the parent maps it
    all from its end, then waits for the child's word that it stopped."""
    child = _child_writing(b"", (0, 0))
    places = _four_places()
    assert child.block(0, places, QUERY, Layout(children=1, timeout_s=0.3)) is None
    assert not child.alive and child.shared.closed
    assert os.waitpid(child.pid, 0)[0] == child.pid


@pytest.mark.regression
def test_a_file_of_two_senders_settles_each_at_its_profile_on_two_processes() -> None:
    """Issue 42 (M4): each interchange at its own sender's profile, the children
    too (they are started on the first sender's alone, then again)."""
    first = freight_210_file(40, seed=6, carriers=2, sets_per_group=7)
    second = freight_210_file(40, seed=7, carriers=2, sets_per_group=7)
    body = first + second.replace(b"SQSYNTH210     ", b"SQSYNTH999     ")
    profiles = {
        ("ZZ", "SQSYNTH210"): Partner("ZZ", "SQSYNTH210", "one", 3, None, None, "always"),
        ("ZZ", "SQSYNTH999"): Partner("ZZ", "SQSYNTH999", "two", 5, None, None, "always"),
    }

    def outcome(processes: int) -> list[tuple[str, int]]:
        ingest = x12_ingest(_settings(processes))
        ingest.query = EdiQuery(None)
        ingest.partner = lambda q, i: profiles.get((q, i))
        ingest.feed(body)
        batch = ingest.finish()
        return [
            (d["correlation_id"].split(":")[1], d["contract_version"])
            for c in batch.chunks
            for d in json.loads(c.payload)
        ]

    alone = outcome(1)
    assert {v for s, v in alone if s == "SQSYNTH210"} == {3}
    assert {v for s, v in alone if s == "SQSYNTH999"} == {5}
    assert outcome(TINY.children + 1) == alone
    assert taken, "no block was mapped by a child"
