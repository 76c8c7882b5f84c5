"""``--help`` as an operator reads it (docs/operations.md#commands).

- A flag is a flag: typer prints a ``<bool>`` placeholder after every boolean
  option (``--wait <bool>``), as if it took a value; here it prints none.
- ``[default: ...]`` in a help string is Rich markup to typer (it vanishes):
  :func:`default` writes it escaped.
- A help text's paragraph is one paragraph: in its Rich mode typer keeps a
  docstring's line breaks inside a paragraph and wraps at the terminal's
  width as well, so a line broke mid-sentence wherever the source did. A
  paragraph is joined here (one that starts with ``\\b`` keeps its lines, as
  click's own formatter does), and Rich wraps it once.
"""

from __future__ import annotations

import inspect
from typing import Any

from typer import rich_utils
from typer.core import TyperOption

_display_type = TyperOption.display_type_rich


def _no_flag_placeholder(self: TyperOption, ctx: Any) -> str | None:
    return None if self.is_flag else _display_type(self, ctx)


setattr(TyperOption, "display_type_rich", _no_flag_placeholder)  # noqa: B010


def reflow(text: str) -> str:
    """``text`` with each paragraph on one line (``\\b`` paragraphs as written)."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split()) for p in paragraphs)


_command_help = rich_utils._make_command_help
_get_help_text = rich_utils._get_help_text


def _reflowed_command_help(*, help_text: str, markup_mode: Any) -> Any:
    return _command_help(help_text=reflow(help_text), markup_mode=markup_mode)


def _reflowed_help_text(*, obj: Any, markup_mode: Any) -> Any:
    if obj.help:
        obj.help = reflow(obj.help)
    return _get_help_text(obj=obj, markup_mode=markup_mode)


setattr(rich_utils, "_make_command_help", _reflowed_command_help)  # noqa: B010
setattr(rich_utils, "_get_help_text", _reflowed_help_text)  # noqa: B010


def default(text: Any) -> str:
    """`` [default: text]`` that Rich shows as written."""
    return f" \\[default: {text}]"
