"""services/tuning/malloc.py: the API fixes glibc's mmap threshold as it starts."""

from __future__ import annotations

import subprocess
import sys

import pytest

from services.tuning import malloc


def test_the_threshold_is_fixed_where_there_is_glibc() -> None:
    # In a child: the setting is the process's, and lasts.
    code = "from services.tuning.malloc import pin_mmap_threshold; print(pin_mmap_threshold())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"  # this machine's Python is linked against glibc


def test_no_mallopt_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_libc(*args: object) -> None:
        raise OSError("no such library")

    monkeypatch.setattr(malloc.ctypes, "CDLL", no_libc)
    assert malloc.pin_mmap_threshold() is False
