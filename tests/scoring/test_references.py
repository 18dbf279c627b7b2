"""Issue 57, S15: what is scored is what was decoded. A decode records the references of the list it decoded; every
scorer (compute-wer, collect_results --data_dir, the LOSO report) refuses other references naming both files."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from wenet_udps.bin import recognize
from wenet_udps.scoring.references import check_references, reference_record
from wenet_udps.utils.cli import UserError
from wenet_udps.utils.source_info import read_source, write_source
from tests.train.train_helpers import make_model_dir, write_data_list

ROOT = Path(__file__).resolve().parents[2]


def tool(name, *args):
    return subprocess.run([sys.executable, str(ROOT / "tools" / f"{name}.py"), *map(str, args)],
                          capture_output=True, text=True)


def one_error_line(proc, program):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{program}: error: ") and "Traceback" not in proc.stderr
    return lines[0]


def write_text(path: Path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k} {v}\n" for k, v in rows.items()), encoding="utf-8")


def decoded(tmp_path, refs, hyps, skipped=0, **extra):
    """A result dir as recognize leaves it: hypotheses and a decode.info recording ``refs``."""
    data_list = tmp_path / "data.list"
    data_list.write_text("".join(json.dumps({"key": k, "wav": "x.wav", "txt": t}) + "\n" for k, t in refs.items()))
    mode = tmp_path / "exp" / "test" / "attention"
    write_text(mode / "text", hyps)
    write_source(str(mode / "decode.info"), {**reference_record(str(data_list), refs, skipped), **extra})
    return mode / "text"


def test_other_references_are_refused_naming_both(tmp_path):
    refs = {"a": "ONE TWO", "b": "THREE", "c": "FOUR"}
    hyp = decoded(tmp_path, {"a": "ONE TWO", "b": "THREE"}, {"a": "ONE", "b": "THREE"}, skipped=1)
    hyps = {"a": "ONE", "b": "THREE"}
    check_references(refs, "data/test/text", hyps, str(hyp))   # c: the one utterance the decode skipped
    check_references({"a": "ONE  TWO", "b": "THREE"}, "t", hyps, str(hyp))   # white space is not a difference
    with pytest.raises(UserError, match=rf"data/dev/text are not the references of {tmp_path}/data.list, which "
                                        rf"{hyp} was decoded from: 1 of its 2 decoded utterances have no reference"):
        check_references({"a": "ONE TWO", "x": "THREE"}, "data/dev/text", hyps, str(hyp))
    with pytest.raises(UserError, match="the transcripts of the 2 decoded utterances differ"):
        check_references({"a": "ONE TOO", "b": "THREE"}, "edited/text", hyps, str(hyp))
    with pytest.raises(UserError, match="it has 2 utterances that were not decoded .* skipped only 1"):
        check_references({**refs, "d": "FIVE"}, "bigger/text", hyps, str(hyp))
    with pytest.raises(UserError, match="holds 1 hypotheses, but 2 utterances were decoded"):
        check_references(refs, "data/test/text", {"a": "ONE"}, str(hyp))


def test_a_result_without_the_record_is_refused_and_another_toolkits_is_not_checked(tmp_path):
    hyp = decoded(tmp_path, {"a": "ONE"}, {"a": "ONE"})
    write_source(str(hyp.parent / "decode.info"), {"checkpoint": "/x/avg_5.pt", "sha256": "0123"})
    with pytest.raises(UserError, match="records no references.*decode it again: run.sh --stage 5"):
        check_references({"a": "TWO"}, "t", {"a": "ONE"}, str(hyp))
    (hyp.parent / "decode.info").unlink()   # a hypothesis file of another toolkit: nothing recorded to check
    check_references({"a": "TWO"}, "t", {"a": "ONE"}, str(hyp))


def test_recognize_then_compute_wer_then_collect_results_score_only_what_was_decoded(tmp_path, fsdd_dir):
    """The entry points in the order run.sh's stages 5 and 7 call them, on a real decode."""
    exp = tmp_path / "exp" / "x_udps"
    exp.mkdir(parents=True)
    conf, ckpt = make_model_dir(exp, att_udps=False)   # the checkpoint of the experiment its results are under
    (tmp_path / "data" / "test").mkdir(parents=True)
    items = write_data_list(fsdd_dir, tmp_path / "data" / "test" / "data.list", 4)
    write_text(tmp_path / "data" / "test" / "text", {i["key"]: i["txt"] for i in items})
    others = write_data_list(fsdd_dir, tmp_path / "other.list", 4, offset=7)
    write_text(tmp_path / "other" / "test" / "text", {i["key"]: i["txt"] for i in others})   # another set
    write_text(tmp_path / "edited" / "test" / "text", {i["key"]: i["txt"] + " ZERO" for i in items})
    result = exp / "test"
    recognize.main(["--config", str(conf), "--checkpoint", str(ckpt), "--test_data",
                    str(tmp_path / "data" / "test" / "data.list"), "--result_dir", str(result), "--modes",
                    "ctc_greedy_search", "attention", "--batch_size", "2"])
    info = read_source(str(result / "attention" / "decode.info"))
    assert info["test_data"] == str(tmp_path / "data" / "test" / "data.list") and info["refs_decoded"] == "4"
    assert info["refs_skipped"] == "0" and len(info["refs_sha256"]) == 64
    for mode in ("ctc_greedy_search", "attention"):
        hyp = result / mode / "text"
        good = tool("compute-wer", "--v=0", tmp_path / "data" / "test" / "text", hyp)
        assert good.returncode == 0 and "Overall -> " in good.stdout, good.stderr
        (result / mode / "wer").write_text(good.stdout, encoding="utf-8")
        for wrong in ("other", "edited"):
            line = one_error_line(tool("compute-wer", tmp_path / wrong / "test" / "text", hyp), "compute-wer.py")
            assert f"{tmp_path / wrong / 'test' / 'text'} are not the references of " \
                   f"{tmp_path / 'data' / 'test' / 'data.list'}, which {hyp} was decoded from" in line
    out = tmp_path / "RESULTS.md"
    ok = tool("collect_results", "--exp_dir", tmp_path / "exp", "--out", out, "--plots_dir", tmp_path / "plots",
              "--data_dir", tmp_path / "data", "--metric", "WER")
    assert ok.returncode == 0 and "Letter error rate" in out.read_text(), ok.stderr
    for wrong in ("other", "edited"):
        line = one_error_line(tool("collect_results", "--exp_dir", tmp_path / "exp", "--out", out, "--plots_dir",
                                   tmp_path / "plots", "--data_dir", tmp_path / wrong), "collect_results.py")
        assert f"{tmp_path / wrong / 'test' / 'text'} are not the references of" in line
    # a result decoded before references were recorded: refused, saying how to decode it again
    info.pop("refs_sha256")
    write_source(str(result / "attention" / "decode.info"), info)
    line = one_error_line(tool("compute-wer", tmp_path / "data" / "test" / "text", result / "attention" / "text"),
                          "compute-wer.py")
    assert "records no references" in line and "run.sh --stage 5" in line
