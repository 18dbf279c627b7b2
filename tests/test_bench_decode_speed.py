"""bench/decode_speed.py runs its whole-list passes and its fixed-prefix decoder steps (whose hand-made cache must
have the decoder's layout) on two tiny models, as docs/benchmarks.md runs it on trained ones."""
import subprocess
import sys
from pathlib import Path

from tests.train.train_helpers import make_model_dir, write_data_list

ROOT = Path(__file__).resolve().parents[1]


def test_decode_speed_times_modes_and_decoder_steps_of_two_models(tmp_path, fsdd_dir):
    dirs = []
    for udps in (False, True):
        exp = tmp_path / ("udps" if udps else "scaled_dot")
        exp.mkdir()
        make_model_dir(exp, att_udps=udps, encoder="conformer")
        dirs.append(str(exp))
    data = tmp_path / "test.list"
    write_data_list(fsdd_dir, data, 4)
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "decode_speed.py"), "--exp_dirs", *dirs,
                           "--checkpoint", "avg.pt", "--test_data", str(data), "--modes", "attention",
                           "--step_prefixes", "1", "4", "--repeats", "1", "--beam_size", "2", "--batch_size", "2"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for what in ("decoder step at prefix 1:", "decoder step at prefix 4:", "attention:"):
        assert f"ratio {dirs[1]} / {dirs[0]}, {what}" in proc.stdout, proc.stdout
