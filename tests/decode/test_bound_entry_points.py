"""Issue 66, F: every size a user gives has a ceiling that says why, and every entry point refuses a size above it.

Case 6 of the issue: ``beam_size=10**9`` in ``ctc_prefix_beam_search`` grew the API to 18 GB before it was killed,
and ``recognize --beam_size 1000000000`` ended in a raw MemoryError. The ceilings live in the one table of decoding
options (``decode_options.DECODE_OPTIONS``; ``schema.RANGES`` for a config's ``batch_size``), so recognize, the
Python API (transcribe, decode_list, stream), bench/decode_speed.py, run.sh, export, sherpa_decode, average_model
and gpu_check all refuse alike; every size option of every program is found by its name, not listed.
"""
import sys

import pytest

from bench import decode_speed
from tests.bin.test_cli_bad_args import PROGRAMS, _actions, _name, _role, parser_of
from tests.decode.test_option_entry_points import _one_line_usage_error, exp  # noqa: F401 (fixture)
from tests.lm.test_search import write_arpa
from tests.train.train_helpers import WORDS
from wenet_udps.config import load_config
from wenet_udps.transformer.decode_options import BEAM_SIZE_MAX, DECODE_OPTIONS, RUN_SH_OPTIONS, run_sh_error
from wenet_udps.transformer.modes import DECODING_METHODS
from wenet_udps.bin import recognize
from wenet_udps.utils.cli import UserError
from wenet_udps.utils.schema import BATCH_SIZE_MAX, BATCH_WHY, ConfigError

SIZE_WORDS = {"beam", "batch", "chunk", "chunks", "nbest"}  # words of an option's name that make it a size
SIZES = [name for name, spec in DECODE_OPTIONS.items() if spec.check is not None and spec.check.__name__ == "int"]
# How each entry point of the Python API spells a decoding option (stream sets the chunking from its own arguments).
STREAM_ARGS = {"decoding_chunk_size": "chunk_size", "num_decoding_left_chunks": "left_chunks"}


def _above(check):
    return check.high + 1, f"got {check.high + 1} ({check.why})"


def test_every_size_in_the_table_has_a_ceiling_with_its_reason():
    assert set(SIZES) >= {"beam_size", "batch_size", "decoding_chunk_size", "num_decoding_left_chunks"}
    for name in SIZES:
        check = DECODE_OPTIONS[name].check
        assert check.high is not None and len(check.why) > 20, name
        with pytest.raises(Exception, match=f"must be .*{check.high}.*got {check.high + 1} \\(") as e:
            check(str(check.high + 1))
        assert check.why in str(e.value)


@pytest.mark.parametrize("program", PROGRAMS)
def test_every_size_option_of_every_program_has_a_ceiling(program, capsys):
    """Found by name: an int option with beam, batch, chunk(s) or nbest in its name refuses its ceiling + 1 in one
    line saying why."""
    for action in _actions(program):
        if _role(action) != "number" or not SIZE_WORDS & set(action.dest.split("_")):
            continue
        assert action.type.high is not None and action.type.why, f"{program} {_name(action)}: no ceiling"
        value, words = _above(action.type)
        with pytest.raises(SystemExit):
            parser_of(program).parse_args([action.option_strings[0], str(value)])
        line = capsys.readouterr().err.strip()
        assert f"argument {_name(action)}: " in line and words in line, line


@pytest.mark.parametrize("option", SIZES)
def test_every_entry_point_refuses_a_size_above_its_ceiling(exp, option, capsys, monkeypatch):  # noqa: F811
    value, words = _above(DECODE_OPTIONS[option].check)
    line = _one_line_usage_error(lambda: recognize.main(
        ["--config", str(exp["conf"]), "--checkpoint", str(exp["ckpt"]), "--test_data", str(exp["list"]),
         "--result_dir", str(exp["dir"] / "res"), "--modes", "attention", f"--{option}", str(value)]), capsys)
    assert f"--{option}" in line and words in line, line
    bench = decode_speed
    if option in bench.BENCH_OPTIONS:
        monkeypatch.setattr(sys, "argv", ["decode_speed.py", "--exp_dirs", str(exp["dir"]), "--checkpoint", "avg.pt",
                                          "--test_data", str(exp["list"]), f"--{option}", str(value)])
        line = _one_line_usage_error(bench.main, capsys)
        assert f"--{option}" in line and words in line, line
    run_sh = next(name for name, own in RUN_SH_OPTIONS.items() if own == option)
    assert run_sh_error({run_sh: str(value)}).startswith(f"--{run_sh} {value}: ") and words in run_sh_error(
        {run_sh: str(value)})
    model = exp["model"]
    calls = {"decode_list": lambda: model.decode_list(str(exp["list"]), modes="attention", **{option: value})}
    if option != "batch_size":  # transcribe and stream decode one utterance
        calls["transcribe"] = lambda: model.transcribe(str(exp["clips"][0]), mode="attention", **{option: value})
        stream = {"chunk_size": 4, STREAM_ARGS.get(option, option): value}
        calls["stream"] = lambda: model.stream(mode="attention", **stream)
    for name, call in calls.items():
        with pytest.raises(UserError) as e:
            call()
        assert words in str(e.value) and "\n" not in str(e.value), (name, str(e.value))


def test_a_config_batch_size_above_the_ceiling_is_refused_saying_why(exp):  # noqa: F811
    with pytest.raises(ConfigError) as e:
        load_config(str(exp["conf"]), [f"dataset_conf.batch_conf.batch_size={BATCH_SIZE_MAX + 1}"])
    assert f"must be <= {BATCH_SIZE_MAX}, got {BATCH_SIZE_MAX + 1} ({BATCH_WHY})" in str(e.value)


def test_every_mode_decodes_at_the_ceiling(exp, tmp_path):  # noqa: F811
    """The ceiling is a beam one can decode with: every mode (the LM ones too) at beam_size 1000 on a model of 18
    units, whose searches take every unit of each hypothesis (a beam above the vocabulary). These units (letters, no
    '▁') do not mark where a word ends, so joint_ctc_attention_lm refuses them at any beam, with one line naming the
    units file (issue 80 A: its words would come out glued); its search at the ceiling is joint_ctc_attention's."""
    model = exp["model"]
    lm = write_arpa(tmp_path / "lm.arpa", {w: -1.0 for w in WORDS})
    modes = [m for m in DECODING_METHODS if m != "joint_ctc_attention_lm"]
    report = model.decode_list(str(exp["list"]), modes=modes, beam_size=BEAM_SIZE_MAX, lm=lm, batch_size=2)
    assert report.utterances == len(exp["clips"]) and set(report.texts) == set(modes)
    letters = write_arpa(tmp_path / "letters.arpa", {c: -1.0 for c in sorted(set("".join(WORDS)))})
    with pytest.raises(UserError, match="do not mark where the LM's words end") as e:
        model.decode_list(str(exp["list"]), modes=["joint_ctc_attention_lm"], beam_size=BEAM_SIZE_MAX, lm=letters,
                          batch_size=2)
    assert "\n" not in str(e.value)
