"""What makes an operator's note say something (shared/domain/disputes.py):
at least one visible character; whitespace and Unicode format characters
alone do not count (issue 29, G8)."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.api.disputes.routes import _request
from services.api.errors import ApiError
from shared.domain.disputes import BLANK_RANGES, NOTE_PATTERN, ResolveRequest, says_something

INVISIBLE = ["\u200b", "\u200c\u200d", "\u2060", "\ufeff", "\u00ad", " \u200b\t", "\u3000", "\x01"]


@pytest.mark.regression
@pytest.mark.parametrize("note", INVISIBLE)
def test_a_note_of_invisible_characters_is_note_required(note: str) -> None:
    # Before: only str.strip() was asked, and U+200B is not whitespace to it.
    assert not says_something(note)
    with pytest.raises(ApiError) as refused:
        _request("accept_model", note)
    assert (refused.value.status, refused.value.code) == (422, "note_required")
    with pytest.raises(ValueError):
        ResolveRequest("accept_model", note)


@pytest.mark.parametrize("note", ["ok", "\u200bok", "é", "写", "-", "'", "😀", " x "])
def test_a_note_with_one_visible_character_is_taken(note: str) -> None:
    assert says_something(note)
    assert _request("accept_model", note).note == note


_BLANK = st.characters(categories=["Cc", "Cf", "Zs", "Zl", "Zp"])


@given(st.text(_BLANK, min_size=1))
def test_no_mix_of_blank_characters_says_something(note: str) -> None:
    assert not says_something(note)


@given(st.text(_BLANK), st.characters(exclude_categories=["Cc", "Cf", "Zs", "Zl", "Zp", "Cs"]))
def test_one_character_of_any_other_category_says_something(blank: str, visible: str) -> None:
    if visible.isspace():  # e.g. U+001C..U+001F are Cc; whitespace by str.isspace
        return
    assert unicodedata.category(visible) not in {"Cc", "Cf"}
    assert says_something(blank + visible + blank)


def test_the_blank_ranges_are_unicodes_blank_characters() -> None:
    """The list the published pattern and the check are made of is exactly the
    characters that are whitespace, Cc, Cf, Zs, Zl or Zp to this Python's Unicode."""
    listed = {c for lo, hi in BLANK_RANGES for c in range(lo, hi + 1)}
    blank = {
        c
        for c in range(0x110000)
        if chr(c).isspace() or unicodedata.category(chr(c)) in {"Cc", "Cf", "Zs", "Zl", "Zp"}
    }
    assert listed == blank, sorted(listed ^ blank)[:20]


@given(st.text(max_size=30))
def test_the_published_pattern_and_the_check_agree(note: str) -> None:
    published = re.fullmatch(NOTE_PATTERN, note) is not None
    assert published == (says_something(note) and "\x00" not in note)
