"""``--help`` as an operator reads it (docs/operations.md#commands).

- A flag is a flag: typer prints a ``<bool>`` placeholder after every boolean
  option (``--wait <bool>``), as if it took a value; here it prints none.
- ``[default: ...]`` in a help string is Rich markup to typer (it vanishes):
  :func:`default` writes it escaped.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperOption

_display_type = TyperOption.display_type_rich


def _no_flag_placeholder(self: TyperOption, ctx: Any) -> str | None:
    return None if self.is_flag else _display_type(self, ctx)


setattr(TyperOption, "display_type_rich", _no_flag_placeholder)  # noqa: B010


def default(text: Any) -> str:
    """`` [default: text]`` that Rich shows as written."""
    return f" \\[default: {text}]"
