"""Training targets are admitted or skipped-and-counted, and shard members are checked before they are read
(issue 36: impossible CTC targets, literal special symbols, shard keys with white space, oversized members)."""
import io
import json
import logging
import tarfile
import tracemalloc

import pytest
import torch

from tests.dataset.data_helpers import plain_conf
from tests.dataset.test_bad_data import _shard_tally, _tar
from wenet_udps.dataset import init_dataset
from wenet_udps.dataset.dataset import DataTally
from wenet_udps.dataset.lists import MAX_MEMBER_BYTES, iterate_shard, member_cap
from wenet_udps.model_builder import ctc_output_frames
from wenet_udps.transformer.embedding import PositionalEncoding
from wenet_udps.train.targets import TargetAdmission, ctc_frames_needed
from wenet_udps.transformer.subsampling import SUBSAMPLING_CLASSES


def _first_wav(kaldi_dir):
    return next(iter(line.split()[1] for line in open(kaldi_dir / "wav.scp")))


def _pass(tokenizer, lst, admission, **conf):
    ds = init_dataset("raw", str(lst), tokenizer, plain_conf(max_bad_fraction=1.0, **conf), admission=admission)
    tally = DataTally()
    keys = [k for b in tally.batches(ds) for k in b["keys"]]
    return ds, tally, keys


@pytest.mark.parametrize("layer", sorted(SUBSAMPLING_CLASSES))
def test_output_frames_are_what_the_front_end_really_gives(layer):
    cls = SUBSAMPLING_CLASSES[layer]
    pos_enc = PositionalEncoding(d_model=8, dropout_rate=0.0)
    module = cls(idim=40, odim=8, dropout_rate=0.0, pos_enc_class=pos_enc).eval()
    for frames in (cls.min_frames(), cls.min_frames() + 1, 37, 100, 101):
        x = torch.zeros(1, frames, 40)
        _, _, mask = module(x, torch.ones(1, 1, frames, dtype=torch.bool))
        assert cls.output_frames(frames) == mask.size(2), (layer, frames)


def test_ctc_frames_needed_counts_a_blank_between_repeats():
    assert ctc_frames_needed([]) == 0
    assert ctc_frames_needed([3, 4, 5]) == 3
    assert ctc_frames_needed([3, 3, 4, 4, 4]) == 8  # two blanks between the 4s, one between the 3s


def test_ctc_impossible_target_is_filtered_counted_and_named(kaldi_dir, tokenizer, tmp_path, caplog):
    """A 0.3-0.6 s digit (about 12 encoder frames at 4x) with 60 tokens: CTC cannot align it; its loss would be 0
    under zero_infinity while the decoder trains on it."""
    wav = _first_wav(kaldi_dir)
    lst = tmp_path / "data.list"
    lst.write_text(json.dumps({"key": "ok", "wav": wav, "txt": "one"}) + "\n"
                   + json.dumps({"key": "long", "wav": wav, "txt": " ".join(["one two"] * 20)}) + "\n")
    config = {"encoder_conf": {"input_layer": "conv2d"}, "model_conf": {"ctc_weight": 0.3}}
    admission = TargetAdmission(tokenizer, ctc_output_frames(config))
    with caplog.at_level(logging.INFO):
        ds, tally, keys = _pass(tokenizer, lst, admission, filter_conf={"max_output_input_ratio": 100})
    assert keys == ["ok"] and tally.skipped() == {"ctc_frames": 1}
    assert "1 utterances used, 1 skipped (ctc_frames 1)" in ds.check_tally(tally, "epoch 0 train")
    assert any("filtered utterance long" in r.message and "CTC" in r.message for r in caplog.records)
    # Decoding admits every target, and a model without CTC (ctc_weight 0) has no impossible target.
    assert _pass(tokenizer, lst, None, filter_conf={"max_output_input_ratio": 100})[2] == ["ok", "long"]
    no_ctc = TargetAdmission(tokenizer, ctc_output_frames({"model_conf": {"ctc_weight": 0.0}}))
    assert _pass(tokenizer, lst, no_ctc, filter_conf={"max_output_input_ratio": 100})[2] == ["ok", "long"]


@pytest.mark.parametrize("text, symbols", [("one <blank> two", "<blank>"), ("one <sos/eos>", "<sos/eos>"),
                                           ("<unk> two", "<unk>"), ("<blank><sos/eos>", "<blank>, <sos/eos>")])
def test_literal_special_symbols_are_skipped_counted_and_named(kaldi_dir, tokenizer, tmp_path, caplog, text,
                                                                symbols):
    wav = _first_wav(kaldi_dir)
    lst = tmp_path / "data.list"
    lst.write_text(json.dumps({"key": "ok", "wav": wav, "txt": "one"}) + "\n"
                   + json.dumps({"key": "sym", "wav": wav, "txt": text}) + "\n")
    # Without the check the tokenizer does turn them into the reserved ids (what the admission check prevents).
    if "<unk>" not in text:
        ids = tokenizer.tokenize(text)[1]
        assert {0, len(tokenizer.symbol_table) - 1} & set(ids)
    with caplog.at_level(logging.WARNING):
        ds, tally, keys = _pass(tokenizer, lst, TargetAdmission(tokenizer, None))
    assert keys == ["ok"] and tally.skipped() == {"special_symbol": 1}
    warned = [r.message for r in caplog.records if "sym" in r.message]
    assert warned and f"reserved symbol(s) {symbols}" in warned[0]


def test_shard_member_names_with_white_space_are_skipped_and_counted(kaldi_dir, tokenizer, tmp_path, caplog):
    wav = open(_first_wav(kaldi_dir), "rb").read()
    members = [("a b.txt", b"one"), ("a b.wav", wav), ("x\ny.txt", b"two"), ("x\ny.wav", wav),
               ("good.txt", b"one"), ("good.wav", wav)]
    with caplog.at_level(logging.WARNING):
        _, tally, used = _shard_tally(tokenizer, tmp_path, [_tar(tmp_path / "s.tar", members)],
                                      max_bad_fraction=1.0)
    assert used == 1 and tally.skipped() == {"bad_key": 2}
    assert sum("white space" in r.message for r in caplog.records) == 2


class _Zeros(io.RawIOBase):
    """``size`` zero bytes, never held in memory at once."""

    def __init__(self, size):
        self.left = size

    def read(self, n=-1):
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        return bytes(n)


def test_oversized_shard_member_is_skipped_unread_and_counted(kaldi_dir, tokenizer, tmp_path, caplog):
    """A 128 MB all-zero WAV compresses to a small .tar.gz; it is skipped from its header, never read whole (the
    stream still inflates it block by block to get past it: about 30 MB at once for zeros, not 128)."""
    wav = open(_first_wav(kaldi_dir), "rb").read()
    path = tmp_path / "big.tar.gz"
    big = 128 << 20
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for name, size, data in (("big.txt", 3, io.BytesIO(b"one")), ("big.wav", big, _Zeros(big)),
                                 ("ok.txt", 3, io.BytesIO(b"one")), ("ok.wav", len(wav), io.BytesIO(wav))):
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, data)
    assert path.stat().st_size < 4 << 20
    stats = dict.fromkeys(("bad_key", "oversize_member", "bad_text", "missing_member", "shard_ok",
                           "shard_ok_utts", "shard_error", "shard_error_utts"), 0)
    tracemalloc.start()
    with caplog.at_level(logging.WARNING):
        keys = [s["key"] for s in iterate_shard(str(path), stats, max_member_bytes=8 << 20)]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert keys == ["ok"] and stats["oversize_member"] == 1 and peak < big // 2
    assert any("'big.wav' has 134217728 bytes, more than the 8388608" in r.message for r in caplog.records)
    # Through the dataset: the cap follows filter_conf.max_length (default 10240 frames: about 80 MB).
    _, tally, used = _shard_tally(tokenizer, tmp_path, [path], max_bad_fraction=1.0,
                                  filter_conf={"max_length": 1000, "min_length": 0})
    assert used == 1 and tally.skipped() == {"oversize_member": 1}
    assert member_cap(10240) < 100 << 20 and member_cap(1e12) == MAX_MEMBER_BYTES


def test_raw_audio_past_max_length_is_filtered_from_its_header_unread(tokenizer, tmp_path):
    """The class of item 14 for data.list files: a 400 s WAV (12.8 MB as float32) against max_length 10 s."""
    import numpy as np
    import soundfile as sf
    sf.write(str(tmp_path / "long.wav"), np.zeros(400 * 8000, dtype=np.int16), 8000)
    lst = tmp_path / "data.list"
    lst.write_text(json.dumps({"key": "long", "wav": str(tmp_path / "long.wav"), "txt": "one"}) + "\n")
    ds = init_dataset("raw", str(lst), tokenizer, plain_conf(filter_conf={"max_length": 1000, "min_length": 0}))
    tally = DataTally()
    tracemalloc.start()
    assert list(tally.batches(ds)) == []
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert tally.skipped() == {"max_length": 1} and peak < 4 << 20


def test_empty_and_blank_transcripts_are_unusable_not_filtered(kaldi_dir, tokenizer, tmp_path, caplog):
    """Issue 66 G: a training list whose transcripts were half empty or blank trained: they were counted as
    ``token_min_length`` (filtered by choice). Now they are ``empty_text`` (unusable): skipped with a warning,
    counted in the pass's line, and a pass with more of them than max_bad_fraction is refused."""
    from wenet_udps.dataset.dataset import DataError
    wav = _first_wav(kaldi_dir)
    lst = tmp_path / "data.list"
    texts = {"a": "one", "b": "", "c": "two", "d": " \t\u3000"}
    lst.write_text("".join(json.dumps({"key": k, "wav": wav, "txt": t}) + "\n" for k, t in texts.items()))
    with caplog.at_level(logging.WARNING):
        ds, tally, keys = _pass(tokenizer, lst, TargetAdmission(tokenizer, None))
    assert keys == ["a", "c"] and tally.skipped() == {"empty_text": 2}
    warned = " | ".join(r.message for r in caplog.records)
    assert "transcript of b is empty or blank: nothing to train on" in warned and "transcript of d is empty" in warned
    strict = init_dataset("raw", str(lst), tokenizer, plain_conf(max_bad_fraction=0.4),
                          admission=TargetAdmission(tokenizer, None))
    with pytest.raises(DataError, match=r"2 utterances used, 2 skipped \(empty_text 2\): 50.0% of the utterances "
                                        r"are unusable, more than dataset_conf.max_bad_fraction 0.4"):
        strict.check_tally(tally, "epoch 0 train")


def test_transcripts_mostly_of_unknown_tokens_are_unusable_and_counted(kaldi_dir, tokenizer, tmp_path, caplog):
    """Issue 66 G: lower-case transcripts in a hand-made data.list under upper-case units (here: upper case under
    lower-case units) trained as all-<unk> targets after one warning, and the count was never logged. More than
    half the tokens <unk>: ``unk_text``, the warning giving the count; a few unknown tokens are kept."""
    wav = _first_wav(kaldi_dir)
    lst = tmp_path / "data.list"
    texts = {"ok": "one two", "upper": "ONE TWO", "few": "one two three seven nine q"}
    lst.write_text("".join(json.dumps({"key": k, "wav": wav, "txt": t}) + "\n" for k, t in texts.items()))
    unknown = [t for t in "q" if t not in tokenizer.symbol_table]
    with caplog.at_level(logging.WARNING):
        ds, tally, keys = _pass(tokenizer, lst, TargetAdmission(tokenizer, None))
    assert keys == ["ok", "few"] and tally.skipped() == {"unk_text": 1}, (keys, tally.skipped())
    assert unknown  # "few" holds an unknown token, under the share
    warned = [r.message for r in caplog.records if "transcript of upper" in r.message]
    assert warned and "6 of its 7 tokens are not in the units" in warned[0] and "'O'" in warned[0], warned
    assert "2 utterances used, 1 skipped (unk_text 1)" in ds.check_tally(tally, "epoch 0 train")
