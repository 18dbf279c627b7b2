"""Issue 47, cases 6-9: a decoding option that cannot take effect on the model is refused, on every path."""
import subprocess
import sys

import pytest
import torch

from wenet_udps.model_builder import build_model
from wenet_udps.transformer.decode_options import DECODE_OPTIONS, check_decode_options, chunk_size_for, option_value, \
    resolve_decode_options, run_sh_error, value_for
from wenet_udps.utils.cli import UserError
from tests.transformer.test_asr_model import batch, tiny_config

MODES = ["ctc_greedy_search", "attention_rescoring"]


def model_with(**chunks):
    cfg = tiny_config(encoder="conformer")
    cfg["encoder_conf"].update(chunks)
    torch.manual_seed(0)
    return build_model(cfg).eval()


def test_chunk_size_on_a_non_streaming_model_is_refused():
    """Case 6: chunk 16 on a model trained without chunks gave the full-context output (and a log line)."""
    model = model_with()
    speech, lengths, _, _ = batch(b=1, t=60)
    with pytest.raises(UserError, match="--decoding_chunk_size 16: this model was trained without chunks"):
        model.decode(MODES, speech, lengths, beam_size=2, decoding_chunk_size=16)
    # Full context, asked for or not, is what it does.
    assert chunk_size_for(model.encoder, -1) == chunk_size_for(model.encoder, None) == -1


def test_simulate_streaming_needs_a_chunk_size_the_model_decodes_at():
    """Cases 7 and 8: --simulate_streaming without a chunk was full context; with one, on a non-streaming model,
    a ValueError traceback."""
    for model in (model_with(), model_with(use_dynamic_chunk=True)):
        speech, lengths, _, _ = batch(b=1, t=60)
        with pytest.raises(UserError, match="--simulate_streaming runs the encoder chunk by chunk"):
            model.decode(MODES, speech, lengths, beam_size=2, simulate_streaming=True)
    with pytest.raises(UserError, match="trained without chunks"):
        model_with().decode(MODES, speech, lengths, beam_size=2, decoding_chunk_size=16, simulate_streaming=True)
    with pytest.raises(UserError, match="use --batch_size 1, not 3"):
        check_decode_options(model_with(use_dynamic_chunk=True).encoder, MODES, decoding_chunk_size=4,
                             simulate_streaming=True, batch_size=3)


def test_static_chunk_model_decodes_at_its_chunk_only():
    """Case 9: a static_chunk_size 4 model decoded at -1 or 16 gave the chunk-4 output without a word."""
    model = model_with(static_chunk_size=4)
    speech, lengths, _, _ = batch(b=1, t=80)
    # The encoder ignores the asked size: that is why any other size must be refused.
    with torch.no_grad():
        at4 = model.encoder(speech, lengths, 4)[0]
        assert torch.equal(model.encoder(speech, lengths, -1)[0], at4)
        assert torch.equal(model.encoder(speech, lengths, 16)[0], at4)
    for size, got in ((-1, "full context"), (16, "chunk 16")):
        with pytest.raises(UserError, match=f"static_chunk_size 4 .*not {got}; pass --decoding_chunk_size 4"):
            model.decode(MODES, speech, lengths, beam_size=2, decoding_chunk_size=size)
    own = model.decode(MODES, speech, lengths, beam_size=2)
    asked = model.decode(MODES, speech, lengths, beam_size=2, decoding_chunk_size=4)
    assert own["ctc_greedy_search"][0].tokens == asked["ctc_greedy_search"][0].tokens
    assert chunk_size_for(model.encoder, None) == 4


def test_dynamic_chunk_model_takes_any_size():
    model = model_with(use_dynamic_chunk=True)
    assert [chunk_size_for(model.encoder, s) for s in (None, -1, 1, 16)] == [-1, -1, 1, 16]
    with pytest.raises(UserError, match="0 is the training mode"):
        chunk_size_for(model.encoder, 0)


@pytest.mark.parametrize("modes, option, words", [
    (["ctc_greedy_search"], {"ctc_weight": 0.5}, "--ctc_weight 0.5 applies to the rescoring and joint modes"),
    (["attention_rescoring"], {"length_bonus": 1.0}, "--length_bonus 1 applies to the joint modes"),
    (["attention"], {"reverse_weight": 0.3}, "--reverse_weight 0.3 applies to attention_rescoring"),
    (["ctc_prefix_beam_search"], {"length_penalty": 1.0}, "--length_penalty 1 applies to attention"),
    (["attention_rescoring"], {"max_len_ratio": 0.5}, "--max_len_ratio 0.5 applies to attention"),
    (["attention"], {"blank_penalty": 2.0}, "--blank_penalty 2 applies to the CTC searches"),
    (["attention"], {"num_decoding_left_chunks": 2}, "--num_decoding_left_chunks 2 limits the left context"),
])
def test_an_option_the_modes_do_not_use_is_refused(modes, option, words):
    """The sweep: options that the chosen modes (or full context) would ignore without a word."""
    with pytest.raises(UserError, match=words):
        check_decode_options(model_with(use_dynamic_chunk=True).encoder, modes, **option)


def test_options_that_take_effect_pass():
    encoder = model_with(use_dynamic_chunk=True).encoder
    assert check_decode_options(encoder, ["attention", "attention_rescoring"], decoding_chunk_size=8,
                                num_decoding_left_chunks=2, simulate_streaming=True, batch_size=1, ctc_weight=0.5,
                                length_penalty=1.0, blank_penalty=1.0, max_len_ratio=0.5) == 8


def test_the_command_line_and_python_refuse_a_value_with_the_same_words():
    """Issue 57, S9: one checker per option; its text check (recognize's flag) and value check (the API's keyword)
    give the same message."""
    import argparse
    for name, value in [("ctc_weight", 5.0), ("lm_weight", -5.0), ("lm_weight", 1e6), ("beam_size", 0),
                        ("reverse_weight", 1.5)]:
        with pytest.raises(argparse.ArgumentTypeError) as flag:
            DECODE_OPTIONS[name].check(str(value))
        with pytest.raises(UserError) as keyword:
            option_value(name, value)
        assert str(keyword.value) == f"{name}={value!r}: {flag.value}", (name, str(keyword.value))
    for name, value, words in [("ctc_weight", float("nan"), "expected a finite number"),
                               ("beam_size", 2.5, "expected an integer"), ("ctc_weight", "0.5", "expected a number"),
                               ("beam_size", True, "expected an integer"), ("lm", 3, "expected a file path")]:
        with pytest.raises(UserError, match=words):
            option_value(name, value)


def test_options_left_out_pass_and_defaults_apply_to_the_modes_that_use_them():
    """Issue 57, M15 and M7: what the user gave is checked against the modes; what was left out never is."""
    modes, values = resolve_decode_options("attention", {"beam_size": 4},
                                           defaults=lambda ms: {"ctc_weight": 0.5, "beam_size": 10})
    assert modes == ["attention"] and values["beam_size"] == 4 and values["ctc_weight"] is None
    _, values = resolve_decode_options(["attention_rescoring"], {}, defaults=lambda ms: {"ctc_weight": 0.5})
    assert values["ctc_weight"] == 0.5 and values["lm_weight"] == 0.5 and values["batch_size"] == 16
    with pytest.raises(UserError, match="lm_weight=0.5 applies to the \\*_lm modes only, which modes attention"):
        resolve_decode_options("attention", {"lm_weight": 0.5})
    with pytest.raises(UserError, match="--word_score 0 applies to the \\*_lm modes only, which --modes attention"):
        resolve_decode_options(["attention"], {"word_score": 0.0}, flags=True)
    with pytest.raises(UserError, match="mode 'c': valid modes are ctc_greedy_search"):
        resolve_decode_options(list("ctc"), {})


def test_the_joint_modes_refuse_to_stream_with_the_reason():
    """A chunk size or streaming asked of a joint mode: refused, saying why (its search needs every frame); the
    same request without a joint mode passes, and a static-chunk model's own chunk is not a request."""
    encoder = model_with(use_dynamic_chunk=True).encoder
    for asked in ({"decoding_chunk_size": 4}, {"decoding_chunk_size": 4, "simulate_streaming": True, "batch_size": 1}):
        for modes in (["joint_ctc_attention"], ["attention_rescoring", "joint_ctc_attention_lm"]):
            with pytest.raises(UserError, match=r"cannot stream: its search starts only when the whole utterance"):
                check_decode_options(encoder, modes, **asked)
        assert check_decode_options(encoder, ["attention_rescoring"], **asked) == 4
    assert check_decode_options(encoder, ["joint_ctc_attention"], decoding_chunk_size=-1) == -1
    assert check_decode_options(model_with(static_chunk_size=4).encoder, ["joint_ctc_attention"]) == 4


def test_ctc_weight_has_each_family_s_own_default():
    """Not given, ctc_weight is 0 in the rescoring modes (WeNet's) and 0.3 in the joint modes (ESPnet's); given, one
    value for all; a recipe's {mode: value} per mode."""
    modes, values = resolve_decode_options(["attention_rescoring", "joint_ctc_attention"], {})
    assert values["ctc_weight"] is None and values["length_bonus"] == 0.0
    assert [value_for("ctc_weight", None, m) for m in modes] == [0.0, 0.3]
    _, values = resolve_decode_options(modes, {"ctc_weight": 0.7})
    assert [value_for("ctc_weight", values["ctc_weight"], m) for m in modes] == [0.7, 0.7]
    per_mode = {"attention_rescoring": 0.5}
    assert [value_for("ctc_weight", per_mode, m) for m in modes] == [0.5, 0.3]


@pytest.mark.parametrize("modes, chunk, weight, words", [
    ("attention joint_ctc_attention", "-1", "0.3", ""),
    ("attention beam", "-1", "0.3", "--decode_modes 'attention beam': 'beam' is not a mode; valid: ctc_greedy_search"),
    ("joint_ctc_attention_lm", "-1", "0.3", "(the *_lm modes come with --lm true)"),
    ("", "-1", "0.3", "no mode given"),
    ("joint_ctc_attention", "8", "0.3", "--decoding_chunk_size 8: joint_ctc_attention cannot stream"),
    ("attention_rescoring", "8", "0.3", ""),
    ("joint_ctc_attention", "-1", "1.5", "--joint_ctc_weight '1.5': must be in [0, 1], got 1.5"),
])
def test_run_sh_s_decode_modes_are_checked_as_recognize_checks_them(modes, chunk, weight, words):
    error = run_sh_error({"decode_modes": modes, "decoding_chunk_size": chunk, "joint_ctc_weight": weight})
    assert (words in error and "\n" not in error) if words else error == ""


def test_run_sh_s_start_up_check_imports_no_torch():
    """run.sh checks its decoding and LM options at every start (tools/run_setup.sh check_decode_values): importing
    torch there cost ~2 s of every run.sh command, a usage error included. The check's modules stay free of it."""
    code = ("import sys; import wenet_udps.lm.options, wenet_udps.transformer.decode_options; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"
