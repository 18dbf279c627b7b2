import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FSDD_DIR = (ROOT / ".." / "shared" / "data" / "fsdd" / "recordings").resolve()
REFERENCE_JSON = (ROOT / ".." / "shared" / "reference" / "wenet_state_dicts.json").resolve()


@pytest.fixture(autouse=True)
def _seed():
    import torch
    torch.manual_seed(0)
    yield


@pytest.fixture
def fsdd_dir():
    if not FSDD_DIR.is_dir():
        pytest.fail(f"FSDD recordings not found at {FSDD_DIR}; tests expect ../shared/data/fsdd/recordings")
    return FSDD_DIR
