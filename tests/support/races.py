"""Races for tests: calls run in threads released together."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def race(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run the calls in threads released together; each one's result or exception."""
    results: list[Any] = [None] * len(calls)
    start = threading.Barrier(len(calls))

    def run(n: int) -> None:
        start.wait()
        try:
            results[n] = calls[n]()
        except Exception as exc:  # the race's losers answer with one
            results[n] = exc

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    return results
