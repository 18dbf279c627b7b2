"""Fixtures of the LM tests."""
import pytest

from tests.lm.lm_helpers import need_flashlight, write_units
from wenet_udps.text import CharTokenizer


@pytest.fixture
def letters(tmp_path):
    """Letter units with the space unit: <blank> <unk> a b ▁ <sos/eos> (skips without flashlight-text)."""
    need_flashlight()
    write_units(tmp_path / "units.txt", ["<blank>", "<unk>", "a", "b", "▁", "<sos/eos>"])
    return CharTokenizer(symbol_table_path=str(tmp_path / "units.txt"))
