"""recognize --context_list: each utterance decoded with its own hotword list is what decoding that utterance alone
with that list as --context_file gives, in every mode that takes hotwords, whatever the batch; a list naming a key
the data list lacks, an utterance without a line, a phrase the units cannot spell, and the options that cannot go
with it are refused in one line naming them, before any decoding."""
import json

import pytest

from tests.decode.decode_helpers import read_hyps, streaming_exp
from wenet_udps.bin import recognize

MODES = ["ctc_prefix_beam_search", "attention_rescoring"]


@pytest.fixture(scope="module")
def exp(tmp_path_factory):
    return streaming_exp(tmp_path_factory.mktemp("exp"), 3)


def base(exp, out, *modes):
    return ["--config", str(exp["conf"]), "--checkpoint", str(exp["ckpt"]), "--result_dir", str(out),
            "--modes", *(modes or MODES), "--beam_size", "3"]


def test_each_utterance_is_decoded_with_its_own_list(exp, tmp_path):
    keys = [p.stem for p in exp["clips"]]
    lists = {keys[0]: ["ONE", "EIGHT"], keys[1]: ["TWO", "NINE", "TWO"], keys[2]: []}
    context = tmp_path / "lists"
    context.write_text("".join("\t".join([k, *v]) + "\n" for k, v in lists.items()), encoding="utf-8")
    recognize.main(base(exp, tmp_path / "all") + ["--test_data", str(exp["list"]), "--batch_size", "3",
                                                  "--context_list", str(context), "--context_score", "6"])
    recognize.main(base(exp, tmp_path / "none") + ["--test_data", str(exp["list"])])
    rows = exp["list"].read_text(encoding="utf-8").splitlines()
    changed = 0
    for key, row in zip(keys, rows):
        one = tmp_path / f"{key}.list"
        one.write_text(row + "\n", encoding="utf-8")
        extra = []
        if lists[key]:
            (tmp_path / f"{key}.hot").write_text("\n".join(lists[key]) + "\n", encoding="utf-8")
            extra = ["--context_file", str(tmp_path / f"{key}.hot"), "--context_score", "6"]
        recognize.main(base(exp, tmp_path / key) + ["--test_data", str(one), *extra])
        for mode in MODES:
            alone = read_hyps(tmp_path / key / mode / "text")[key]
            assert read_hyps(tmp_path / "all" / mode / "text")[key] == alone, (key, mode)
            changed += alone != read_hyps(tmp_path / "none" / mode / "text")[key]
    assert changed > 0   # the lists do bias these decodes: the comparison above is not of unbiased texts
    info = (tmp_path / "all" / "attention_rescoring" / "decode.info").read_text(encoding="utf-8")
    assert f"context_list: {context}\n" in info and "context_phrases: 4\n" in info and "context_weight: 1" in info


def test_refusals_name_the_file_line_and_option(exp, tmp_path, capsys):
    keys = [p.stem for p in exp["clips"]]
    context = tmp_path / "lists"
    args = base(exp, tmp_path / "res") + ["--test_data", str(exp["list"]), "--context_list", str(context)]

    def refused(argv, words):
        with pytest.raises(SystemExit) as e:
            recognize.main(argv)
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert e.value.code == 2 and words in err, err
        assert not (tmp_path / "res").exists()   # nothing decoded

    context.write_text("".join(f"{k}\tONE\n" for k in keys) + "stranger\tTWO\n", encoding="utf-8")
    refused(args, f"{context}:4: stranger is not an utterance of {exp['list']}")
    context.write_text(f"{keys[0]}\tONE\n", encoding="utf-8")
    refused(args, f"{context}: no line for {keys[1]} of {exp['list']} (2 of its 3 utterances have none")
    context.write_text(f"{keys[0]}\tONE\n{keys[1]}\n{keys[2]}\tQUIZ\n", encoding="utf-8")
    refused(args, f"{context}:3: the phrase 'QUIZ' cannot be spelled")
    context.write_text("".join(f"{k}\tONE\n" for k in keys), encoding="utf-8")
    refused(args + ["--context_file", str(context)], "--context_list and --context_file: give one")
    refused(base(exp, tmp_path / "res", "attention") + ["--test_data", str(exp["list"]), "--context_list",
                                                         str(context)], "--context_list applies to every mode but")
    shards = tmp_path / "shards.list"
    shards.write_text("x.tar\n", encoding="utf-8")
    refused(base(exp, tmp_path / "res") + ["--test_data", str(shards), "--data_type", "shard", "--context_list",
                                           str(context)], "--context_list needs --data_type raw")
    refused(base(exp, tmp_path / "res") + ["--test_data", str(exp["list"]), "--context_unspellable", "drop"],
            "--context_unspellable drop decides on the phrases of a list: give --context_file or --context_list")
    assert json.loads(exp["list"].read_text(encoding="utf-8").splitlines()[0])["key"] == keys[0]


def test_unspellable_phrases_dropped_when_asked(exp, tmp_path, capsys):
    keys = [p.stem for p in exp["clips"]]
    with_quiz, without = tmp_path / "with", tmp_path / "without"
    with_quiz.write_text("".join(f"{k}\tONE\tQUIZ\tNINE\n" for k in keys), encoding="utf-8")
    without.write_text("".join(f"{k}\tONE\tNINE\n" for k in keys), encoding="utf-8")
    for name, lists, extra in (("a", with_quiz, ["--context_unspellable", "drop"]), ("b", without, [])):
        recognize.main(base(exp, tmp_path / name, "ctc_prefix_beam_search") + [
            "--test_data", str(exp["list"]), "--context_list", str(lists), "--context_score", "6", *extra])
    assert read_hyps(tmp_path / "a" / "ctc_prefix_beam_search" / "text") == \
        read_hyps(tmp_path / "b" / "ctc_prefix_beam_search" / "text")
    info = (tmp_path / "a" / "ctc_prefix_beam_search" / "decode.info").read_text(encoding="utf-8")
    assert "context_dropped: 1\n" in info and "context_phrases: 2\n" in info
    assert f"1 hotword phrase(s) dropped (--context_unspellable drop), the units spell none of them; the first: " \
        f"{with_quiz}:1: the phrase 'QUIZ'" in capsys.readouterr().err   # (recognize's logging goes to stderr)
