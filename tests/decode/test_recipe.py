"""Issue 57, F: the Python API rescored with ctc_weight 0.0 by default and run.sh with 0.5, so its text was not the
text RESULTS.md scores. The API now decodes as the recipe decoded the checkpoint (stage 5's decode.info records),
else with run.sh's defaults."""
import re
import shutil
from pathlib import Path

import pytest

import wenet_udps
from tests.decode.decode_helpers import make_exp, read_hyps
from tests.lm.lm_helpers import need_flashlight, need_lmplz
from tests.train.train_helpers import WORDS
from wenet_udps.bin import recognize
from wenet_udps.decode.recipe import RUN_SH_DEFAULTS
from wenet_udps.lm.build import build_arpa

ROOT = Path(__file__).resolve().parents[2]


def test_the_fallback_defaults_are_run_sh_s():
    text = (ROOT / "run.sh").read_text(encoding="utf-8")
    for name, value in RUN_SH_DEFAULTS.items():
        found = re.search(rf"^{name}=(\S+)", text, re.M)
        assert found and type(value)(found.group(1)) == value, name


@pytest.fixture
def exp(tmp_path):
    return make_exp(tmp_path, 2)


def stage5(exp, result_dir, *extra):
    """recognize as run.sh stage 5 runs it, into <exp>/<set>: decode.info records the options."""
    recognize.main(["--config", str(exp["conf"]), "--checkpoint", str(exp["ckpt"]), "--test_data", str(exp["list"]),
                    "--result_dir", str(result_dir), "--batch_size", "1", *extra])
    return result_dir


def decoded_with(model):
    """Wrap model.model.decode: the list of (beam_size, kwargs) it is called with."""
    calls, decode = [], model.model.decode
    model.model.decode = lambda modes, feats, lens, beam, **kw: calls.append((beam, kw)) or decode(
        modes, feats, lens, beam, **kw)
    return calls


def test_the_api_decodes_as_stage_5_decoded_this_checkpoint(exp):
    out = stage5(exp, exp["dir"] / "test", "--modes", "ctc_greedy_search", "attention_rescoring", "--ctc_weight",
                 "0.3", "--beam_size", "4")
    model = wenet_udps.load_model(str(exp["dir"]), checkpoint="avg.pt")
    calls = decoded_with(model)
    texts = model.transcribe([str(p) for p in exp["clips"]])
    assert [c[0] for c in calls] == [4, 4] and all(c[1]["ctc_weight"] == 0.3 for c in calls)
    assert texts == [read_hyps(out / "attention_rescoring" / "text")[p.stem] for p in exp["clips"]]
    assert model.decode_list(str(exp["list"]), batch_size=1).texts["attention_rescoring"] == \
        read_hyps(out / "attention_rescoring" / "text")
    model.transcribe(str(exp["clips"][0]), ctc_weight=0.0)                 # what is given wins
    model.transcribe(str(exp["clips"][0]), mode="attention")               # ctc_weight unused: not applied
    assert calls[-2][1]["ctc_weight"] == 0.0 and calls[-1][1]["ctc_weight"] is None and calls[-1][0] == 4


def test_the_joint_modes_take_their_own_recorded_ctc_weight(exp):
    """run.sh decodes the joint modes with their own --ctc_weight (--joint_ctc_weight): the API takes each family's
    record, never the rescoring weight for a joint mode (run.sh's 0.3 where the joint mode has no record)."""
    stage5(exp, exp["dir"] / "test", "--modes", "attention_rescoring", "--ctc_weight", "0.5", "--beam_size", "4")
    model = wenet_udps.load_model(str(exp["dir"]), checkpoint="avg.pt")
    assert model.recipe.defaults(["joint_ctc_attention"])["ctc_weight"] == 0.3
    out = stage5(exp, exp["dir"] / "test", "--modes", "joint_ctc_attention", "--ctc_weight", "0.4", "--beam_size",
                 "4")
    model = wenet_udps.load_model(str(exp["dir"]), checkpoint="avg.pt")
    calls = decoded_with(model)
    texts = model.transcribe([str(p) for p in exp["clips"]], mode="joint_ctc_attention")
    assert texts == [read_hyps(out / "joint_ctc_attention" / "text")[p.stem] for p in exp["clips"]]
    assert calls[-1][1]["ctc_weight"] == 0.4 and calls[-1][0] == 4
    model.decode_list(str(exp["list"]), modes=["attention_rescoring", "joint_ctc_attention"], batch_size=1)
    assert calls[-1][1]["ctc_weight"] == {"attention_rescoring": 0.5, "joint_ctc_attention": 0.4}


def test_without_a_record_of_this_checkpoint_run_sh_s_defaults(exp, capsys):
    model = wenet_udps.load_model(str(exp["dir"]), checkpoint="avg.pt")
    calls = decoded_with(model)
    model.transcribe(str(exp["clips"][0]))
    assert calls[-1][0] == 10 and calls[-1][1]["ctc_weight"] == 0.5
    # A record of another checkpoint (the file replaced since) is not this model's decoding.
    stage5(exp, exp["dir"] / "test", "--modes", "attention_rescoring", "--ctc_weight", "0.3")
    shutil.copy(exp["ckpt"], exp["dir"] / "other.pt")
    with open(exp["dir"] / "other.pt", "ab") as f:
        f.write(b"\0")
    assert wenet_udps.load_model(str(exp["dir"]), checkpoint="other.pt", verify=False).recipe.defaults(
        ["attention_rescoring"])["ctc_weight"] == 0.5
    # Two records of this checkpoint that disagree: neither, with a warning naming them.
    stage5(exp, exp["dir"] / "dev", "--modes", "attention_rescoring", "--ctc_weight", "0.7")
    model = wenet_udps.load_model(str(exp["dir"]), checkpoint="avg.pt")
    capsys.readouterr()
    assert model.recipe.defaults(["attention_rescoring"])["ctc_weight"] == 0.5
    model.transcribe(str(exp["clips"][0]))
    warned = [line for line in capsys.readouterr().err.splitlines() if "records disagree" in line]
    assert len(warned) == 1 and "on ctc_weight" in warned[0] and "dev/attention_rescoring" in warned[0], warned


def test_the_lm_weights_are_the_recipe_s_with_the_lm_they_were_tuned_for(exp):
    need_lmplz()
    need_flashlight()
    lm, other = exp["dir"] / "lm.arpa", exp["dir"] / "other.arpa"
    build_arpa([w for w in WORDS for _ in range(3)], str(lm), order=2)
    build_arpa([w for w in WORDS[:5] for _ in range(3)], str(other), order=2)
    stage5(exp, exp["dir"] / "test", "--modes", "attention_rescoring_lm", "--lm", str(lm), "--lm_weight", "1.5",
           "--word_score", "2", "--ctc_weight", "0.3")
    model = wenet_udps.load_model(str(exp["dir"]), checkpoint="avg.pt")
    calls = decoded_with(model)
    model.transcribe(str(exp["clips"][0]), mode="attention_rescoring_lm", lm=str(lm))
    model.transcribe(str(exp["clips"][0]), mode="attention_rescoring_lm", lm=str(other))
    tuned, untuned = (c[1]["lm_search"].conf for c in calls)
    assert (tuned.lm_weight, tuned.word_score) == (1.5, 2.0) and calls[0][1]["ctc_weight"] == 0.3
    assert (untuned.lm_weight, untuned.word_score) == (0.5, 0.0)


def test_the_api_decodes_at_the_chunk_size_stage_5_decoded_at(tmp_path):
    """Issue 81 attack F3b: after run.sh --decoding_chunk_size 4, decode_list decoded at full context, so 2 of 20
    texts were not the text RESULTS.md scores. The chunking is recorded (decode.info) and taken as the other
    options are; one given still wins."""
    from tests.decode.decode_helpers import streaming_exp
    exp = streaming_exp(tmp_path, 2)
    stage5(exp, exp["dir"] / "test", "--modes", "attention", "--decoding_chunk_size", "4",
           "--num_decoding_left_chunks", "1")
    model = wenet_udps.load_model(str(exp["dir"]), checkpoint="avg.pt")
    calls = decoded_with(model)
    model.decode_list(str(exp["list"]), modes=["attention"], batch_size=1)
    assert (calls[-1][1]["decoding_chunk_size"], calls[-1][1]["num_decoding_left_chunks"]) == (4, 1)
    model.transcribe(str(exp["clips"][0]), mode="attention", decoding_chunk_size=-1)
    assert calls[-1][1]["decoding_chunk_size"] == -1
