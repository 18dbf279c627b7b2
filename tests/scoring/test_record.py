"""Issue 80 round 8 (the hostile tester's items 1-3): a decode.info is a legacy record or a whole current one
(wenet_udps.scoring.record); a line deleted or a mode edited is refused, naming the file and the key."""
import shutil
from pathlib import Path

import pytest

from tests.tools.load import load_tool
from tests.tools.results_helpers import decoded_exp, score
from wenet_udps.scoring.record import ALWAYS, check_written, record_problem


def collect(tmp_path: Path, capsys):
    tool = load_tool("collect_results")
    rc = tool.main(["--exp_dir", str(tmp_path / "exp"), "--plots_dir", str(tmp_path / "plots"),
                    "--data_dir", str(tmp_path / "data")])
    return rc, capsys.readouterr()


def drop(info: Path, key: str) -> None:
    info.write_text("".join(line for line in info.read_text(encoding="utf-8").splitlines(keepends=True)
                            if not line.startswith(f"{key}:")), encoding="utf-8")


def test_the_fixture_is_collected(tmp_path, capsys):
    decoded_exp(tmp_path)
    rc, out = collect(tmp_path, capsys)
    assert rc == 0, out.err


def test_an_edited_hypothesis_with_its_text_sha256_line_deleted_is_refused(tmp_path, capsys):
    exp = decoded_exp(tmp_path)
    d = exp / "m" / "test" / "attention_rescoring"
    shutil.copy(tmp_path / "data" / "test" / "text", d / "text")   # the references as hypothesis: 0.00
    (d / "wer").write_text(score(tmp_path / "data" / "test" / "text", d / "text"), encoding="utf-8")
    drop(d / "decode.info", "text_sha256")
    rc, out = collect(tmp_path, capsys)
    assert rc == 1 and not (exp / "RESULTS.md").exists()
    assert (f"{d / 'decode.info'} lacks text_sha256, which every attention_rescoring decode.info holds (it holds "
            f"mode, refs_sha256, so it is no legacy record") in out.err
    assert "Traceback" not in out.err


def test_another_modes_result_with_its_mode_line_deleted_is_refused(tmp_path, capsys):
    exp = decoded_exp(tmp_path)
    test = exp / "m" / "test"
    shutil.rmtree(test / "attention_rescoring")
    shutil.copytree(test / "attention", test / "attention_rescoring")
    drop(test / "attention_rescoring" / "decode.info", "mode")
    rc, out = collect(tmp_path, capsys)
    assert rc == 1 and f"{test / 'attention_rescoring' / 'decode.info'} lacks mode" in out.err, out.err


def test_an_lm_column_holding_a_decode_without_an_lm_is_refused(tmp_path, capsys):
    exp = decoded_exp(tmp_path)
    test = exp / "m" / "test"
    shutil.copytree(test / "attention_rescoring", test / "attention_rescoring_lm")
    info = test / "attention_rescoring_lm" / "decode.info"
    info.write_text(info.read_text(encoding="utf-8").replace("mode: attention_rescoring\n",
                                                             "mode: attention_rescoring_lm\n"), encoding="utf-8")
    rc, out = collect(tmp_path, capsys)
    assert rc == 1 and f"{info} lacks lm, lm_sha256" in out.err, out.err


def test_a_mode_not_among_its_modes_is_refused():
    info = {key: "x" for key in ALWAYS} | {"mode": "attention", "modes": "ctc_greedy_search"}
    assert "records mode attention, which is not among its modes (ctc_greedy_search)" in record_problem(info, "f")


def test_a_legacy_record_is_still_read_and_a_writer_cannot_write_a_partial_one():
    assert record_problem({"checkpoint": "c", "modes": "attention"}, "f") is None
    with pytest.raises(RuntimeError, match="lacks sha256"):
        check_written({"checkpoint": "c", "config": "y", "mode": "attention", "text_sha256": "t"}, "f")


def test_the_lm_modes_are_the_modes_named_lm():
    """scoring.record tells an LM mode by its name (it may not import the registry): the registry's LM modes are
    exactly its modes named *_lm."""
    from wenet_udps.scoring.record import LM_SUFFIX
    from wenet_udps.transformer.modes import DECODING_METHODS, LM_METHODS
    assert {m for m in DECODING_METHODS if m.endswith(LM_SUFFIX)} == set(LM_METHODS)
