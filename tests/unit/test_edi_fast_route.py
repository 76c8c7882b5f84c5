"""The front door's fast route for X12 210s (services/api/edi/ingest.py::EdiIngest._take):
a document of the 210 fast path is stored as the bytes it made, unscreened. Its
chunks must be the very bytes of the general route (map_210's dict, encoded,
screened or modelled), or settlement would read another invoice."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from services.api.edi.ingest import EdiIngest, EdiQuery
from services.api.intake.ingest import EDI_X12
from shared.config.settings import ProducerKey, Settings
from shared.domain.x12 import EdiRefused
from shared.domain.x12.acknowledging.answer import acknowledge
from shared.domain.x12.mapping import files as mapping
from shared.domain.x12.mapping.freight_210.fast import fast_210_line
from shared.domain.x12.synthetic import freight_210_file
from tests.unit.x12.build import DATA, REALDATA

# Small chunks, so that a file's documents span several and the cuts are compared too.
SETTINGS = Settings(database_url="sqlite://", max_chunk_documents=7, max_chunk_lines=11)
NOW = dt.datetime(2026, 3, 15, 12, 0, tzinfo=dt.UTC)
KEY = ProducerKey(key_id="k", secrets=["s"], partitions=["*"])


def _files() -> list[tuple[str, bytes]]:
    real = sorted(REALDATA.glob("x12_210/*")) or [DATA / "210-MGCTLYST-SAMPLE.EDI"]
    files = [(p.name, p.read_bytes()) for p in real if p.is_file()]
    files.append(("synthetic", freight_210_file(400, seed=3, carriers=4, sets_per_group=90)))
    return files


def x12_ingest(settings: Settings) -> EdiIngest:
    """The front door's ingest of an X12 body under contract version 2, its 997
    numbered 1 (no database)."""
    return EdiIngest(
        settings,
        KEY,
        EDI_X12,
        query=EdiQuery(2),
        acknowledge=lambda ics, problems: acknowledge(
            ics, problems, control_numbers=[1] * len(ics), now=NOW
        ),
    )


def _chunks(body: bytes) -> list[tuple[int, int, bytes]] | str:
    ingest = x12_ingest(SETTINGS)
    ingest.feed(body)
    try:
        batch = ingest.finish()
    except EdiRefused as exc:  # a refusal: both routes must give the same one
        return repr(exc.problems)
    return [(c.documents, c.lines, c.payload) for c in batch.chunks]


@pytest.mark.parametrize(("name", "body"), _files(), ids=lambda v: v if isinstance(v, str) else "")
def test_the_fast_route_stores_the_general_routes_bytes(
    name: str, body: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _chunks(body)
    taken: list[Any] = []

    def counted(place: Any, query: Any) -> Any:
        line = fast_210_line(place, query)
        taken.append(line)
        return line

    monkeypatch.setattr(mapping, "fast_210_line", counted)
    assert _chunks(body) == fast
    if isinstance(fast, list):  # an accepted file: its sets took the fast route
        assert taken and all(line is not None for line in taken), "the fast path was not taken"
    monkeypatch.setattr(mapping, "fast_210_line", lambda place, query: None)
    assert _chunks(body) == fast
