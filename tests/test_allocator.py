"""The allocator setting training makes (allocator.py): it applies on glibc, and once is enough."""

from __future__ import annotations

import sys

import pytest

from hardlinear.runtime.allocator import keep_large_blocks, keeping_large_blocks


def test_large_blocks_stay_in_the_heap_on_linux() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("mallopt is glibc's")
    assert keep_large_blocks() and keep_large_blocks()
    assert keeping_large_blocks()
