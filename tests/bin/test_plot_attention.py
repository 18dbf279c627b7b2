"""wenet_udps.bin.plot_attention: both plots are written; a wrong --utt or an empty list is one line."""
import pytest

from wenet_udps.bin import plot_attention
from tests.bin.test_recognize_export import make_model_dir
from tests.train.train_helpers import write_data_list


def test_main_writes_one_grid_per_experiment_and_the_entropy_chart(tmp_path, fsdd_dir):
    dirs = []
    for name, udps in (("sd", False), ("udps", True)):
        (tmp_path / name).mkdir()
        make_model_dir(tmp_path / name, att_udps=udps, encoder="conformer")
        dirs.append(str(tmp_path / name))
    data = tmp_path / "test.list"
    items = write_data_list(fsdd_dir, data, 3)
    plot_attention.main(["--exp_dirs", *dirs, "--checkpoint", "avg.pt", "--test_data", str(data),
                         "--utt", items[1]["key"], "--out_dir", str(tmp_path / "plots")])
    for png in ("attention_sd.png", "attention_udps.png", "attention_entropy.png"):
        assert (tmp_path / "plots" / png).stat().st_size > 5000
    # The chart's numbers: one line per experiment, site and head (a conformer with an attention decoder: encoder
    # self-attention and decoder self- and source attention); no seed groups here, so no seeds table.
    rows = [line.split("\t") for line in (tmp_path / "plots" / "attention_entropy.tsv").read_text().splitlines()]
    assert rows[0] == ["exp", "site", "head", "nats"]
    assert {r[0] for r in rows[1:]} == {"sd", "udps"}
    assert any("src_attn" in r[1] for r in rows[1:]) and any("self_attn" in r[1] for r in rows[1:])
    assert all(float(r[3]) >= 0 for r in rows[1:]) and len(rows) - 1 == 2 * len({(r[1], r[2]) for r in rows[1:]})
    assert not (tmp_path / "plots" / "attention_entropy.md").exists()
    with pytest.raises(ValueError, match="--utt nope: no such utterance among the 3 used of "):
        plot_attention.main(["--exp_dirs", dirs[0], "--checkpoint", "avg.pt", "--test_data", str(data),
                             "--utt", "nope", "--out_dir", str(tmp_path / "p2")])


@pytest.mark.parametrize("case", ["no such key", "empty list"])
def test_an_unknown_utt_or_an_empty_list_is_one_line_naming_it(tmp_path, monkeypatch, capsys, case):
    """Issue 47 case 24: both ended in `ValueError: utterance None not found` (a traceback). Now one line: the key
    and the list (exit 2), or the list's counts (exit 1, the one rule of wenet_udps.utils.counts)."""
    import json
    import sys

    import numpy as np
    import soundfile as sf

    from wenet_udps.utils import cli
    make_model_dir(tmp_path)
    data = tmp_path / "test.list"
    rows = []
    if case == "no such key":
        sf.write(str(tmp_path / "a.wav"), np.random.default_rng(0).standard_normal(8000).astype(np.float32) * 0.1,
                 8000)
        rows = [{"key": "a", "wav": str(tmp_path / "a.wav"), "txt": "ONE"}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(sys, "argv", ["prog", "--exp_dirs", str(tmp_path), "--checkpoint", "avg.pt", "--test_data",
                                      str(data), "--utt", "nosuchkey", "--out_dir", str(tmp_path / "plots")])
    with pytest.raises(SystemExit) as exit_info:
        cli.run_cli(plot_attention.main, "wenet_udps.bin.plot_attention")
    last = capsys.readouterr().err.strip().splitlines()[-1]
    if case == "no such key":
        assert exit_info.value.code == 2
        assert last == (f"wenet_udps.bin.plot_attention: error: --utt nosuchkey: no such utterance among the 1 "
                        f"used of {data}")
    else:
        assert exit_info.value.code == 1
        assert last == (f"wenet_udps.bin.plot_attention: error: plot_attention data {data}: 0 utterances used, 0 "
                        f"skipped (none): no usable utterance")
    assert not (tmp_path / "plots").exists()
