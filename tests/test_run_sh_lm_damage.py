"""run.sh stage 2 (--lm true) writes a damaged LM pair again rather than skipping it (issue 80 E, hostile round):
the skip needs the stamp (the ARPA, the writer and the binary's checksums) and the pair verifying as a load checks it
(``binarize_lm --verify``: ``read_binary``). Before, an edited words file or another binary copied over lm.bin was
"up to date, skipping", and check_lm / stage 5 refused it."""
import shutil

import pytest

from tests.lm.lm_helpers import need_build_binary, need_lmplz
from tests.test_run_sh_lm import make_texts, run_lm_stage
from wenet_udps.lm.binary import read_lm, write_binary
from wenet_udps.lm.build import build_arpa


@pytest.mark.parametrize("damage", ["words file edited", "another binary copied over"])
def test_stage2_writes_a_damaged_pair_again(tmp_path, damage):
    need_lmplz()
    need_build_binary()
    data = tmp_path / "data"
    make_texts(data)
    assert run_lm_stage(data, "--lm_order", "2").returncode == 0
    lm = data / "lm"
    good = read_lm(str(lm / "lm.bin"))
    if damage == "words file edited":  # a word replaced, the header line kept (issue 80 case 4)
        lines = (lm / "lm.bin.words").read_text().splitlines()
        i = next(k for k, w in enumerate(lines) if k and not w.startswith("<"))
        lines[i] = "QQQQ"
        (lm / "lm.bin.words").write_text("".join(w + "\n" for w in lines))
    else:
        other = tmp_path / "other"
        other.mkdir()
        build_arpa(["ONE TWO THREE", "TWO THREE FOUR"], str(other / "lm.arpa"), order=2)
        write_binary(str(other / "lm.arpa"), str(other / "lm.bin"))
        shutil.copyfile(other / "lm.bin", lm / "lm.bin")
    with pytest.raises(Exception):
        read_lm(str(lm / "lm.bin"))
    proc = run_lm_stage(data, "--lm_order", "2")
    log = proc.stderr + proc.stdout
    assert proc.returncode == 0, log[-2000:]
    assert "lm.bin is up to date" not in log and "KenLM binary" in log
    again = read_lm(str(lm / "lm.bin"))
    assert again.words == good.words and again.counts == good.counts
