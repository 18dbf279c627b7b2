import pytest
import torch

from wenet_udps.bin import export, recognize
from wenet_udps.config import load_config
from wenet_udps.decode.data_list import model_from_checkpoint
from wenet_udps.export.exporter import OrtPart
from wenet_udps.export.wrappers import FullEncoder
from wenet_udps.utils.source_info import read_source
from tests.train.train_helpers import make_model_dir, write_data_list

MODES = ["attention", "ctc_greedy_search", "ctc_prefix_beam_search", "attention_rescoring"]


def test_recognize_writes_all_four_modes(tmp_path, fsdd_dir, capsys):
    conf, ckpt = make_model_dir(tmp_path)
    data = tmp_path / "test.list"
    items = write_data_list(fsdd_dir, data, 5)
    stats = recognize.main(["--config", str(conf), "--checkpoint", str(ckpt), "--test_data", str(data),
                            "--result_dir", str(tmp_path / "res"), "--modes", *MODES, "--beam_size", "3",
                            "--batch_size", "2"])
    assert "RTF" in capsys.readouterr().out and stats["audio_seconds"] > 1.0 and stats["rtf"] > 0
    for mode in MODES:
        lines = (tmp_path / "res" / mode / "text").read_text().splitlines()
        assert sorted(line.split(" ", 1)[0] for line in lines) == sorted(i["key"] for i in items)
    # Issue 47 sweep: the record says what ran (the model's own chunk size as applied, the bound, the options).
    info = read_source(str(tmp_path / "res" / "attention" / "decode.info"))
    assert info["checkpoint"] == str(ckpt) and info["decoding_chunk_size"] == "-1" and info["beam_size"] == "3"
    assert info["max_len_ratio"] == "1.0" and info["overrides"] == "none" and info["modes"] == " ".join(MODES)
    with pytest.raises(SystemExit):
        recognize.main(["--config", str(conf), "--checkpoint", str(ckpt), "--test_data", str(data),
                        "--result_dir", str(tmp_path / "r2"), "--modes", "beam"])


@pytest.mark.parametrize("family,encoder", [("scaled_dot", "transformer"), ("udps", "conformer"),
                                            ("udps", "transformer"), ("cosine", "conformer")])
def test_export_parity(tmp_path, fsdd_dir, family, encoder):
    conf, ckpt = make_model_dir(tmp_path, att_family=family, encoder=encoder, chunks={"use_dynamic_chunk": True})
    data = tmp_path / "test.list"
    write_data_list(fsdd_dir, data, 3)
    out = tmp_path / "export"
    report = export.main(["--config", str(conf), "--checkpoint", str(ckpt), "--output_dir", str(out),
                          "--chunk_size", "4", "--left_chunks", "2", "--test_data", str(data)])
    for name in ("encoder", "encoder_chunk", "decoder"):
        assert (out / f"{name}.onnx").is_file() and (out / f"{name}.pt").is_file()
        assert report[f"{name}.onnx"] <= 1e-4 and report[f"{name}.torchscript"] <= 1e-4
    assert report["ort_ctc_greedy_search_mismatches"] == 0 and report["ort_attention_rescoring_mismatches"] == 0
    # The encoder is traced at batch 2 and 67 frames: other batches and lengths (each side of a subsampling step,
    # padded rows) give eager's output too, so no traced size was baked into the graph.
    config = load_config(conf)
    model, onnx_encoder = model_from_checkpoint(config, str(ckpt)), OrtPart(str(out / "encoder.onnx"))
    g = torch.Generator().manual_seed(0)
    for batch, frames in ((1, 15), (1, 100), (3, 101), (3, 104)):
        feats = torch.randn(batch, frames, config["input_dim"], generator=g)
        lens = torch.tensor([frames - 4 * i for i in range(batch)], dtype=torch.int64)
        with torch.no_grad():
            want, got = FullEncoder(model)(feats, lens), onnx_encoder(speech=feats, speech_lengths=lens)
        assert torch.equal(want[1], got[1]), (batch, frames)
        for w, o in ((want[0], got[0]), (want[2], got[2])):
            for b in range(batch):
                assert torch.allclose(w[b, :want[1][b]], o[b, :want[1][b]], atol=1e-4), (batch, frames)


def test_clip_shorter_than_the_subsampling_needs_is_skipped_and_counted(tmp_path, fsdd_dir, capsys):
    """Issue 29: a 50 ms clip alone in a batch crashed the conv2d front end and the whole set was lost."""
    import json

    import numpy as np
    import soundfile as sf
    from wenet_udps.model_builder import min_input_frames
    conf, ckpt = make_model_dir(tmp_path)
    data = tmp_path / "test.list"
    items = write_data_list(fsdd_dir, data, 3)
    sf.write(str(tmp_path / "short.wav"), np.full(400, 0.1, dtype=np.float32), 8000)  # 50 ms: 3 frames
    with open(data, "a") as f:
        f.write(json.dumps({"key": "short", "wav": str(tmp_path / "short.wav"), "txt": "ONE"}) + "\n")
    assert min_input_frames({"encoder_conf": {"input_layer": "conv2d"}}) == 7
    assert min_input_frames({"encoder_conf": {"input_layer": "conv2d8"}}) == 15
    recognize.main(["--config", str(conf), "--checkpoint", str(ckpt), "--test_data", str(data),
                    "--result_dir", str(tmp_path / "res"), "--modes", "ctc_greedy_search", "--batch_size", "1"])
    lines = (tmp_path / "res" / "ctc_greedy_search" / "text").read_text().splitlines()
    assert sorted(line.split(" ", 1)[0] for line in lines) == sorted(i["key"] for i in items)
    assert "3 utterances used, 1 skipped (no_frames 1)" in capsys.readouterr().err


def _run_cli(main, argv, monkeypatch, capsys):
    """(exit status, last stderr line) of ``main`` run as its command line runs it (``cli.run_cli``)."""
    import sys

    from wenet_udps.utils import cli
    monkeypatch.setattr(sys, "argv", ["prog"] + argv)
    with pytest.raises(SystemExit) as exit_info:
        cli.run_cli(main, "wenet_udps.bin.recognize")
    return exit_info.value.code, capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("case, words", [
    ("empty list", "0 utterances used, 0 skipped (none): no usable utterance"),
    ("every wav missing", "0 utterances used, 2 skipped (bad_audio 2): no usable utterance"),
])
def test_a_decode_that_used_nothing_fails_with_its_counts(tmp_path, monkeypatch, capsys, case, words):
    """Issue 47 cases 1-3: each exited 0 ("0 utterances", RTF nan, an empty text). Now exit 1, one line naming the
    list and the counts (the one rule, wenet_udps.utils.counts), and no result file. (Case 2, a raw list given as a
    shard list, is refused before decoding since issue 66: tests/decode/test_api_entry_points.py.)"""
    import json
    conf, ckpt = make_model_dir(tmp_path)
    data = tmp_path / "test.list"
    rows = [] if case == "empty list" else [{"key": f"u{i}", "wav": str(tmp_path / f"gone{i}.wav"), "txt": "ONE"}
                                             for i in range(2)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["--config", str(conf), "--checkpoint", str(ckpt), "--test_data", str(data), "--result_dir",
            str(tmp_path / "res"), "--modes", "ctc_greedy_search"]
    status, last = _run_cli(recognize.main, argv, monkeypatch, capsys)
    assert status == 1 and last.startswith(f"wenet_udps.bin.recognize: error: decode data {data}: ")
    assert words in last and "no usable utterance" in last
    assert not (tmp_path / "res" / "ctc_greedy_search" / "text").exists()


def test_a_decode_with_more_bad_audio_than_max_bad_fraction_fails(tmp_path, fsdd_dir, monkeypatch, capsys):
    """The share of the one rule: dataset_conf.max_bad_fraction of the train.yaml (default counts.MAX_BAD_FRACTION,
    0.05) holds for decoding as for training: 1 missing wav of 3 is refused, and allowed at 0.5."""
    import json
    conf, ckpt = make_model_dir(tmp_path)
    data = tmp_path / "test.list"
    write_data_list(fsdd_dir, data, 2)
    with open(data, "a") as f:
        f.write(json.dumps({"key": "gone", "wav": str(tmp_path / "gone.wav"), "txt": "ONE"}) + "\n")
    argv = ["--config", str(conf), "--checkpoint", str(ckpt), "--test_data", str(data), "--result_dir",
            str(tmp_path / "res"), "--modes", "ctc_greedy_search"]
    status, last = _run_cli(recognize.main, argv, monkeypatch, capsys)
    assert status == 1 and "33.3% of the utterances are unusable, more than dataset_conf.max_bad_fraction 0.05" in last
    recognize.main(argv + ["--override", "dataset_conf.max_bad_fraction=0.5"])
    assert len((tmp_path / "res" / "ctc_greedy_search" / "text").read_text().splitlines()) == 2
@pytest.mark.parametrize("extra, words", [
    (["--decoding_chunk_size", "16"], "--decoding_chunk_size 16: this model was trained without chunks"),
    (["--decoding_chunk_size", "16", "--simulate_streaming", "--batch_size", "1"], "trained without chunks"),
    (["--simulate_streaming", "--batch_size", "1"], "--simulate_streaming runs the encoder chunk by chunk"),
    (["--num_decoding_left_chunks", "2"], "at full context it does nothing"),
])
def test_recognize_refuses_options_the_model_ignores(tmp_path, fsdd_dir, capsys, extra, words):
    """Issue 47, cases 6-8: refused in one usage line before decoding (was: ignored, logged, or a traceback)."""
    conf, ckpt = make_model_dir(tmp_path)
    data = tmp_path / "test.list"
    write_data_list(fsdd_dir, data, 2)
    with pytest.raises(SystemExit) as info:
        recognize.main(["--config", str(conf), "--checkpoint", str(ckpt), "--test_data", str(data),
                        "--result_dir", str(tmp_path / "res"), "--modes", "ctc_greedy_search", *extra])
    lines = capsys.readouterr().err.strip().splitlines()
    assert info.value.code == 2 and words in lines[-1] and str(conf) in lines[-1], lines
    assert not (tmp_path / "res").exists()


def test_export_refuses_a_chunk_size_the_model_ignores(tmp_path, capsys):
    conf, ckpt = make_model_dir(tmp_path)
    with pytest.raises(SystemExit) as info:
        export.main(["--config", str(conf), "--checkpoint", str(ckpt), "--output_dir", str(tmp_path / "out"),
                     "--chunk_size", "4"])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert info.value.code == 2 and "--chunk_size 4: this model was trained without chunks" in line
    with pytest.raises(SystemExit) as info:
        export.main(["--config", str(conf), "--checkpoint", str(ckpt), "--output_dir", str(tmp_path / "out"),
                     "--left_chunks", "2"])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert info.value.code == 2 and "--left_chunks 2: this model was trained without chunks" in line
    with pytest.raises(SystemExit) as info:  # was a ValueError traceback after the export was written
        export.main(["--config", str(conf), "--checkpoint", str(ckpt), "--output_dir", str(tmp_path / "out"),
                     "--reverse_weight", "0.3"])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert info.value.code == 2 and "--reverse_weight 0.3 exports the right-to-left decoder's output" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("override", ["cosine_conf.alpha_form=log", "cosine_conf.eps=0.5",
                                      "encoder_conf.attention_conf.alpha_form=squared"])
def test_recognize_refuses_an_override_that_changes_what_the_weights_mean(tmp_path, fsdd_dir, capsys, override):
    """Issue 81 attack F8: --override cosine_conf.alpha_form=log decoded a linear-alpha checkpoint (the stored 5
    read as log 5: alpha e^5) with exit 0; a resume refuses the same change. One line, exit 2; a decoding option of
    the conf (max_bad_fraction, above) and an initial value, which the weights replace, stay allowed."""
    from wenet_udps.train.resume_check import meaning_changes
    conf, ckpt = make_model_dir(tmp_path, att_family="cosine")
    data = tmp_path / "test.list"
    write_data_list(fsdd_dir, data, 1)
    with pytest.raises(SystemExit) as e:
        recognize.main(["--config", str(conf), "--checkpoint", str(ckpt), "--test_data", str(data),
                        "--result_dir", str(tmp_path / "res"), "--modes", "ctc_greedy_search", "--override", override])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"--override changes what {ckpt}'s trained parameters mean: {override.split('=')[0]}: " in err, err
    assert not (tmp_path / "res" / "ctc_greedy_search" / "text").exists()
    assert meaning_changes(load_config(str(conf)), load_config(str(conf), ["cosine_conf.alpha_init=3"])) == []
