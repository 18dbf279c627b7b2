"""Issue 80 round 7, G (the hostile tester's findings on stage 7): a ``wer`` in the table is scored as stage 5
scores, with its options line, against the references its decode recorded and the table's ``--data_dir``; a result
without a ``decode.info`` needs ``--allow_unrecorded`` (and is marked); an LM column's tag names its LM."""
import shutil
from pathlib import Path

import pytest

from tests.tools.load import load_tool
from tests.tools.results_helpers import decoded_exp, score
from wenet_udps.scoring.bound import binding_lines
from wenet_udps.scoring.references import ReferencesError


def collect(tmp_path: Path, capsys, *extra: str):
    tool = load_tool("collect_results")
    rc = tool.main(["--exp_dir", str(tmp_path / "exp"), "--plots_dir", str(tmp_path / "plots"), *extra])
    return rc, capsys.readouterr()


def test_every_wer_scored_with_other_options_than_stage_5s_is_refused(tmp_path, capsys):
    """All columns rescored with ``--rt=0`` agree with each other, but not with stage 5's scoring."""
    exp = decoded_exp(tmp_path)
    refs = tmp_path / "data" / "test" / "text"
    for mode in ("attention", "attention_rescoring"):
        d = exp / "m" / "test" / mode
        (d / "wer").write_text(score(refs, d / "text", "--rt=0"), encoding="utf-8")
    rc, out = collect(tmp_path, capsys)
    assert rc == 1 and not (exp / "RESULTS.md").exists()
    wer = exp / "m" / "test" / "attention" / "wer"
    assert (f"{wer} was scored with remove_tag=0, but stage 5 scores with remove_tag=1 (scored by hand?)"
            in out.err), out.err
    rc, out = collect(tmp_path, capsys, "--punctuation", "remove")   # run.sh passes the recipe's normalisation
    assert rc == 1 and "remove_tag=0 punctuation=keep, but stage 5 scores with remove_tag=1 punctuation=remove" \
        in out.err, out.err


def test_a_wer_without_its_options_line_beside_a_decode_info_is_refused(tmp_path, capsys):
    exp = decoded_exp(tmp_path)
    wer = exp / "m" / "test" / "attention" / "wer"
    wer.write_text("".join(line for line in wer.read_text(encoding="utf-8").splitlines(keepends=True)
                           if not line.startswith("Scored with: ")), encoding="utf-8")
    rc, out = collect(tmp_path, capsys)
    assert rc == 1 and not (exp / "RESULTS.md").exists()
    assert f"{wer} has no 'Scored with:' line, though {wer.parent / 'decode.info'} lies beside it" in out.err


def test_a_wer_scored_against_other_references_than_its_decode_recorded_is_refused(tmp_path, capsys):
    """The references a ``wer`` names are those its binding lines record, but the decode recorded others."""
    exp = decoded_exp(tmp_path)
    d = exp / "m" / "test" / "attention"
    other = tmp_path / "other_text"
    text = (tmp_path / "data" / "test" / "text").read_text(encoding="utf-8")
    other.write_text(text.replace("u0 ONE TWO THREE UH FOUR", "u0 ONE TWO THREE UH FIVE"), encoding="utf-8")
    report = score(tmp_path / "data" / "test" / "text", d / "text").splitlines(keepends=True)
    # scored against other_text (compute-wer refuses it: a report written another way, with its binding lines)
    (d / "wer").write_text("".join(line + "\n" for line in binding_lines(str(other), str(d / "text")))
                           + "".join(report[2:]), encoding="utf-8")
    rc, out = collect(tmp_path, capsys)
    assert rc == 1 and not (exp / "RESULTS.md").exists()
    line = next(x for x in out.err.splitlines() if str(d / "wer") in x)
    assert f"{d / 'wer'}: {other} are not the references of" in line and "differ" in line, out.err


def test_a_wer_scored_against_other_references_than_the_tables_data_dir_is_refused(tmp_path, capsys):
    exp = decoded_exp(tmp_path)
    shutil.copytree(tmp_path / "data", tmp_path / "data2")
    text = tmp_path / "data2" / "test" / "text"
    text.write_text(text.read_text(encoding="utf-8").replace("u2 ONE", "u2 one"), encoding="utf-8")
    rc, out = collect(tmp_path, capsys, "--data_dir", str(tmp_path / "data"))
    assert rc == 0, out.err
    with pytest.raises(ReferencesError, match=f"{text} are not the references of .*, which "
                                              f"{exp / 'm' / 'test' / 'attention' / 'text'} was decoded from: the "
                                              f"transcripts of the 3 decoded utterances differ"):
        collect(tmp_path, capsys, "--data_dir", str(tmp_path / "data2"))   # (run_cli: one line, exit 2)
    # the same transcripts in another file (a data dir prepared again): not the references scored, by SHA-256
    text.write_text((tmp_path / "data" / "test" / "text").read_text(encoding="utf-8") + "\n", encoding="utf-8")
    rc, out = collect(tmp_path, capsys, "--data_dir", str(tmp_path / "data2"))
    wer = exp / "m" / "test" / "attention" / "wer"
    assert rc == 1 and f"{wer} is the score of other text: it scored the references " \
        f"{tmp_path / 'data' / 'test' / 'text'}" in out.err and f"but {text} (the table's --data_dir) has" in out.err, \
        out.err


def test_a_result_without_a_decode_info_needs_allow_unrecorded_and_is_marked(tmp_path, capsys):
    """A hand-made result dir (``text`` and a ``wer`` scored by compute-wer, no ``decode.info``) was shown as one of
    our experiments' results."""
    exp = decoded_exp(tmp_path)
    d = exp / "m" / "test" / "ctc_greedy_search"
    d.mkdir()
    shutil.copy(exp / "m" / "test" / "attention" / "text", d / "text")
    (d / "wer").write_text(score(tmp_path / "data" / "test" / "text", d / "text"), encoding="utf-8")
    rc, out = collect(tmp_path, capsys)
    assert rc == 1 and not (exp / "RESULTS.md").exists()
    assert (f"collect_results.py: {d}: no decode.info records what made it (made by hand, or by another toolkit?)"
            in out.err), out.err
    rc, out = collect(tmp_path, capsys, "--allow_unrecorded")
    assert rc == 0, out.err
    rows = [line for line in out.out.splitlines() if line.startswith("| transformer ")]
    assert len(rows) == 2 and rows[1].endswith("| unrecorded (no decode.info) |"), out.out
    # columns attention, ctc_greedy_search, attention_rescoring: the hand-made number in a row of its own
    assert "| test | - | 60.00 | - |" in rows[1] and "| test | 60.00 | - | 20.00 |" in rows[0], out.out


def test_an_lm_columns_tag_names_its_lm(tmp_path, capsys):
    """``<mode>_<lm_tag>`` is run.sh's folder of the LM ``<data>/lm_<lm_tag>/lm.bin``: a result copied under
    another tag, or an untagged column showing a tagged LM, is refused; one column holds one LM."""
    exp = decoded_exp(tmp_path, modes=("ctc_prefix_beam_search", "attention"))
    test = exp / "m" / "test"
    lm = tmp_path / "data" / "lm_big" / "lm.bin"
    lm.parent.mkdir(parents=True)
    lm.write_bytes(b"an LM")
    from wenet_udps.utils.source_info import file_sha256
    d = test / "ctc_prefix_beam_search_lm_big"
    (test / "ctc_prefix_beam_search").rename(d)
    info = d / "decode.info"
    info.write_text(info.read_text(encoding="utf-8").replace("mode: ctc_prefix_beam_search",
                                                             "mode: ctc_prefix_beam_search_lm")
                    .replace("modes: ctc_prefix_beam_search", "modes: ctc_prefix_beam_search_lm")
                    + f"lm: {lm}\nlm_sha256: {file_sha256(str(lm))}\n", encoding="utf-8")
    rc, out = collect(tmp_path, capsys)
    assert rc == 0, out.err
    (exp / "RESULTS.md").unlink()
    for folder in ("ctc_prefix_beam_search_lm_small", "ctc_prefix_beam_search_lm"):
        shutil.copytree(d, test / folder)
        rc, out = collect(tmp_path, capsys)
        assert rc == 1 and not (exp / "RESULTS.md").exists()
        want = f"lm_{folder.split('_lm')[1][1:]}/" if folder.endswith("small") else "lm/"
        assert (f"{test / folder}: {test / folder / 'decode.info'} records the LM {lm}, but the folder "
                f"{folder}/ names the LM of {want}") in out.err, out.err
        shutil.rmtree(test / folder)
    # one column, one LM: another experiment's big column decoded with another lm_big/lm.bin
    shutil.copytree(exp / "m", exp / "n")
    for p in (exp / "n").rglob("decode.info"):
        p.write_text(p.read_text(encoding="utf-8").replace("/m/", "/n/"), encoding="utf-8")
    other = tmp_path / "old" / "lm_big" / "lm.bin"
    other.parent.mkdir(parents=True)
    other.write_bytes(b"another LM")
    info = exp / "n" / "test" / "ctc_prefix_beam_search_lm_big" / "decode.info"
    info.write_text(info.read_text(encoding="utf-8").replace(f"lm: {lm}", f"lm: {other}").replace(
        file_sha256(str(lm)), file_sha256(str(other))), encoding="utf-8")
    rc, out = collect(tmp_path, capsys)
    assert rc == 1 and "were decoded under different options (lm_sha256=" in out.err, out.err
