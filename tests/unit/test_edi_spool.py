"""An X12 file spooled and read from its mapped pages (services/api/edi/spool/file.py,
shared/domain/x12/reading/pages.py): the same interchanges, problems and documents as
from ``bytes``, with at most a few windows of the file in memory at a time."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings

from services.api.edi.parallel import parent as edi_parallel
from services.api.edi.spool.file import Spool, Spooled
from services.api.errors import ApiError
from shared.domain.x12.mapping.files import map_stream
from shared.domain.x12.mapping.freight_210.fast import FastLine
from shared.domain.x12.reading import pages
from shared.domain.x12.reading.reader import read_file
from shared.domain.x12.synthetic import freight_210_file, promo_810_file
from tests.support import edi_blocks
from tests.unit.x12.test_fuzz import SEEDS, mutated
from tests.unit.x12.test_reader_paths import _SYNTHETIC, _read

SMALL_WINDOW = 3 * 4096  # a few pages: small files are let go of as they are read


def spooled(data: bytes, part: int = 65536) -> Any:
    spool = Spool()
    for at in range(0, len(data), part):
        spool.write(data[at : at + part])
    return spool.mapped()


@pytest.fixture
def small_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pages, "WINDOW", SMALL_WINDOW)


def _documents(data: Any, **query: Any) -> list[Any]:
    stream = map_stream(
        read_file(cast(bytes, data)), contract_version=1, partition_key=None, period=None, **query
    )
    return [e.json if isinstance(e, FastLine) else e for e in stream.entries]


@pytest.mark.usefixtures("small_window")
def test_a_spooled_file_reads_as_its_bytes_do() -> None:
    for data, _ in _SYNTHETIC + SEEDS:
        assert _read(spooled(data), fast=True) == _read(data, fast=True)
        assert _read(spooled(data), fast=False) == _read(data, fast=False)


@settings(
    max_examples=200,
    deadline=None,  # an example's time depends on the machine's load, not the reader
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutated())
def test_a_spooled_mutated_real_file_reads_as_its_bytes_do(data: bytes) -> None:
    old = pages.WINDOW
    pages.WINDOW = SMALL_WINDOW  # hypothesis runs outside function-scoped fixtures
    try:
        assert _read(spooled(data), fast=True) == _read(data, fast=True)
    finally:
        pages.WINDOW = old


@pytest.mark.usefixtures("small_window")
def test_a_spooled_file_maps_to_the_same_documents() -> None:
    for data in (
        freight_210_file(600, seed=5, carriers=3),
        freight_210_file(300, seed=6, carriers=1).replace(b"~\n", b"~"),
        promo_810_file(200, seed=4, vendors=3),
    ):
        assert _documents(spooled(data)) == _documents(data)


@pytest.mark.usefixtures("small_window")
def test_a_spooled_file_maps_the_same_on_two_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child reads the spooled file itself, from its descriptor."""
    data = freight_210_file(900, seed=8, carriers=2)
    layout = edi_parallel.Layout(children=1, ours=40, theirs=70, min_cycles=2)
    monkeypatch.setattr(edi_parallel, "default_layout", layout)
    taken: list[int] = []
    spool = Spool()
    spool.write(data)
    stream = map_stream(
        read_file(spool.mapped()), contract_version=1, partition_key=None, period=None
    )
    source = spool.fileno()
    assert source is not None
    with edi_blocks.listening(lambda pid, block: taken.append(block)):
        mappers = edi_parallel.start(source, spool.size, data[:4096], stream.query, 2)
        entries = [
            e.json if isinstance(e, FastLine) else e for e in edi_parallel.entries(stream, mappers)
        ]
    spool.close()
    assert entries == _documents(data)
    assert len(taken) == len(layout.spans(0, 900))


def _resident_kib(inode: int) -> int:
    """The Rss of this process's mapping of the file ``inode`` (its smaps entry)."""
    lines: Iterator[str] = iter(Path("/proc/self/smaps").read_text().splitlines())
    for line in lines:
        fields = line.split()
        if len(fields) >= 5 and "-" in fields[0] and fields[4] == str(inode):
            for more in lines:
                if more.startswith("Rss:"):
                    return int(more.split()[1])
    raise AssertionError("the spooled file is not mapped")


def test_a_large_file_is_never_resident_whole() -> None:
    data = freight_210_file(30_000, seed=9, carriers=2)  # about 18 MB
    spool = Spool()
    for at in range(0, len(data), 1 << 20):
        spool.write(data[at : at + (1 << 20)])
    assert spool._file is not None
    inode = os.fstat(spool._file.fileno()).st_ino
    body = spool.mapped()
    peaks: list[int] = []
    forget = Spooled.forget

    def watched(self: Spooled, start: int, stop: int) -> None:
        peaks.append(_resident_kib(inode))
        forget(self, start, stop)

    Spooled.forget = watched  # type: ignore[method-assign]
    try:
        documents = _documents(body)
    finally:
        Spooled.forget = forget  # type: ignore[method-assign]
    assert len(documents) == 30_000
    assert len(peaks) > 10  # each pass let go as it went, many times
    # The window a pass is in, what it keeps behind, and the kernel's fault-around
    # (about 1.7 windows here), with room for a kernel that maps larger folios.
    assert max(peaks) <= 3 * pages.WINDOW // 1024, (max(peaks), len(data))
    assert max(peaks) < len(data) // 1024 // 2


def test_a_spooled_files_count_and_startswith_are_bytes_ones() -> None:
    data = (b"ISA*00~" + b"x" * 3000 + b"~\n") * 700  # over 2 MiB: counted in pieces
    body = spooled(data, part=100_000)
    assert isinstance(body, Spooled)
    for start, end in ((0, None), (5, 2_100_000), (1_048_570, 1_048_580), (10, 3)):
        assert body.count(b"~", start, end) == data.count(b"~", start, end)
    assert body.count(b"~\n", 0, None) == data.count(b"~\n")
    assert body.startswith(b"ISA") and body.startswith((b"XX", b"ISA*"))
    assert body.startswith(b"ISA", 3009) == data.startswith(b"ISA", 3009)
    assert not body.startswith(b"ISA", 1)


def test_an_empty_file_is_empty_bytes() -> None:
    assert Spool().mapped() == b""
    spool = Spool()
    spool.write(b"")
    assert spool.mapped() == b""


def test_a_spool_that_cannot_be_written_is_a_503(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", "/nonexistent/settleq-spool")
    with pytest.raises(ApiError) as refused:
        Spool().write(b"ISA")
    assert (refused.value.status, refused.value.code) == (503, "spool_unavailable")
    assert "retry later" in refused.value.message


def test_windows_cover_the_range_and_end_after_a_terminator(small_window: None) -> None:
    data = freight_210_file(100, seed=2, carriers=1)
    body = spooled(data)
    pieces = list(pages.windows(body, 7, len(data), b"~"))
    assert len(pieces) > 3
    assert [a for a, _ in pieces[1:]] == [b for _, b in pieces[:-1]]
    assert pieces[0][0] == 7 and pieces[-1][1] == len(data)
    assert all(data[b - 1 : b] == b"~" for _, b in pieces[:-1])
    assert all(b - a <= SMALL_WINDOW for a, b in pieces)
    assert list(pages.windows(data, 7, len(data), b"~")) == [(7, len(data))]  # bytes
