"""The Python API (wenet_udps.load_model ... transcribe / decode_list) gives what recognize gives, on a tiny model
made in the test and clips written here; its mistakes are one-line UserErrors."""
import numpy as np
import pytest
import soundfile as sf

import wenet_udps
from tests.decode.decode_helpers import make_exp, read_hyps
from tests.lm.lm_helpers import need_flashlight, need_lmplz
from tests.train.train_helpers import WORDS
from wenet_udps.bin import recognize
from wenet_udps.transformer.modes import METHODS_WITHOUT_LM
from wenet_udps.utils.cli import UserError

OPTIONS = {"beam_size": 4, "ctc_weight": 0.5}
RESCORING = ("attention_rescoring", "attention_rescoring_lm")  # the modes ctc_weight applies to


def options(mode):
    return OPTIONS if mode in RESCORING else {"beam_size": OPTIONS["beam_size"]}


@pytest.fixture
def exp(tmp_path):
    return make_exp(tmp_path, 3)


def recognize_texts(exp, modes, out, *extra):
    weight = ["--ctc_weight", str(OPTIONS["ctc_weight"])] if set(modes) & set(RESCORING) else []
    recognize.main(["--config", str(exp["conf"]), "--checkpoint", str(exp["ckpt"]), "--test_data", str(exp["list"]),
                    "--result_dir", str(out), "--modes", *modes, "--beam_size", str(OPTIONS["beam_size"]), *weight,
                    "--batch_size", "1", *extra])
    return {mode: read_hyps(out / mode / "text") for mode in modes}


def test_transcribe_gives_recognize_text_in_every_mode(exp):
    want = recognize_texts(exp, list(METHODS_WITHOUT_LM), exp["dir"] / "res")
    model = wenet_udps.load_model(str(exp["dir"]), checkpoint="avg.pt")
    for mode in METHODS_WITHOUT_LM:
        got = model.transcribe([str(p) for p in exp["clips"]], mode=mode, **options(mode))
        assert got == [want[mode][p.stem] for p in exp["clips"]], mode
    assert any(want["attention_rescoring"].values())  # the comparison is of real texts


def test_transcribe_lm_modes_give_recognize_text(exp):
    need_lmplz()
    need_flashlight()
    from wenet_udps.lm.build import build_arpa
    lm = exp["dir"] / "lm.arpa"
    build_arpa([w for w in WORDS for _ in range(3)], str(lm), order=2)
    modes = ["ctc_prefix_beam_search_lm", "attention_rescoring_lm"]
    want = recognize_texts(exp, modes, exp["dir"] / "res", "--lm", str(lm), "--lm_weight", "1.0",
                           "--word_score", "30")
    model = wenet_udps.load_model(str(exp["dir"]), checkpoint="avg.pt")
    for mode in modes:
        got = [model.transcribe(str(p), mode=mode, lm=str(lm), lm_weight=1.0, word_score=30.0, **options(mode))
               for p in exp["clips"]]
        assert got == [want[mode][p.stem] for p in exp["clips"]], mode


def test_an_array_is_resampled_as_its_file_is(exp):
    model = wenet_udps.load_model(str(exp["dir"]), checkpoint="avg.pt")
    wav, sr = sf.read(str(exp["clips"][1]), dtype="float32")
    assert model.transcribe((wav, sr)) == model.transcribe(str(exp["clips"][1]))
    path16 = exp["dir"] / "16k.wav"
    wav16 = np.interp(np.arange(0, len(wav), 0.5), np.arange(len(wav)), wav).astype(np.float32)
    sf.write(str(path16), wav16, 16000, subtype="FLOAT")
    assert model.transcribe(wav16, sample_rate=16000) == model.transcribe(str(path16))
    int16 = (wav * 32768).round().astype(np.int16)
    assert model.transcribe((int16, sr), mode="ctc_greedy_search") == model.transcribe(
        str(exp["clips"][1]), mode="ctc_greedy_search")


def test_timestamps_follow_the_ctc_alignment_of_the_text(exp):
    model = wenet_udps.load_model(str(exp["dir"]), checkpoint="avg.pt")
    for mode in ("ctc_greedy_search", "attention_rescoring"):
        out = model.transcribe(str(exp["clips"][2]), mode=mode, timestamps=True, **options(mode))
        assert out["text"] == model.transcribe(str(exp["clips"][2]), mode=mode, **options(mode))
        tokens = out["tokens"]
        assert "".join(t["token"] for t in tokens).replace("▁", " ").strip() == out["text"].strip()
        duration = sf.info(str(exp["clips"][2])).duration
        starts = [t["start"] for t in tokens]
        assert starts == sorted(starts) and all(t["start"] < t["end"] <= duration + 0.1 for t in tokens)


def test_timestamps_of_a_text_ctc_cannot_spell_in_its_frames_are_one_line_naming_the_mode(exp, monkeypatch):
    """Issue 80 round 7, F9: a text of more units than CTC frames (an attention decoder may emit one) was a
    ValueError traceback from the alignment. One line naming the input and the mode; the text alone still comes."""
    model = wenet_udps.load_model(str(exp["dir"]), checkpoint="avg.pt")
    decode = model.model.decode

    def long_text(modes, *args, **kwargs):
        results = decode(modes, *args, **kwargs)
        for result in results.values():
            result[0].tokens = [2, 3] * 200
        return results

    monkeypatch.setattr(model.model, "decode", long_text)
    clip = str(exp["clips"][0])
    with pytest.raises(UserError, match=rf"^{clip}: timestamps=True in mode attention: its text's 400 tokens cannot "
                                        rf"be aligned to \d+ CTC frames \(the times are the CTC alignment"):
        model.transcribe(clip, mode="attention", timestamps=True)
    assert model.transcribe(clip, mode="attention")


def test_decode_list_reports_what_recognize_prints(exp, capsys):
    want = recognize_texts(exp, ["ctc_greedy_search", "attention"], exp["dir"] / "res")
    printed = capsys.readouterr().out
    model = wenet_udps.load_model(str(exp["dir"]), checkpoint="avg.pt")
    report = model.decode_list(str(exp["list"]), modes=["ctc_greedy_search", "attention"], batch_size=1,
                               beam_size=OPTIONS["beam_size"])
    assert report.texts == want and report.utterances == 3 and report.skipped == 0
    assert report.counts.endswith("3 utterances used, 0 skipped (none)") and report.rtf > 0
    assert report.summary.split(" s decoding")[0][:4] == "RTF " and printed.split(" (")[0].startswith("RTF ")
    assert report.summary.split("of audio")[1] == printed.strip().split("of audio")[1]
    scp = exp["dir"] / "wav.scp"
    scp.write_text("".join(f"{p.stem} {p}\n" for p in exp["clips"]), encoding="utf-8")
    assert model.decode_list(str(scp), modes=["attention"], batch_size=1, beam_size=4).texts["attention"] == \
        want["attention"]


@pytest.mark.parametrize("case, call, words", [
    ("missing exp dir", lambda d, m: wenet_udps.load_model(str(d / "nope")), "experiment dir .*nope does not exist"),
    ("no train.yaml", lambda d, m: wenet_udps.load_model(str(d / "res_empty")), "has no train.yaml"),
    ("missing checkpoint", lambda d, m: wenet_udps.load_model(str(d), checkpoint="avg_5.pt"),
     "no checkpoint .*avg_5.pt; .* has avg.pt"),
    ("rate of a file", lambda d, m: m.transcribe(str(d / "utt0.wav"), sample_rate=16000),
     "sample_rate=16000 is for an array"),
    ("array without rate", lambda d, m: m.transcribe(np.zeros(8000, dtype=np.float32)),
     "needs its sample rate as a positive integer"),
    ("rate not an int", lambda d, m: m.transcribe((np.zeros(8000, dtype=np.float32), "8k")),
     "positive integer .*'8k'"),
    ("implausible rate", lambda d, m: m.transcribe((np.zeros(8000, dtype=np.float32), 80)),
     "implausible sample rate 80 Hz"),
    ("empty file", lambda d, m: m.transcribe(str(d / "empty.wav")), "empty.wav"),
    ("unreadable file", lambda d, m: m.transcribe(str(d / "junk.wav")), "cannot read audio .*junk.wav"),
    ("too short", lambda d, m: m.transcribe((np.zeros(200, dtype=np.float32), 8000)), "too short to decode"),
    ("unknown mode", lambda d, m: m.transcribe(str(d / "utt0.wav"), mode="beam"), "mode 'beam': valid modes"),
    ("LM mode without LM", lambda d, m: m.transcribe(str(d / "utt0.wav"), mode="attention_rescoring_lm"),
     "need a word LM: add lm=LM.arpa"),
    ("stream of a full-context model", lambda d, m: m.stream(chunk_size=4), "decoding_chunk_size|streaming"),
])
def test_mistakes_are_one_line_user_errors(exp, case, call, words):
    d = exp["dir"]
    (d / "res_empty").mkdir()
    sf.write(str(d / "empty.wav"), np.zeros(0, dtype=np.float32), 8000)
    (d / "junk.wav").write_bytes(b"not audio at all")
    model = wenet_udps.load_model(str(d), checkpoint="avg.pt")
    with pytest.raises(UserError, match=words) as e:
        call(d, model)
    assert "\n" not in str(e.value), case
