"""Issue 66, A: every decoding mode gives the same bytes (text, tokens, scores and n-best with their scores' exact
bits) for the same input, in every run, in another process and at batch size 1 and 16.

Through bench/reproducibility.py --decode, as docs/reproducibility.md measures it on a trained model: each mode of
the registry (``DECODING_METHODS``; the LM modes with an LM) decoded twice in each of two fresh processes per batch
size, the heap disturbed before each run (beam 4, an n-best of 4: the bench's beam 10 costs the prefix searches
4x the time and decides nothing here). Before: the LM modes' n-best depended on the heap (case 1), and a batch's
matrix products and padded attention rounded otherwise than one utterance's, so every mode's scores (and, near a
tie, its text) depended on the batch an utterance was in.
"""
import subprocess
import sys

from tests.decode.decode_helpers import write_clips, write_list
from tests.lm.lm_helpers import need_flashlight
from tests.lm.test_search import write_arpa
from tests.train.train_helpers import ROOT, WORDS, make_model_dir
from wenet_udps.transformer.modes import DECODING_METHODS


def test_every_mode_gives_the_same_bytes_in_every_run_process_and_batch_size(tmp_path):
    need_flashlight()
    make_model_dir(tmp_path, space=True, encoder="conformer")  # a conv module; '▁' ends words (joint_ctc_attention_lm)
    data = write_list(write_clips(tmp_path, 18), tmp_path / "test.list")  # batch 16: a padded batch and a short one
    lm = write_arpa(tmp_path / "lm.arpa", {w: -1.0 for w in WORDS})
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "reproducibility.py"), "--decode", "--exp_dir",
                           str(tmp_path), "--checkpoint", "avg.pt", "--test_data", str(data), "--lm", lm,
                           "--lm_weight", "0.5", "--word_score", "0", "--runs", "2", "--batch_sizes", "1", "16",
                           "--beam_size", "4",
                           "--threads", "1"], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {line.split(" | ")[0].lstrip("| "): line for line in proc.stdout.splitlines() if line.startswith("| ")}
    for mode in DECODING_METHODS:
        assert rows[mode].endswith("| yes |"), proc.stdout
    assert "every mode identical in every run and setting: yes" in proc.stdout, proc.stdout
