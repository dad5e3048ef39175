"""Shared test settings: CPU only, shared-dataset location."""

import os
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED_DATASETS = REPO.parent / "shared" / "datasets"


@pytest.fixture
def cora_path():
    path = SHARED_DATASETS / "cora.npz"
    if not path.exists():
        pytest.skip("../shared/datasets/cora.npz is not available")
    return path
