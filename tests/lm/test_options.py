"""The word LM's option rules, once (wenet_udps/lm/options.py): build_lm refuses an lmplz --prune that lmplz would
refuse, before reading any text; run.sh's lists of values are checked by the same rules (tests/test_run_sh_lm.py)."""
import pytest

from wenet_udps.bin import build_lm
from wenet_udps.lm.arpa import LmError
from wenet_udps.lm.options import check_order_and_prune, run_sh_error


@pytest.mark.parametrize("order,prune", [(3, None), (3, [0]), (3, [0, 1, 1]), (2, [0, 0]), (5, [0, 1, 1, 2, 2])])
def test_what_lmplz_takes_passes(order, prune):
    check_order_and_prune(order, prune)


@pytest.mark.parametrize("order,prune,message", [
    (1, None, "LM order must be >= 2"),
    (3, [0, 2, 1], "must not decrease"),
    (3, [0, 1, 1, 1], "give 1 to 3 counts"),
    (3, [1, 1, 1], "the first 0"),
    (3, [0, -1], "each >= 0"),
    (3, [], "give 1 to 3 counts"),
])
def test_what_lmplz_refuses_is_an_lm_error(order, prune, message):
    with pytest.raises(LmError, match=message):
        check_order_and_prune(order, prune)


def test_build_lm_refuses_a_decreasing_prune_before_reading_text(tmp_path, capsys):
    """lmplz refused '0 2 1' only after the text was read and the held-out check run; the text here is not even
    there to read."""
    (tmp_path / "text").write_text("a1 the cat\n")
    with pytest.raises(SystemExit) as e:
        build_lm.main(["--text", str(tmp_path / "text"), "--prune", "0", "2", "1", "--out", str(tmp_path / "lm.arpa")])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and "--prune: LM prune '0 2 1': the counts must not decrease" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "lm.arpa").exists()


def test_run_sh_values_pass_or_name_the_option():
    assert run_sh_error("0.3 0.6 1.0", "0 1 2", "", "") == ""
    assert run_sh_error("0", "-1 2.5", "4", "0 0 1 1") == ""
    assert run_sh_error("", "0", "", "").startswith("--lm_weights is empty")
    assert "--lm_weights '1 -0.5': -0.5 is not a recognize --lm_weight" in run_sh_error("1 -0.5", "0", "", "")
    assert "--lm_order takes an integer >= 2, got 'x'" in run_sh_error("1", "0", "x", "")
    assert "--lm_prune (with --lm_order 2)" in run_sh_error("1", "0", "2", "0 1 1")
