"""Issue 82: every entry point that takes hotwords refuses a bad list naming its file and line, before decoding.

The entry points are found from the code: each program (wenet_udps/bin/, bench/) that makes its flags from the one
option table (``add_decode_arguments``) with ``hotwords`` among them, and each Python API method whose keywords
(``api.KEYWORDS``) include it; each must be in the table of calls here, so a new one cannot bypass the check."""
import re
import sys
from pathlib import Path

import pytest

from tests.decode.decode_helpers import streaming_exp
from wenet_udps.decode.api import KEYWORDS
from wenet_udps.utils.cli import UserError

ROOT = Path(__file__).resolve().parents[2]


def programs_with_hotwords():
    """The modules of wenet_udps/bin and bench that add the table's flags, hotwords among them."""
    import importlib
    found = set()
    for path in sorted([*(ROOT / "wenet_udps" / "bin").glob("*.py"), *(ROOT / "bench").glob("*.py")]):
        if "add_decode_arguments(" not in path.read_text(encoding="utf-8"):
            continue
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        module = importlib.import_module(name)
        names = [v for k, v in vars(module).items() if k.isupper() and isinstance(v, (list, tuple))
                 and "hotwords" in v]
        if names:
            found.add(name)
    return found


@pytest.fixture(scope="module")
def exp(tmp_path_factory):
    return streaming_exp(tmp_path_factory.mktemp("exp"), 2)


def test_every_entry_point_refuses_a_bad_list_naming_the_line(exp, tmp_path, monkeypatch, capsys):
    bad = tmp_path / "hot.txt"
    bad.write_text("ONE\n\nQUIZ\n", encoding="utf-8")
    words = f"{bad}:3: the phrase 'QUIZ' cannot be spelled"
    base = ["--checkpoint", str(exp["ckpt"]), "--test_data", str(exp["list"])]
    programs = {
        "wenet_udps.bin.recognize": ["--config", str(exp["conf"]), *base, "--result_dir", str(tmp_path / "res"),
                                     "--modes", "attention_rescoring", "--context_file", str(bad)],
        "bench.decode_speed": ["--exp_dirs", str(exp["dir"]), "--checkpoint", "avg.pt", "--test_data",
                               str(exp["list"]), "--modes", "attention_rescoring", "--context_file", str(bad)],
    }
    assert programs_with_hotwords() == set(programs)
    import importlib
    for name, argv in programs.items():
        module = importlib.import_module(name)
        monkeypatch.setattr(sys, "argv", [name, *argv])
        with pytest.raises(SystemExit) as e:
            module.main(argv)
        err = capsys.readouterr().err.strip().splitlines()  # (a log line of the unverified test checkpoint first)
        assert e.value.code == 2 and "error: " in err[-1] and words in err[-1], (name, err)
    assert not (tmp_path / "res").exists()
    model, wav = exp["model"], str(exp["clips"][0])
    methods = {"transcribe": lambda h: model.transcribe(wav, mode="attention_rescoring", hotwords=h),
               "decode_list": lambda h: model.decode_list(str(exp["list"]), modes="attention_rescoring", hotwords=h),
               "stream": lambda h: model.stream(4, mode="attention_rescoring", hotwords=h)}
    assert {m for m, keywords in KEYWORDS.items() if "hotwords" in keywords} == set(methods)
    for name, call in methods.items():
        with pytest.raises(UserError, match=re.escape(words)):
            call(str(bad))
        with pytest.raises(UserError, match=r"hotwords\[1\]: the phrase 'QUIZ'"):
            call(["ONE", "QUIZ"])
