"""Data printed as sent (docs/operations.md#commands): the one console every
command prints through reads no Rich markup and no ``:emoji:`` codes, and shows
control characters as escapes, so a ``[/x]`` in a URL cannot crash a table, a
``[bold]`` in a name cannot restyle it, and an ``ESC[31m`` in a note cannot
recolour the operator's terminal.

The commands' own styling goes through ``style=`` (``console.print(msg,
style="red")``), never through markup in the text: the text may hold data."""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.text import Text

# C0 controls but newline and tab, DEL, and C1 controls (CSI is U+009B).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with each control character written as its escape
    (``"\\x1b[31m"`` prints as ``\\x1b[31m``); newlines and tabs are kept."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class LiteralConsole(Console):
    """A Rich console that prints every string literally: no markup, no emoji
    codes, control characters made visible. Table cells and titles are strings
    rendered by the console too, so they are covered as well as ``print``.

    Printed to a file or a pipe, a line is written whole: Rich would wrap it at
    80 columns (no terminal to ask), splitting an id that a script or ``grep``
    reads. A terminal still wraps at its own width."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("markup", False)
        kwargs.setdefault("emoji", False)
        super().__init__(**kwargs)
        if "soft_wrap" not in kwargs and not self.is_terminal:
            self.soft_wrap = True

    def render_str(self, text: str, **kwargs: Any) -> Text:
        kwargs["markup"] = False
        kwargs["emoji"] = False
        return super().render_str(visible(text), **kwargs)
