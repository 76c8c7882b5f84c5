"""The ledger writer (docs/architecture.md#the-settlement-transaction): one interface,
``LedgerWriter.commit(conn, unit) -> UnitResult | None``, chosen by backend in
one place (``writer_for``): the portable writer, and PostgreSQL's, which keeps
its rules and changes only how rows go in."""

from shared.adapters.db.ledger.writer import LedgerWriter, writer_for

__all__ = ["LedgerWriter", "writer_for"]
