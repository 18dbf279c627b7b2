"""check_lm warns when the dev text's words are mostly unknown to the LM (an LM built for another corpus)."""
from tests.lm.lm_helpers import need_lmplz
from wenet_udps.bin import build_lm, check_lm


def test_build_then_check_warns_on_another_corpus(tmp_path, capsys):
    need_lmplz()
    (tmp_path / "train").write_text("a1 the cat sat\na2 a dog ran\na3 the dog sat\n")
    (tmp_path / "dev_same").write_text("d1 the cat ran\n")
    (tmp_path / "dev_other").write_text("d1 completely different words here\n")
    assert build_lm.main(["--text", str(tmp_path / "train"), "--order", "2",
                        "--out", str(tmp_path / "lm.arpa")]) == 0
    assert "2-gram" in capsys.readouterr().out
    assert check_lm.main(["--lm", str(tmp_path / "lm.arpa"), "--text", str(tmp_path / "dev_same")]) == 0.0
    same = capsys.readouterr()
    assert "0.0 % of 3 words" in same.out and "another corpus" not in same.err
    assert check_lm.main(["--lm", str(tmp_path / "lm.arpa"), "--text", str(tmp_path / "dev_other")]) == 1.0
    other = capsys.readouterr()
    assert "100.0 % of 4 words" in other.out and "another corpus" in other.err
