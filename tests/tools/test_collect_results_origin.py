"""Issue 80, G: a result is bound to what made it. collect_results refuses a result whose decode.info names
another mode, experiment or set than its folder, and a ``wer`` whose N is not every token of its references
(rescored by hand with ``--ig``), each in one line naming the file."""
import shutil
from pathlib import Path

import pytest
import yaml

from tests.tools.load import load_tool
from tests.tools.results_helpers import decoded_exp, score
from wenet_udps.scoring.bound import ScoreError, check_counts, check_rescored, read_score

ROOT = Path(__file__).resolve().parents[2]


def collect(tmp_path: Path, capsys, *extra: str):
    tool = load_tool("collect_results")
    rc = tool.main(["--exp_dir", str(tmp_path / "exp"), "--plots_dir", str(tmp_path / "plots"), *extra])
    return rc, capsys.readouterr()


def test_the_bound_results_make_a_table(tmp_path, capsys):
    decoded_exp(tmp_path)
    rc, out = collect(tmp_path, capsys)
    assert rc == 0, out.err
    row = next(line for line in out.out.splitlines() if line.startswith("| transformer "))
    assert "| 60.00 | 20.00 |" in row   # attention 3 of 5 deleted, rescoring 1 of 5


def test_a_result_copied_under_another_modes_name_is_refused(tmp_path, capsys):
    """``cp -a EXP/test/attention EXP/test/attention_rescoring`` put attention's number in the rescoring column."""
    exp = decoded_exp(tmp_path)
    target = exp / "m" / "test" / "attention_rescoring"
    shutil.rmtree(target)
    shutil.copytree(exp / "m" / "test" / "attention", target)
    rc, out = collect(tmp_path, capsys)
    assert rc == 1 and not (exp / "RESULTS.md").exists()
    assert (f"collect_results.py: {target}: {target / 'decode.info'} records mode attention, but it lies in "
            f"attention_rescoring/") in out.err
    assert "Traceback" not in out.err


@pytest.mark.parametrize("folder", ["ctc_prefix_beam_search_lm", "ctc_prefix_beam_search_lm_big"])
def test_a_tag_never_makes_a_mode_another(tmp_path, capsys, folder):
    """run.sh's LM results are ``<mode>_<lm_tag>``: a tag is allowed, but not one that names a longer mode."""
    exp = decoded_exp(tmp_path, modes=("ctc_prefix_beam_search", "attention"))
    (exp / "m" / "test" / "ctc_prefix_beam_search").rename(exp / "m" / "test" / folder)
    rc, out = collect(tmp_path, capsys)
    assert rc == 1 and f"records mode ctc_prefix_beam_search, but it lies in {folder}/" in out.err


def test_a_tagged_folder_of_the_same_mode_is_kept(tmp_path, capsys):
    exp = decoded_exp(tmp_path)
    (exp / "m" / "test" / "attention").rename(exp / "m" / "test" / "attention_big")
    rc, out = collect(tmp_path, capsys)
    assert rc == 0, out.err


def test_a_result_copied_from_another_experiment_or_set_is_refused(tmp_path, capsys):
    exp = decoded_exp(tmp_path)
    other = exp / "other"
    other.mkdir()
    (other / "train.yaml").write_text(yaml.safe_dump({"encoder": "conformer"}), encoding="utf-8")
    shutil.copytree(exp / "m" / "test", other / "test")
    rc, out = collect(tmp_path, capsys)
    assert rc == 1 and f"records checkpoint {exp / 'm' / 'avg_5.pt'}, which is not of the experiment {other}" \
        in out.err
    shutil.rmtree(other)
    (exp / "m" / "test").rename(exp / "m" / "dev")
    rc, out = collect(tmp_path, capsys)
    assert rc == 1 and "records the decoded list" in out.err and "which is not of the set dev" in out.err


def test_a_whole_copy_of_an_experiment_keeps_its_results(tmp_path, capsys):
    """``cp -a exp/m exp/m2``: the copy holds its checkpoint under the same name and SHA-256."""
    exp = decoded_exp(tmp_path)
    shutil.copytree(exp / "m", exp / "m2")
    rc, out = collect(tmp_path, capsys)
    assert rc == 0, out.err


def test_a_wer_rescored_by_hand_with_ignored_words_is_refused(tmp_path, capsys):
    """compute-wer --ig drops UH from the references: N=12 of the references' 15 tokens, a lower rate that would
    stand in the table beside the others without a note."""
    exp = decoded_exp(tmp_path)
    d = exp / "m" / "test" / "attention_rescoring"
    (tmp_path / "ig").write_text("UH\n", encoding="utf-8")
    (d / "wer").write_text(score(tmp_path / "data" / "test" / "text", d / "text", f"--ig={tmp_path / 'ig'}"),
                           encoding="utf-8")
    rc, out = collect(tmp_path, capsys)
    assert rc == 1 and not (exp / "RESULTS.md").exists()
    line = next(x for x in out.err.splitlines() if str(d / "wer") in x)
    assert (f"{d / 'wer'} scores N=12 reference tokens, but its references {tmp_path / 'data' / 'test' / 'text'} "
            f"hold 15 (scored with --ignore_words {tmp_path / 'ig'}: rescored by hand?)") in line


def test_n_is_counted_as_compute_wer_counts_it(tmp_path):
    """check_counts agrees with compute-wer in word and character mode, with tags and normalisation."""
    ref, hyp = tmp_path / "ref", tmp_path / "hyp"
    ref.write_text("u1 Zero, one <unk> two\nu2 你好 a-b\nu3\n", encoding="utf-8")
    hyp.write_text("u1 zero\n", encoding="utf-8")
    (tmp_path / "ig").write_text("TWO\n", encoding="utf-8")
    for opts in ([], ["--char=1"], ["--punctuation", "remove"], ["--rt=0"], ["--char=1", "--case", "upper"],
                 ["--missing=skip", "--ig", str(tmp_path / "ig")]):
        wer = tmp_path / "wer"
        wer.write_text(score(ref, hyp, *opts), encoding="utf-8")
        if "--missing=skip" in opts:
            with pytest.raises(ScoreError, match="--ignore_words .* and scored with --missing skip"):
                check_counts(read_score(str(wer)))
        else:
            check_counts(read_score(str(wer)))
        check_rescored(read_score(str(wer)), str(hyp), str(ref))   # scored again: compute-wer's counts, each option


def decode_info_writers():
    """(file, function, records mode) of every function in wenet_udps/ and tools/ that writes a result's
    ``decode.info`` (a ``write_source`` call whose path names it), found from the code."""
    import ast
    found = []
    for path in sorted([*(ROOT / "wenet_udps").rglob("*.py"), *(ROOT / "tools").glob("*.py")]):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
            calls = [c for c in ast.walk(func)
                     if isinstance(c, ast.Call) and getattr(c.func, "id", "") == "write_source"]
            if not any("decode.info" in ast.unparse(c) for c in calls):
                continue
            keys = {n.slice.value for n in ast.walk(func) if isinstance(n, ast.Subscript)
                    and isinstance(n.slice, ast.Constant) and isinstance(n.ctx, ast.Store)}
            found.append((str(path.relative_to(ROOT)), func.name, "mode" in keys))
    return found


def test_every_writer_of_a_decode_info_records_its_mode():
    """The guard of the mode binding: each writer stores ``...["mode"] = ...`` before it writes (shown to fail: with
    write_results' line removed it reports ('wenet_udps/decode/data_list.py', 'write_results', False))."""
    writers = decode_info_writers()
    assert {(f, name) for f, name, _ in writers} >= {("wenet_udps/decode/data_list.py", "write_results"),
                                                     ("wenet_udps/bin/sherpa_decode.py", "main")}
    assert [w for w in writers if not w[2]] == []


def test_columns_scored_under_different_options_are_refused(tmp_path, capsys):
    """Issue 80 round 7, G: one ``wer`` rescored with ``--rt=0`` (another number on byte-identical text) may not
    sit beside the others; ``char`` alone may differ (a recipe scores words or characters)."""
    exp = decoded_exp(tmp_path)
    refs = tmp_path / "data" / "test" / "text"
    a, b = exp / "m" / "test" / "attention", exp / "m" / "test" / "attention_rescoring"
    (b / "wer").write_text(score(refs, b / "text", "--char=1"), encoding="utf-8")
    rc, out = collect(tmp_path, capsys)
    assert rc == 0, out.err
    (b / "wer").write_text(score(refs, b / "text", "--rt=0"), encoding="utf-8")
    rc, out = collect(tmp_path, capsys)
    assert rc == 1
    # (refused as not stage 5's scoring, scoring.recorded; results without a decode.info, by their mix)
    assert f"{b / 'wer'} was scored with remove_tag=0, but stage 5 scores with remove_tag=1" in out.err, out.err
    for d in (a, b):
        (d / "decode.info").unlink()
    rc, out = collect(tmp_path, capsys, "--allow_unrecorded")
    assert rc == 1
    assert (f"{a / 'wer'} and {b / 'wer'} were scored under different options (remove_tag=1 vs remove_tag=0)"
            in out.err), out.err


def test_one_column_decoded_under_different_options_is_refused(tmp_path, capsys):
    """Issue 81 attack F3a: two exp dirs of one checkpoint, one decoded with decoding_chunk_size 4 and one with -1,
    made a family table and a paired test whose whole difference was the decoding. Within one mode's column the
    recorded decoding options must agree; another mode (another column) may differ, and so may an option one
    record lacks (an older decode.info)."""
    exp = decoded_exp(tmp_path)
    shutil.copytree(exp / "m", exp / "n")
    for name, chunk in (("m", 4), ("n", 4)):
        for mode in ("attention", "attention_rescoring"):
            info = exp / name / "test" / mode / "decode.info"
            info.write_text(info.read_text(encoding="utf-8").replace("/m/", f"/{name}/")
                            + f"decoding_chunk_size: {chunk if mode == 'attention' else 16}\nbeam_size: 10\n",
                            encoding="utf-8")
    rc, out = collect(tmp_path, capsys)
    assert rc == 0, out.err
    (exp / "RESULTS.md").unlink()
    info = exp / "n" / "test" / "attention" / "decode.info"
    info.write_text(info.read_text(encoding="utf-8").replace("decoding_chunk_size: 4", "decoding_chunk_size: -1"),
                    encoding="utf-8")
    rc, out = collect(tmp_path, capsys)
    assert rc == 1 and not (exp / "RESULTS.md").exists()
    assert (f"{exp / 'm' / 'test' / 'attention'} and {exp / 'n' / 'test' / 'attention'} were decoded under "
            f"different options (decoding_chunk_size=4 vs decoding_chunk_size=-1), so their attention numbers do "
            f"not compare") in out.err, out.err
