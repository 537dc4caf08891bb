"""What the torch suites share, imported after their
pytest.importorskip("torch"); their seeded generator is conftest.py's `gen`."""

import pytest
import torch

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")


def f64(x):
    return x.detach().to("cpu", torch.float64).numpy()
