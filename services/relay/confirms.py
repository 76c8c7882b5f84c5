"""Which publisher confirms the broker has sent on the relay's channel."""

from __future__ import annotations


class Confirms:
    """Which delivery tags of a channel in confirm mode the broker has acked.

    Tags count 1, 2, 3... per channel; an ack covers one tag, or every tag up to
    it (``multiple``). Acks usually come in order, but the broker does not
    promise it, so tags acked out of order wait above the contiguous floor."""

    def __init__(self) -> None:
        self.floor = 0  # every tag up to here is acked
        self._above: set[int] = set()

    def ack(self, tag: int, multiple: bool) -> None:
        if multiple:
            self.floor = max(self.floor, tag)
            self._above = {t for t in self._above if t > self.floor}
        elif tag > self.floor:
            self._above.add(tag)
        while self.floor + 1 in self._above:
            self.floor += 1
            self._above.discard(self.floor)
