"""The blocks a file's mapping children hand their parent, watched through the
audit event the parent raises for each (``child.BLOCK_TAKEN``, Python's
``sys.audit``): no hook of the product's is replaced.

An audit hook cannot be removed, so this module adds one, once, and passes the
event on to whoever listens at the time (``listening``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from services.api.edi.parallel.child import BLOCK_TAKEN

Listener = Callable[[int, int], None]  # (child pid, block number)
_listeners: list[Listener] = []


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event == BLOCK_TAKEN:
        for listener in list(_listeners):
            listener(*args)


sys.addaudithook(_hook)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Call ``listener(pid, block)`` for each block taken from a child meanwhile."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)
