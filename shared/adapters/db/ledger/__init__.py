"""The ledger writer (docs/architecture.md#the-settlement-transaction): one interface,
``LedgerWriter.commit(conn, unit) -> UnitResult | None``, chosen by backend in
one place (``writer_for``): the portable writer, and PostgreSQL's, which keeps
its rules and changes only how rows go in. A dispute's resolution is booked
through it too (``LedgerWriter.lock_disputes``, ``resolve_one``,
``resolve_selected`` -> ``Booked``), and a job's rows are found through it
(``job_ranges``, ``within``). This is the package's public face: the
dispute queue and the jobs import nothing else of it (pyproject.toml's import
contracts)."""

from shared.adapters.db.ledger.read.ranges import job_ranges, within
from shared.adapters.db.ledger.resolutions import Booked, Outboxed
from shared.adapters.db.ledger.writer import LedgerWriter, writer_for

__all__ = ["Booked", "LedgerWriter", "Outboxed", "job_ranges", "within", "writer_for"]
