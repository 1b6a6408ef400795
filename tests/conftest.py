"""Shared test fixtures. Tests run on CPU with few threads: on a 2-core machine a busy neighbour
process slows torch many-fold, so nothing here times anything. Plain helpers: tests/helpers.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.helpers import SHARED_DATA

torch.set_num_threads(1)


@pytest.fixture
def shared_data() -> Path:
    """../shared/data, or skip: the real corpora are beside the checkout, never inside it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data not found at {SHARED_DATA}")
    return SHARED_DATA
