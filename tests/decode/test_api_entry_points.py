"""Issue 66, E: the Python API at the CLI's level.

- Every keyword of every public API function (``load_model``, ``transcribe``, ``decode_list``, ``stream``, a
  stream's ``accept_waveform``) refuses a bad value with a one-line ``UserError``, never an internal error.
- ``decode_list`` reads a wav.scp by the one Kaldi reader (a ``segments`` file beside it cut, as sherpa_decode and
  stage 3 cut it) and names the user's files; ``max_bad_fraction`` is the CLI's rule, settable.
- A list given to ``transcribe`` has a per-item outcome (``wenet_udps.decode.outcome``).
- A list of another kind than ``data_type`` says so once, before anything is read as a shard.
"""
import inspect
import json
import logging
import math
from pathlib import Path

import numpy as np
import pytest

import wenet_udps
from tests.decode.decode_helpers import streaming_exp
from wenet_udps.bin import recognize
from wenet_udps.decode.api import KEYWORDS, RecognitionModel
from wenet_udps.utils.cli import UserError, run_cli


@pytest.fixture(scope="module")
def exp(tmp_path_factory):
    return streaming_exp(tmp_path_factory.mktemp("exp"), 3)


# Bad values of every option of DECODE_OPTIONS, by the kind of value it takes: a wrong type and one out of range.
OPTION_BAD = {"beam_size": [0, "x", 1.5, True], "batch_size": [0, "x", [4]], "ctc_weight": [5.0, math.nan, "x"],
              "reverse_weight": [1.5, "x"], "decoding_chunk_size": [0, "x", 1.5],
              "num_decoding_left_chunks": [-2, "x"], "simulate_streaming": ["yes", 1],
              "length_penalty": [math.inf, "x"], "max_len_ratio": [0.0, "x"], "blank_penalty": [-1.0, "x"],
              "lm": [5, "/no/such/lm.arpa"], "lm_weight": [-5.0, math.nan], "word_score": [math.inf, "x"],
              "length_bonus": [math.inf, "x"], "hotwords": [5, "/no/such/hotwords.txt", [1, 2], ["QUIZ"]],
              "context_score": [0.0, 50.0, "x"], "context_weight": [1.5, "x"]}
NOT_AUDIO = np.array(["a", "b"])


def bad_values(exp):
    """(function, keyword) -> [(call, value)] for every keyword of every public API function."""
    d, model, wav = exp["dir"], exp["model"], str(exp["clips"][0])
    calls = {
        ("load_model", "exp_dir"): (lambda v: wenet_udps.load_model(v, checkpoint="avg.pt"),
                                    [None, 5, str(d / "nope")]),
        ("load_model", "checkpoint"): (lambda v: wenet_udps.load_model(str(d), checkpoint=v), [None, 3, "nope.pt"]),
        ("load_model", "device"): (lambda v: wenet_udps.load_model(str(d), checkpoint="avg.pt", device=v),
                                   [None, 1, "gpu", "cuda"]),
        ("load_model", "verify"): (lambda v: wenet_udps.load_model(str(d), checkpoint="avg.pt", verify=v),
                                   ["yes", None, 1]),
        ("transcribe", "audio"): (lambda v: model.transcribe(v), [None, 5, [0.1, 0.2], ("a", "b", "c"), NOT_AUDIO,
                                                                 str(d / "missing.wav"), [wav, 5]]),
        ("transcribe", "mode"): (lambda v: model.transcribe(wav, mode=v), [None, 1, "beam", []]),
        ("transcribe", "timestamps"): (lambda v: model.transcribe(wav, timestamps=v), ["yes", None, 1]),
        ("transcribe", "sample_rate"): (lambda v: model.transcribe(wav, sample_rate=v), [16000, "8k"]),
        # 0.5 for one input (not a list) would do nothing: refused as any option that would
        ("transcribe", "max_bad_fraction"): (lambda v: model.transcribe(wav if v == 0.5 else [wav],
                                                                        max_bad_fraction=v),
                                             [1.5, -0.1, "x", math.nan, 0.5]),
        ("decode_list", "data_list"): (lambda v: model.decode_list(v), [None, 5, str(d / "missing.list")]),
        ("decode_list", "modes"): (lambda v: model.decode_list(str(exp["list"]), modes=v), [None, 3, "beam"]),
        ("decode_list", "data_type"): (lambda v: model.decode_list(str(exp["list"]), data_type=v),
                                       ["tar", None, 1]),
        ("decode_list", "progress"): (lambda v: model.decode_list(str(exp["list"]), progress=v), ["yes", None]),
        ("decode_list", "max_bad_fraction"): (lambda v: model.decode_list(str(exp["list"]), max_bad_fraction=v),
                                              [1.5, "x", math.nan]),
        ("stream", "chunk_size"): (lambda v: model.stream(v), [None, "x", 0, -1, 1.5]),
        ("stream", "left_chunks"): (lambda v: model.stream(4, left_chunks=v), [None, "x", 1.5, -2]),
        ("stream", "mode"): (lambda v: model.stream(4, mode=v), [None, "beam"]),
        ("accept_waveform", "samples"): (lambda v: model.stream(4).accept_waveform(v, 8000),
                                         [None, "x", NOT_AUDIO, np.full(800, np.nan, dtype=np.float32)]),
        ("accept_waveform", "sample_rate"): (lambda v: model.stream(4).accept_waveform(np.zeros(800, np.float32), v),
                                             [None, "8k", 0]),
    }
    fixed = {"transcribe": {"batch_size"}, "stream": {"batch_size", "decoding_chunk_size",
                                                      "num_decoding_left_chunks", "simulate_streaming"}}
    for where, call in (("transcribe", lambda o, v: model.transcribe(wav, mode="attention_rescoring", **{o: v})),
                        ("decode_list", lambda o, v: model.decode_list(str(exp["list"]), modes="attention_rescoring",
                                                                       **{o: v})),
                        ("stream", lambda o, v: model.stream(4, mode="attention_rescoring", **{o: v}))):
        for option, values in OPTION_BAD.items():
            if option not in fixed.get(where, ()):
                calls[(where, option)] = ((lambda c, o: lambda v: c(o, v))(call, option), values)
    return calls


def test_every_keyword_of_the_api_refuses_a_bad_value_with_a_user_error(exp, caplog):
    """Issue 66, E: ``mode=None`` gave an internal TypeError ('NoneType' object is not iterable), and so did
    ``load_model(device=None)``, ``decode_list(None)``, ``stream(4, left_chunks=None)``; ``verify``, ``timestamps``
    and ``progress`` took any value. Every keyword of every public function is walked here, the table checked to
    name them all."""
    calls = bad_values(exp)
    failures = []
    for (where, name), (call, values) in calls.items():
        for value in values:
            try:
                call(value)
                failures.append(f"{where}({name}={value!r}): accepted")
            except UserError as e:
                if "\n" in str(e):
                    failures.append(f"{where}({name}={value!r}): a message of several lines")
            except Exception as e:  # noqa: BLE001 (the test names whatever else escapes)
                failures.append(f"{where}({name}={value!r}): {type(e).__name__}: {str(e)[:100]}")
    assert failures == []
    public = {"load_model": wenet_udps.load_model, "transcribe": RecognitionModel.transcribe,
              "decode_list": RecognitionModel.decode_list, "stream": RecognitionModel.stream}
    for where, function in public.items():   # the table walks every keyword there is
        named = {p for p in inspect.signature(function).parameters if p not in ("self", "options")}
        assert named | set(KEYWORDS.get(where, ())) == {k for w, k in calls if w == where}, where


def segmented_scp(exp, tmp_path: Path) -> Path:
    """A wav.scp of two recordings beside a ``segments`` file cutting three utterances from them."""
    scp = tmp_path / "wav.scp"
    scp.write_text(f"recA {exp['clips'][1]}\nrecB {exp['clips'][2]}\n", encoding="utf-8")
    (tmp_path / "segments").write_text("a1 recA 0.0 0.5\na2 recA 0.5 -1\nb1 recB 0.2 1.2\n", encoding="utf-8")
    return scp


def test_decode_list_of_a_wav_scp_decodes_its_segments(exp, tmp_path):
    """Issue 66, E: ``decode_list(wav.scp)`` ignored a ``segments`` file beside it and decoded the whole recordings,
    one utterance each, while sherpa_decode and stage 3 cut the segments. Now it decodes exactly what the raw list
    of those segments (start/end, as make_raw_list writes it) decodes."""
    scp = segmented_scp(exp, tmp_path)
    cut = tmp_path / "cut.list"
    cut.write_text("".join(json.dumps({"key": k, "wav": str(exp["clips"][i]), "txt": "", "start": s, "end": e}) + "\n"
                           for k, i, s, e in (("a1", 1, 0.0, 0.5), ("a2", 1, 0.5, -1), ("b1", 2, 0.2, 1.2))),
                   encoding="utf-8")
    model = exp["model"]
    got = model.decode_list(str(scp), modes=["ctc_greedy_search"], batch_size=1)
    want = model.decode_list(str(cut), modes=["ctc_greedy_search"], batch_size=1)
    assert list(got.texts["ctc_greedy_search"]) == ["a1", "a2", "b1"] and got.texts == want.texts
    assert got.utterances == 3 and got.audio_seconds == pytest.approx(want.audio_seconds)


def test_decode_list_messages_name_the_users_files(exp, tmp_path):
    """Issue 66, E: a failed wav.scp decode named a deleted temporary data.list."""
    scp = tmp_path / "wav.scp"
    scp.write_text(f"u1 {tmp_path / 'gone1.wav'}\nu2 {tmp_path / 'gone2.wav'}\n", encoding="utf-8")
    with pytest.raises(UserError) as e:
        exp["model"].decode_list(str(scp), modes="ctc_greedy_search")
    assert f"decode data {scp}: 0 utterances used, 2 skipped (bad_audio 2)" in str(e.value)
    assert "data.list" not in str(e.value)
    (tmp_path / "segments").write_text("s1 u1 0 1\ns2 nosuch 0 1\n", encoding="utf-8")
    with pytest.raises(UserError, match=f"{tmp_path / 'segments'}: 1 segments name a recording missing from {scp}"):
        exp["model"].decode_list(str(scp), modes="ctc_greedy_search")


def test_transcribe_of_a_list_gives_each_inputs_outcome(exp, tmp_path, caplog):
    """Issue 66, E: ``transcribe([good, missing, good])`` raised on the missing file, without its position, and
    the good text already decoded was lost. Now the good ones keep their texts, the missing one is ``None`` and a
    ``Failure`` naming ``audio[1]``, as recognize skips and counts; above ``max_bad_fraction`` the DataError holds
    them all."""
    good, missing = [str(p) for p in exp["clips"][:2]], str(tmp_path / "missing.wav")
    model = exp["model"]
    want = [model.transcribe(p, mode="ctc_greedy_search") for p in good]
    with caplog.at_level(logging.WARNING):
        out = model.transcribe([good[0], missing, good[1]], mode="ctc_greedy_search", max_bad_fraction=0.5)
    assert out == [want[0], None, want[1]]
    [failure] = out.failures
    assert (failure.index, failure.input, failure.reason) == (1, missing, "bad_audio")
    assert failure.message.startswith(f"audio[1]: {missing}: ")
    assert out.counts == "transcribe of 3 inputs: 2 utterances used, 1 skipped (bad_audio 1)"
    assert f"skipping audio[1]: {missing}" in caplog.text
    with pytest.raises(UserError, match=r"33.3% of the utterances are unusable, more than max_bad_fraction 0.05 "
                                        r"\(audio\[1\]: ") as e:   # the experiment's share: recognize's rule
        model.transcribe([good[0], missing, good[1]], mode="ctc_greedy_search")
    assert e.value.transcripts == [want[0], None, want[1]] and e.value.transcripts.failures[0].index == 1
    short = (np.zeros(200, dtype=np.float32), 8000)   # too short for the encoder: dropped by choice, not unusable
    out = model.transcribe([good[0], short], mode="ctc_greedy_search")
    assert out == [want[0], None] and out.failures[0].reason == "no_frames"
    with pytest.raises(UserError, match=r"audio\[1\]: audio of type int"):   # not audio: a mistake in the list
        model.transcribe([good[0], 5])
    with pytest.raises(UserError, match=r"^transcribe of 0 inputs: 0 utterances used, 0 skipped \(none\): no usable "
                                        r"utterance$"):   # nothing to decode, as an empty data list
        model.transcribe([])


def test_decode_list_takes_max_bad_fraction(exp, tmp_path):
    """Issue 66, E: ``decode_list`` with 1 of 3 files missing gave a DataError and no texts, and the API could not
    set ``max_bad_fraction`` as the CLI can (``--override dataset_conf.max_bad_fraction=``)."""
    lst = tmp_path / "test.list"
    rows = [{"key": p.stem, "wav": str(p), "txt": ""} for p in exp["clips"][:2]]
    rows.insert(1, {"key": "gone", "wav": str(tmp_path / "gone.wav"), "txt": ""})
    lst.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    model = exp["model"]
    with pytest.raises(UserError, match=r"more than dataset_conf.max_bad_fraction 0.05 \(decode_list's "
                                        r"max_bad_fraction= sets that share\)"):
        model.decode_list(str(lst), modes="ctc_greedy_search")
    report = model.decode_list(str(lst), modes="ctc_greedy_search", max_bad_fraction=0.5)
    assert sorted(report.texts["ctc_greedy_search"]) == ["utt0", "utt1"] and report.skipped == 1


def test_a_list_of_another_kind_than_data_type_is_one_clear_error(exp, caplog, monkeypatch, capsys):
    """Issue 66, E: ``data_type="shard"`` on a raw list logged an "error reading shard" line per line before its
    DataError; recognize did the same. Now one error, naming the list and its line, before anything is read."""
    model = exp["model"]
    with caplog.at_level(logging.WARNING):
        with pytest.raises(UserError, match=f"{exp['list']}:1: not a shard list .* a raw data.list"):
            model.decode_list(str(exp["list"]), modes="ctc_greedy_search", data_type="shard")
    assert "error reading shard" not in caplog.text
    monkeypatch.setattr("sys.argv", ["recognize", "--config", str(exp["conf"]), "--checkpoint", str(exp["ckpt"]),
                                     "--test_data", str(exp["list"]), "--result_dir", str(exp["dir"] / "res"),
                                     "--modes", "ctc_greedy_search", "--data_type", "shard"])
    with pytest.raises(SystemExit) as e:
        run_cli(recognize.main, "wenet_udps.bin.recognize")
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and "error reading shard" not in "\n".join(err)
    assert err[-1].startswith(f"wenet_udps.bin.recognize: error: {exp['list']}:1: not a shard list")
    scp = exp["dir"] / "wav.scp"
    scp.write_text(f"u0 {exp['clips'][0]}\n", encoding="utf-8")
    with pytest.raises(UserError, match="a Kaldi wav.scp"):
        model.decode_list(str(scp), modes="ctc_greedy_search", data_type="shard")
    shards = exp["dir"] / "shards.list"
    shards.write_text(f"{exp['dir'] / 'shard_000000.tar'}\n", encoding="utf-8")
    with pytest.raises(UserError, match="one path a line .* a shard list\\? pass data_type='shard'"):
        model.decode_list(str(shards), modes="ctc_greedy_search")
