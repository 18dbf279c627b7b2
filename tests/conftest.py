import os
from pathlib import Path

# pytest-xdist's workers share the cores (the README's command: one per core): each worker, and every process a test
# starts, gets its share of intra-op threads. Two 2-thread processes on 2 cores spin at every OpenMP barrier: the
# decode tests took 2.7x the CPU time (docs/benchmarks.md, "Why was UDPS slower beside another job"). A thread count
# the caller set is kept; tests of the thread count set their own.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1 and "OMP_NUM_THREADS" not in os.environ:
    _CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    os.environ["OMP_NUM_THREADS"] = str(max(1, _CORES // _WORKERS))

import pytest  # noqa: E402
import torch  # noqa: E402

from tests.skip_summary import pytest_terminal_summary  # noqa: E402, F401 (the hook: one line per skip reason)
from wenet_udps.utils.env import env_flag  # noqa: E402

try:  # the test extra's property-based tests (tests/*/test_*_properties.py): the same examples on every run
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # an install without the test extra: those tests skip (pytest.importorskip)
    pass
else:
    # derandomize: examples drawn from each test's own fixed seed, never a flaky CI run, and no example database
    # (no .hypothesis/ left in the checkout, no example replayed from an earlier run); no deadline: the shared CI
    # cores make one example's time meaningless; 60 examples keep each property test within seconds
    _hypothesis_settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60, database=None,
                                          print_blob=True)
    _hypothesis_settings.load_profile("ci")

# Without CUDA, Triton kernels run under Triton's interpreter (on CPU tensors). Triton reads TRITON_INTERPRET when a
# kernel, and its own library functions, are decorated, i.e. when triton is first imported: set it before that.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parents[1]
# What upstream WeNet's recipe configs build (state_dict names and shapes): facts, kept in the repository.
REFERENCE_JSON = ROOT / "tests" / "fixtures" / "wenet_state_dicts.json"
# FSDD's recordings: this workshop keeps a copy in ../shared; a clone has them once run.sh's stage -1 downloaded them.
FSDD_CANDIDATES = [(ROOT / ".." / "shared" / "data" / "fsdd" / "recordings").resolve(),
                   ROOT / "downloads" / "fsdd" / "recordings"]
FSDD_DIR = next((d for d in FSDD_CANDIDATES if d.is_dir()), FSDD_CANDIDATES[0])
# .ci/run matches this text to tell FSDD skips from others; keep it the start of the skip reason.
FSDD_SKIP = ("FSDD recordings not found: `bash run.sh --corpus fsdd --stage -1 --stop_stage -1` downloads them "
             "(or place them at ../shared/data/fsdd/recordings)")
# The real AN4 (SPHERE, 0.8 h): looked for where FSDD's recordings are, or at $AN4_DIR.
AN4_CANDIDATES = [Path(os.environ["AN4_DIR"])] if os.environ.get("AN4_DIR") else [
    (ROOT / ".." / "shared" / "data" / "an4" / "an4").resolve(), ROOT / "downloads" / "an4" / "an4"]
AN4_DIR = next((d for d in AN4_CANDIDATES if (d / "wav").is_dir()), AN4_CANDIDATES[0])
AN4_SKIP = ("AN4 recordings not found: `bash run.sh --corpus an4 --stage -1 --stop_stage -1` downloads them "
            "(or set AN4_DIR to a folder holding AN4's wav/ and etc/)")


def pytest_collection_modifyitems(items):
    """Mark every test that reads FSDD recordings, so `-m "not fsdd"` deselects them; run the slow tests first, so
    that with several workers (pytest -n, README's test command) the short ones fill in around them instead of two
    long run.sh tests ending the run on one worker."""
    for item in items:
        if "fsdd_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.fsdd)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
    # A test (or the code it calls) that leaves autograd off would break every later test, far from the cause:
    # fail here instead, and restore it for the rest.
    grad_left_on = torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    assert grad_left_on, "this test left torch's grad mode disabled"


@pytest.fixture(autouse=True)
def _root_logging():
    """The programs' mains call logging.basicConfig(force=True), which binds a handler to the sys.stderr of the
    moment: under capsys, a file closed when the test ends. A later test's warning then printed a 'Logging error'
    traceback into its own captured stderr (CI, 2026-12-02). The root logger's handlers and level are put back."""
    import logging
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in set(root.handlers) - set(handlers):
        root.removeHandler(handler)
        handler.close()
    for handler in handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(level)


@pytest.fixture
def one_thread():
    """One intra-op thread: tiny models run faster on one (much faster when other tests share the cores), and CPU
    results depend on the thread count (a subprocess compared with in-process runs uses one too)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def fsdd_dir():
    """FSDD's recordings folder; skips the test without it (CI sets WENET_UDPS_REQUIRE_FSDD=1 to fail instead)."""
    if not FSDD_DIR.is_dir():
        if env_flag("WENET_UDPS_REQUIRE_FSDD", False):
            pytest.fail(f"FSDD recordings not found at any of {[str(d) for d in FSDD_CANDIDATES]}")
        pytest.skip(FSDD_SKIP)
    return FSDD_DIR


@pytest.fixture(scope="session")
def an4_dir():
    """The real AN4 (SPHERE) folder; skips the test without it (.ci/run lets a clone skip it, as FSDD's tests)."""
    if not (AN4_DIR / "wav").is_dir():
        pytest.skip(AN4_SKIP)
    return AN4_DIR


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """run.sh's stages 0-7 on a tiny synthesised corpus, once per session (tests/run_sh_helpers.py); its tests share
    the xdist group "tiny_run", so that under `--dist loadgroup` one worker runs it once for all of them."""
    from tests.run_sh_helpers import run_tiny_corpus
    return run_tiny_corpus(tmp_path_factory.mktemp("tiny_run"))
