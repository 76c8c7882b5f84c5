"""Supervision of ``settleq up`` and ``settleq worker --processes N``
(docs/architecture.md#one-failure-stays-one-failure,
docs/architecture.md#processes-and-the-supervisor).

- :mod:`.policy`: when a dead child is restarted and when the supervisor gives
  up (pure: plain values and times, no processes);
- :mod:`.counts`: the restart counts the supervisor publishes in a small JSON
  file for the API's ``settleq_process_restarts_total``;
- :mod:`.processes`: the loop that starts, watches, restarts and stops children.
"""
