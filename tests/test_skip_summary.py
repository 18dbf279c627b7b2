"""The README promises one line per skip reason with its count (tests/skip_summary.py)."""
import subprocess
import sys
import textwrap

from tests.conftest import ROOT


def test_one_line_per_reason_across_files_and_parameters(tmp_path):
    # Three places skip for one reason (two files, a parametrized test), one place for another: pytest's -rs would
    # print three lines for the first reason; the summary prints two lines in all, with their counts.
    (tmp_path / "test_a.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.parametrize("x", [1, 2])
        def test_p(x):
            pytest.skip("no CUDA")

        def test_other():
            pytest.skip("not as root")
        """))
    (tmp_path / "test_b.py").write_text("import pytest\n\ndef test_b():\n    pytest.skip('no CUDA')\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.skip_summary", "-p", "no:cacheprovider",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED")]
    assert lines == ["SKIPPED [3] no CUDA", "SKIPPED [1] not as root"], proc.stdout
    assert "skips by reason (2 reasons)" in proc.stdout
