import os
from pathlib import Path

import pytest
import torch

# Without CUDA, Triton kernels run under Triton's interpreter (on CPU tensors). Triton reads TRITON_INTERPRET when a
# kernel, and its own library functions, are decorated, i.e. when triton is first imported: set it before that.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parents[1]
FSDD_DIR = (ROOT / ".." / "shared" / "data" / "fsdd" / "recordings").resolve()
REFERENCE_JSON = (ROOT / ".." / "shared" / "reference" / "wenet_state_dicts.json").resolve()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
    # A test (or the code it calls) that leaves autograd off would break every later test, far from the cause:
    # fail here instead, and restore it for the rest.
    grad_left_on = torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    assert grad_left_on, "this test left torch's grad mode disabled"


@pytest.fixture
def one_thread():
    """One intra-op thread: tiny models run faster on one (much faster when other tests share the cores), and CPU
    results depend on the thread count (a subprocess compared with in-process runs uses one too)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def fsdd_dir():
    if not FSDD_DIR.is_dir():
        pytest.fail(f"FSDD recordings not found at {FSDD_DIR}; tests expect ../shared/data/fsdd/recordings")
    return FSDD_DIR
