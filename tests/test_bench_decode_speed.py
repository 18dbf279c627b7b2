"""bench/decode_speed.py runs its whole-list passes (with an LM too), its fixed-prefix decoder steps, its neighbour
process and its long synthetic utterance on tiny models, as docs/benchmarks.md runs it on trained ones."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lm.lm_helpers import need_flashlight, need_lmplz
from tests.train.train_helpers import WORDS, make_model_dir, write_data_list
from wenet_udps.lm.build import build_arpa

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
    proc = subprocess.run([sys.executable, "-m", "bench.decode_speed", "--exp_dirs", *dirs,
                           "--checkpoint", "avg.pt", "--test_data", str(data), "--modes", "attention",
                           "--step_prefixes", "1", "4", "--repeats", "1", "--beam_size", "2", "--batch_size", "2"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for what in ("decoder step at prefix 1:", "decoder step at prefix 4:", "attention:"):
        assert f"ratio {dirs[1]} / {dirs[0]}, {what}" in proc.stdout, proc.stdout
    # Every sub-layer's time is counted, the cached self-attention step (prefix 4) too.
    shares = re.findall(r"prefix 4, .*self_attn ([\d.]+), src_attn ([\d.]+), feed_forward ([\d.]+)\)", proc.stdout)
    assert len(shares) == 2 and all(float(ms) > 0 for row in shares for ms in row), proc.stdout


def test_decode_speed_times_all_modes_next_to_a_neighbour_and_a_long_utterance(tmp_path, fsdd_dir):
    """By default the five modes without an LM; the neighbour runs during the timing and is gone after; the long
    utterance is decoded in attention with eos suppressed (as many tokens as encoder frames), in
    attention_rescoring and in joint_ctc_attention, at each length asked for; joint / rescoring side by side."""
    exp = tmp_path / "udps"
    exp.mkdir()
    make_model_dir(exp, att_udps=True)
    data = tmp_path / "test.list"
    write_data_list(fsdd_dir, data, 2)
    proc = subprocess.run([sys.executable, "-m", "bench.decode_speed", "--exp_dirs", str(exp),
                           "--checkpoint", "avg.pt", "--test_data", str(data), "--neighbour", "busyloop",
                           "--long_utterance_s", "1.5", "0.8", "--step_prefixes", "3", "--repeats", "1",
                           "--beam_size", "2", "--batch_size", "2"], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for mode in ("ctc_greedy_search", "ctc_prefix_beam_search", "attention", "attention_rescoring",
                 "joint_ctc_attention"):
        assert f"s for 1 passes of {mode}, RTF" in proc.stdout, proc.stdout
    assert re.search(r": ratio joint_ctc_attention / attention_rescoring: [\d.]+\n", proc.stdout), proc.stdout
    assert "neighbour busyloop)" in proc.stdout and "early" not in proc.stdout
    pid = int(re.search(r"neighbour busyloop: pid (\d+)", proc.stdout).group(1))
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    long = re.search(r"long utterance 1.5 s \(150 frames, T' (\d+)\): encoder [\d.]+ s, attention \(eos suppressed, "
                     r"(\d+) tokens\) [\d.]+ s, attention_rescoring [\d.]+ s, ratio attention / attention_rescoring "
                     r"[\d.]+", proc.stdout)
    assert long and long.group(1) == long.group(2), proc.stdout
    for seconds in ("1.5", "0.8"):
        assert re.search(rf"long utterance {seconds} s: joint_ctc_attention \(\d+ tokens\) [\d.]+ s, [\d.]+ us per "
                         rf"frame x token, ratio joint_ctc_attention / attention_rescoring [\d.]+", proc.stdout)


def run_bench(*args):
    return subprocess.run([sys.executable, "-m", "bench.decode_speed", *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


def test_decode_speed_times_the_lm_modes_beside_the_others(tmp_path, fsdd_dir):
    """With --lm the default modes are all eight, each timed with its RTF; an LM mode without --lm, or --lm with no
    LM mode, is a usage error."""
    exp = tmp_path / "scaled_dot"
    exp.mkdir()
    make_model_dir(exp, space=True, att_udps=False)  # (the word boundary joint_ctc_attention_lm needs)
    data = tmp_path / "test.list"
    write_data_list(fsdd_dir, data, 2)
    common = ["--exp_dirs", str(exp), "--checkpoint", "avg.pt", "--test_data", str(data), "--repeats", "1",
              "--beam_size", "2", "--batch_size", "2"]
    refused = run_bench(*common, "--modes", "attention_rescoring_lm")
    assert refused.returncode == 2 and "need a word LM: add --lm" in refused.stderr, refused.stderr
    need_lmplz()
    need_flashlight()
    build_arpa([w for w in WORDS for _ in range(3)], str(tmp_path / "lm.arpa"), order=2)
    refused = run_bench(*common, "--modes", "attention", "--lm", str(tmp_path / "lm.arpa"))
    assert refused.returncode == 2 and "applies to the *_lm modes only" in refused.stderr, refused.stderr
    proc = run_bench(*common, "--lm", str(tmp_path / "lm.arpa"), "--lm_weight", "1.0", "--ctc_weight", "0.5")
    assert proc.returncode == 0, proc.stderr[-2000:]
    for mode in ("ctc_greedy_search", "ctc_prefix_beam_search", "attention", "attention_rescoring",
                 "joint_ctc_attention", "ctc_prefix_beam_search_lm", "attention_rescoring_lm",
                 "joint_ctc_attention_lm"):
        assert f"s for 1 passes of {mode}, RTF" in proc.stdout, proc.stdout


def test_decode_speed_times_each_mode_without_and_with_hotwords(tmp_path, fsdd_dir):
    """--context_file: every mode that takes hotwords is timed without and with the list in each pass, with the
    ratio; a mode that does not take them is timed once; a bad list is a usage error naming the line."""
    exp = tmp_path / "udps"
    exp.mkdir()
    make_model_dir(exp)
    data = tmp_path / "test.list"
    write_data_list(fsdd_dir, data, 2)
    hot = tmp_path / "hot.txt"
    hot.write_text("".join(f"{w}\n" for w in WORDS), encoding="utf-8")
    common = ["--exp_dirs", str(exp), "--checkpoint", "avg.pt", "--test_data", str(data), "--repeats", "1",
              "--beam_size", "2", "--batch_size", "2"]
    proc = run_bench(*common, "--modes", "ctc_greedy_search", "attention_rescoring", "joint_ctc_attention",
                     "--context_file", str(hot))
    assert proc.returncode == 0, proc.stderr[-2000:]
    for mode in ("attention_rescoring", "joint_ctc_attention"):
        assert f"passes of {mode} with hotwords, RTF" in proc.stdout, proc.stdout
        assert re.search(rf"ratio {mode} with hotwords / without: [\d.]+", proc.stdout), proc.stdout
    assert "ctc_greedy_search with hotwords" not in proc.stdout
    hot.write_text("ONE\nQUIZ\n", encoding="utf-8")
    refused = run_bench(*common, "--modes", "attention_rescoring", "--context_file", str(hot))
    assert refused.returncode == 2 and f"{hot}:2: the phrase 'QUIZ'" in refused.stderr, refused.stderr


def test_each_variant_is_warmed_up_before_any_pass_is_timed():
    """A list's graph fills its step memo (and the joint search's rows) on first use, once per list: the warm-up
    decodes with the list too, so the timed passes compare the steady states (the first bench warmed only the plain
    variant, and its first pass with the list paid the fill)."""
    from types import SimpleNamespace

    import torch

    from bench.decode_speed import HOT, timed_passes

    events = []
    graph = object()

    class Model:
        def decode(self, modes, feats, lengths, beam, **kwargs):
            events.append(("decode", tuple(modes), kwargs.get("context") is graph))

    def clock():
        events.append(("clock",))
        return 0.0

    batch = {"feats": torch.zeros(1, 4, 2), "feats_lengths": torch.tensor([4])}
    args = SimpleNamespace(modes=["ctc_greedy_search", "attention_rescoring"], graphs={"exp": graph}, repeats=1,
                           beam_size=2, ctc_weight=None, length_bonus=0.0)
    seconds = timed_passes({"exp": (Model(), [batch], 1.0, 0.01)}, {}, args, clock)
    assert ("exp", "attention_rescoring" + HOT) in seconds and ("exp", "ctc_greedy_search" + HOT) not in seconds
    before = events[:events.index(("clock",))]
    assert ("decode", ("attention_rescoring",), True) in before, before
    assert ("decode", ("ctc_greedy_search", "attention_rescoring"), False) in before, before
