"""Issue 82, F3: a request of several modes where some cannot use a hotword option decodes those without it, with
one warning, and their decode.info records None for the option (the others record what they used)."""
import logging

from tests.decode.test_hotwords import exp, write  # noqa: F401 (the module's model fixture)
from wenet_udps.bin import recognize
from wenet_udps.transformer.decode_options import resolve_decode_options
from wenet_udps.utils.source_info import read_source


def test_modes_that_cannot_use_an_option_decode_without_it_and_record_none(exp, tmp_path, caplog):  # noqa: F811
    hot = write(tmp_path / "hot.txt", "ONE\n")
    base = ["--config", str(exp["conf"]), "--checkpoint", str(exp["ckpt"]), "--test_data", str(exp["list"]),
            "--beam_size", "4"]
    with caplog.at_level(logging.WARNING):
        recognize.main(base + ["--result_dir", str(tmp_path / "biased"), "--modes", "attention",
                               "ctc_prefix_beam_search", "--context_file", hot, "--context_score", "2"])
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "attention" in
              r.getMessage() and "--context_score" in r.getMessage()]
    assert len(warned) == 1, caplog.text
    recognize.main(base + ["--result_dir", str(tmp_path / "plain"), "--modes", "attention"])
    plain = (tmp_path / "plain" / "attention" / "text").read_bytes()
    assert (tmp_path / "biased" / "attention" / "text").read_bytes() == plain
    idle = read_source(str(tmp_path / "biased" / "attention" / "decode.info"))
    used = read_source(str(tmp_path / "biased" / "ctc_prefix_beam_search" / "decode.info"))
    for key in ("context_file", "context_score", "context_sha256", "context_phrases"):
        assert idle[key] == "None", key
        assert used[key] != "None", key
    assert used["context_score"] == "2"


def test_the_api_warns_once_for_the_modes_without_the_option(caplog):
    with caplog.at_level(logging.WARNING):
        modes, values = resolve_decode_options(["attention", "ctc_greedy_search", "ctc_prefix_beam_search"],
                                               {"hotwords": ("ONE",), "context_score": 2.0})
    assert values["context_score"] == 2.0
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(lines) == 1 and "attention ctc_greedy_search" in lines[0] and "context_score=2.0" in lines[0]
