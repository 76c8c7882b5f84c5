"""The ledger's read side: what reads the ledger out rather than writing it.

- ``feed``: every row once, in commit order (``GET /v1/ledger/feed``).
- ``history``: a line's story and a document's lines, from the ledger's
  indexes whatever its size.
- ``events``: the rows the relay builds its outcome events from.
- ``ranges``: where a job's and a document's rows are, by id.

The journal joins them next. Nothing here imports the ledger's writer
(pyproject.toml's import contracts): a read never books a row, so a change to
how rows are written cannot reach a reader."""
