"""The shapes on the wire that more than one process writes (docs/api.md).

The API answers with them and the webhooks process sends them as event data,
so a ``job.completed`` tells a job exactly as ``GET /v1/jobs/{job_id}`` shows
it. Owned here rather than by either process, so that neither imports the
other. Plain values in (rows read by the adapters, described as protocols),
Pydantic models out: no connection, no service, no adapter; an import-linter
contract (pyproject.toml) keeps it so.
"""
