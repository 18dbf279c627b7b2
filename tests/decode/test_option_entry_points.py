"""Issue 57, D (S9, M6, M7) and C (M13, M15): every entry point that decodes (recognize, bench/decode_speed.py and
the Python API's transcribe, decode_list and stream) refuses a bad decoding option alike, through the one check
(``decode_options.resolve_decode_options``): the command lines as a one-line usage error, Python as a UserError
(a ValueError), each naming the option and what is valid."""
import importlib
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from bench import decode_speed
from tests.decode.decode_helpers import streaming_exp
from wenet_udps.bin import recognize
from wenet_udps.utils.cli import UserError

ROOT = Path(__file__).resolve().parents[2]

# (option, value, mode, the words of both refusals): values out of range (S9, M13) and options no mode uses (M15).
CASES = [
    ("ctc_weight", 5.0, "attention_rescoring", "must be in [0, 1], got 5"),
    ("ctc_weight", math.nan, "attention_rescoring", "expected a finite number"),
    ("lm_weight", -5.0, "attention_rescoring", "must be in [0, 5], got -5"),
    ("lm_weight", math.nan, "attention_rescoring", "expected a finite number"),
    ("lm_weight", 1e6, "attention_rescoring", "must be in [0, 5], got 1e+06"),
    ("word_score", math.inf, "attention_rescoring", "expected a finite number"),
    ("beam_size", 0, "attention", "must be in 1..1000, got 0"),
    ("reverse_weight", 1.5, "attention_rescoring", "must be in [0, 1], got 1.5"),
    ("blank_penalty", -1.0, "ctc_greedy_search", "must be >= 0, got -1"),
    ("lm_weight", 0.5, "attention_rescoring", "applies to the *_lm modes only, which"),
    ("word_score", 1.0, "ctc_prefix_beam_search", "applies to the *_lm modes only, which"),
    ("ctc_weight", 0.0, "ctc_greedy_search", "applies to the rescoring and joint modes (attention_rescoring, "
                                             "attention_rescoring_lm, joint_ctc_attention, joint_ctc_attention_lm) "
                                             "only, which"),
    ("length_penalty", 1.0, "attention_rescoring", "applies to attention decoding only, which"),
    ("length_bonus", 1.0, "attention_rescoring", "applies to the joint modes (joint_ctc_attention, "
                                                 "joint_ctc_attention_lm) only, which"),
    ("length_bonus", math.inf, "joint_ctc_attention", "expected a finite number"),
]
IDS = [f"{o}={v}-{m}" for o, v, m, _ in CASES]


@pytest.fixture(scope="module")
def exp(tmp_path_factory):
    return streaming_exp(tmp_path_factory.mktemp("exp"), 2)


def _text(value) -> str:
    return str(int(value)) if isinstance(value, int) else repr(value)


def _one_line_usage_error(call, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        call()
    lines = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("option, value, mode, words", CASES, ids=IDS)
def test_every_entry_point_refuses_a_bad_option_alike(exp, option, value, mode, words, capsys, monkeypatch):
    flag = ["--modes", mode, f"--{option}", _text(value)]
    line = _one_line_usage_error(lambda: recognize.main(
        ["--config", str(exp["conf"]), "--checkpoint", str(exp["ckpt"]), "--test_data", str(exp["list"]),
         "--result_dir", str(exp["dir"] / "res"), *flag]), capsys)
    assert f"--{option}" in line and words in line, line
    assert not (exp["dir"] / "res").exists()
    bench = decode_speed
    if option in bench.BENCH_OPTIONS:
        monkeypatch.setattr(sys, "argv", ["decode_speed.py", "--exp_dirs", str(exp["dir"]), "--checkpoint", "avg.pt",
                                          "--test_data", str(exp["list"]), *flag])
        line = _one_line_usage_error(bench.main, capsys)
        assert f"--{option}" in line and words in line, line
    model = exp["model"]
    calls = {"transcribe": lambda: model.transcribe(str(exp["clips"][0]), mode=mode, **{option: value}),
             "decode_list": lambda: model.decode_list(str(exp["list"]), modes=[mode], **{option: value}),
             "stream": lambda: model.stream(chunk_size=4, mode=mode, **{option: value})}
    for name, call in calls.items():
        with pytest.raises(UserError) as e:
            call()
        assert isinstance(e.value, ValueError) and "\n" not in str(e.value)
        assert f"{option}=" in str(e.value) and words in str(e.value), (name, str(e.value))


def test_an_lm_mode_without_an_lm_is_refused_alike(exp, capsys):
    line = _one_line_usage_error(lambda: recognize.main(
        ["--config", str(exp["conf"]), "--checkpoint", str(exp["ckpt"]), "--test_data", str(exp["list"]),
         "--result_dir", str(exp["dir"] / "res"), "--modes", "attention_rescoring_lm"]), capsys)
    assert "--modes attention_rescoring_lm need a word LM: add --lm LM.arpa" in line, line
    with pytest.raises(UserError, match="modes attention_rescoring_lm need a word LM: add lm=LM.arpa"):
        exp["model"].transcribe(str(exp["clips"][0]), mode="attention_rescoring_lm")


def test_a_joint_mode_asked_to_stream_is_refused_alike(exp, capsys):
    """Issue 67: the joint search needs the whole utterance; a chunk size, streaming, or the streaming API is
    refused with that reason on every entry point (the model here is chunk-trained: the chunk itself is valid)."""
    words = "joint_ctc_attention cannot stream: its search starts only when the whole utterance is encoded"
    line = _one_line_usage_error(lambda: recognize.main(
        ["--config", str(exp["conf"]), "--checkpoint", str(exp["ckpt"]), "--test_data", str(exp["list"]),
         "--result_dir", str(exp["dir"] / "res"), "--modes", "joint_ctc_attention", "--decoding_chunk_size", "4"]),
        capsys)
    assert f"--decoding_chunk_size 4: {words}" in line, line
    assert not (exp["dir"] / "res").exists()
    model = exp["model"]
    for call in (lambda: model.transcribe(str(exp["clips"][0]), mode="joint_ctc_attention", decoding_chunk_size=4),
                 lambda: model.decode_list(str(exp["list"]), modes=["joint_ctc_attention"], decoding_chunk_size=4),
                 lambda: model.stream(chunk_size=4, mode="joint_ctc_attention")):
        with pytest.raises(UserError, match=words):
            call()


@pytest.mark.parametrize("call, words", [
    (lambda m, e: m.transcribe(str(e["clips"][0]), beam=5), r"transcribe\(\) got an unexpected keyword argument "
                                                             r"'beam'; did you mean beam_size\?"),
    (lambda m, e: m.transcribe(str(e["clips"][0]), timestamp=True), "did you mean timestamps"),
    (lambda m, e: m.decode_list(str(e["list"]), ctc_weigth=0.5), r"decode_list\(\) .* 'ctc_weigth'; did you mean "
                                                                  r"ctc_weight\?"),
    (lambda m, e: m.stream(chunk_size=4, lm_wieght=1.0), r"stream\(\) .* 'lm_wieght'; did you mean lm_weight\?"),
    (lambda m, e: m.transcribe(str(e["clips"][0]), batch_size=2), r"transcribe\(\) .* 'batch_size'.*its keywords: "
                                                                   r"mode, timestamps, sample_rate, max_bad_fraction, "
                                                                   r"beam_size"),
], ids=["beam", "timestamp", "ctc_weigth", "lm_wieght", "batch_size"])
def test_a_misspelt_keyword_names_the_method_and_the_valid_ones(exp, call, words):
    """M6: the TypeError named check_decode_options, an internal function."""
    with pytest.raises(TypeError, match=words):
        call(exp["model"], exp)


def test_a_single_mode_string_is_one_mode(exp):
    """M7: decode_list(modes="ctc_greedy_search") reported "mode 'c'"."""
    model = exp["model"]
    one = model.decode_list(str(exp["list"]), modes="ctc_greedy_search", batch_size=1)
    assert one.texts == model.decode_list(str(exp["list"]), modes=["ctc_greedy_search"], batch_size=1).texts
    assert list(one.texts) == ["ctc_greedy_search"]


def test_what_audio_may_be_is_told_apart_clearly(exp):
    """M8: string arrays, bytes paths and plain lists gave errors from deep inside (a float conversion, a shape)."""
    model, path = exp["model"], exp["clips"][0]
    want = model.transcribe(str(path), mode="ctc_greedy_search")
    assert model.transcribe(str(path).encode(), mode="ctc_greedy_search") == want           # a bytes path
    assert model.transcribe(path.read_bytes(), mode="ctc_greedy_search") == want            # a WAV file's bytes
    for audio, words in [(np.array([str(path)]), "dtype <U.* is not audio samples: for files pass their paths"),
                         (np.array([path], dtype=object), "dtype object is not audio samples"),
                         ([0.0] * 8000, "a list of 8000 numbers is not audio .* np.asarray"),
                         (b"RIFF and then nothing", "the audio bytes \\(21 bytes\\)"),
                         (8000, "audio of type int: give a path"),
                         ((np.zeros(8000, dtype=np.float32), 8000, 1), "a tuple of 3 items")]:
        with pytest.raises(UserError, match=words):
            model.transcribe(audio, sample_rate=8000 if isinstance(audio, list) else None)


@pytest.mark.parametrize("program, required", [
    ("export", ["--config", "{conf}", "--checkpoint", "{ckpt}", "--output_dir", "{dir}/export"]),
    ("average_model", ["--dst_model", "{dir}/avg_x.pt", "--src_path", "{dir}"]),
])
def test_the_programs_that_decode_for_a_check_take_the_same_ranges(exp, program, required, capsys):
    """export's parity check and average_model's soup decode with attention_rescoring: --ctc_weight 5 and
    --beam_size 0 are refused with recognize's words (their --ctc_weight had no upper bound)."""
    module = importlib.import_module(f"wenet_udps.bin.{program}")
    argv = [a.format(conf=exp["conf"], ckpt=exp["ckpt"], dir=exp["dir"]) for a in required]
    for flag, value, words in [("--ctc_weight", "5", "must be in [0, 1], got 5"),
                               ("--beam_size", "0", "must be in 1..1000, got 0")]:
        line = _one_line_usage_error(lambda: module.main(argv + [flag, value]), capsys)
        assert f"argument {flag}: {words}" in line, line
