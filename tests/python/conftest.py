"""The suite's kernels go to a fresh disk cache, so every run exercises the
generator as well as the cache."""

import os
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # ref.py
if "KGEN_TEST_KEEP_CACHE" not in os.environ:
    os.environ["KGEN_CACHE_DIR"] = tempfile.mkdtemp(prefix="kgen-pytest-")


@pytest.fixture
def gen():
    """A torch.Generator from a fresh seed, printed (the torch suites)."""
    import torch

    seed = int.from_bytes(os.urandom(4), "little")
    print("seed", seed)
    return torch.Generator().manual_seed(seed)
