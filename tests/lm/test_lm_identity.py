"""Issue 66, E (the LM): an LM is its content. A file replaced at the same path is another LM, loaded anew by a
model that decoded with the old one (the cache was keyed by the path: 30 of 30 outputs were the old LM's), and a
binary overwritten in place (``cp new.bin lm.bin``) never crashes the process (KenLM mapped the file: SIGSEGV, exit
139): KenLM is given a private copy in memory of what was read and checked (``lm.binary.load_kenlm``).

The walk: recognize, the API's transcribe, decode_list and stream, and bench/decode_speed.py each get the binary
overwritten in place under their feet, just before their first LM search, and finish with the LM they loaded; the
API's next call loads the new one.
"""
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import wenet_udps
from tests.decode.decode_helpers import write_clips, write_list
from tests.lm.lm_helpers import need_build_binary, need_flashlight
from tests.lm.test_search import write_arpa
from tests.train.train_helpers import make_model_dir
from wenet_udps.lm.binary import words_path, write_binary

ROOT = Path(__file__).resolve().parents[2]
MODE = "ctc_prefix_beam_search_lm"
OPTIONS = {"lm_weight": 0.5, "word_score": 3.0}  # a word bonus: an untrained model's hypotheses are not empty
LMS = {"a": ["ONE", "TWO"], "b": ["THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE", "ZERO"]}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    need_flashlight()
    need_build_binary()
    tmp = tmp_path_factory.mktemp("lm_identity")
    conf, ckpt = make_model_dir(tmp, chunks={"use_dynamic_chunk": True})
    clips = write_clips(tmp, 3)
    files = {}
    for name, words in LMS.items():
        arpa = write_arpa(tmp / f"{name}.arpa", {w: -0.5 for w in words})
        binary = tmp / f"{name}.bin"
        write_binary(arpa, str(binary))
        files[name] = {"arpa": Path(arpa), "bin": binary, "words": Path(words_path(str(binary)))}
    model = wenet_udps.load_model(str(tmp), checkpoint="avg.pt")
    texts = {name: [model.transcribe(str(c), mode=MODE, lm=str(f["bin"]), **OPTIONS) for c in clips]
             for name, f in files.items()}
    assert texts["a"] != texts["b"] and all(t.strip() for t in texts["a"] + texts["b"]), texts
    return {"dir": tmp, "conf": conf, "ckpt": ckpt, "clips": clips, "list": write_list(clips, tmp / "test.list"),
            "lms": files, "texts": texts}


def _copy_over(src: Path, dst: Path) -> None:
    """``cp src dst``: the same file (inode), its bytes rewritten in place."""
    with open(src, "rb") as f, open(dst, "r+b") as g:
        g.truncate(0)
        shutil.copyfileobj(f, g)


@pytest.mark.parametrize("kind", ["arpa", "bin"])
def test_an_lm_replaced_at_the_same_path_is_loaded_anew(setup, tmp_path, kind):
    lm = tmp_path / f"lm.{kind}"
    for name in ("a", "b"):
        staged = tmp_path / f"staged.{kind}"
        shutil.copy(setup["lms"][name][kind], staged)
        if kind == "bin":
            shutil.copy(setup["lms"][name]["words"], words_path(str(lm)) + ".new")
            Path(words_path(str(lm)) + ".new").replace(words_path(str(lm)))
        staged.replace(lm)  # renamed over: a new file at the same path
        model = setup.setdefault(f"model_{kind}", wenet_udps.load_model(str(setup["dir"]), checkpoint="avg.pt"))
        got = [model.transcribe(str(c), mode=MODE, lm=str(lm), **OPTIONS) for c in setup["clips"]]
        assert got == setup["texts"][name], (name, got)


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_a_binary_overwritten_in_place_never_crashes(setup, tmp_path):
    """In place (same inode), with its words file: the next decode uses the new LM; the binary alone (its words
    file left as it was): one UserError naming the words file, and the process goes on."""
    lm = tmp_path / "lm.bin"
    shutil.copy(setup["lms"]["a"]["bin"], lm)
    shutil.copy(setup["lms"]["a"]["words"], words_path(str(lm)))
    proc = _run(f"""
        import json, shutil
        import wenet_udps
        from tests.lm.test_lm_identity import _copy_over, MODE, OPTIONS
        from pathlib import Path
        from wenet_udps.utils.cli import UserError
        model = wenet_udps.load_model("{setup['dir']}", checkpoint="avg.pt")
        clips = {json.dumps([str(c) for c in setup['clips']])}
        out = [[model.transcribe(c, mode=MODE, lm="{lm}", **OPTIONS) for c in clips]]
        _copy_over(Path("{setup['lms']['b']['bin']}"), Path("{lm}"))
        try:
            model.transcribe(clips[0], mode=MODE, lm="{lm}", **OPTIONS)
        except UserError as e:
            out.append(str(e))
        _copy_over(Path("{setup['lms']['b']['words']}"), Path("{lm}.words"))
        out.append([model.transcribe(c, mode=MODE, lm="{lm}", **OPTIONS) for c in clips])
        print(json.dumps(out))""")
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    before, refused, after = json.loads(proc.stdout.strip().splitlines()[-1])
    assert before == setup["texts"]["a"] and after == setup["texts"]["b"]
    assert f"{lm}.words belongs to another LM" in refused and "\n" not in refused


# Each entry point, with the LM binary overwritten in place (binary and words) just before its first LM search. A
# call that loaded the LM finishes with it; a later call of the API (transcribe, stream: one per clip) loads the
# new one: "ab" expects the first clip's text from LM a, the others' from b.
AFTER = {"recognize": "aaa", "transcribe": "abb", "decode_list": "aaa", "stream": "abb", "bench/decode_speed.py": ""}
ENTRY_POINTS = {
    "recognize": """
        from wenet_udps.bin import recognize
        recognize.main(["--config", "{conf}", "--checkpoint", "{ckpt}", "--test_data", "{list}", "--result_dir",
                        "{out}", "--modes", MODE, "--lm", "{lm}", "--lm_weight", "0.5", "--word_score", "3",
                        "--batch_size", "1"])
        texts = [line.split(" ", 1)[1] for line in open("{out}/" + MODE + "/text").read().splitlines()]""",
    "transcribe": """
        model = wenet_udps.load_model("{dir}", checkpoint="avg.pt")
        texts = [model.transcribe(c, mode=MODE, lm="{lm}", **OPTIONS) for c in CLIPS]""",
    "decode_list": """
        model = wenet_udps.load_model("{dir}", checkpoint="avg.pt")
        report = model.decode_list("{list}", modes=MODE, lm="{lm}", batch_size=1, **OPTIONS)
        texts = list(report.texts[MODE].values())""",
    "stream": """
        import soundfile as sf
        model = wenet_udps.load_model("{dir}", checkpoint="avg.pt")
        texts = []
        for c in CLIPS:
            s = model.stream(chunk_size=4, mode=MODE, lm="{lm}", **OPTIONS)
            wav, rate = sf.read(c, dtype="float32")
            s.accept_waveform(wav, rate)
            texts.append(s.finish())""",
    "bench/decode_speed.py": """
        import sys
        from bench import decode_speed
        sys.argv = ["decode_speed.py", "--exp_dirs", "{dir}", "--checkpoint", "avg.pt", "--test_data", "{list}",
                    "--modes", MODE, "--lm", "{lm}", "--lm_weight", "0.5", "--word_score", "3", "--repeats", "1",
                    "--batch_size", "1"]
        decode_speed.main()
        texts = None""",
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_every_entry_point_decodes_with_the_lm_it_loaded_when_the_file_is_overwritten(setup, tmp_path, entry):
    lm = tmp_path / "lm.bin"
    shutil.copy(setup["lms"]["a"]["bin"], lm)
    shutil.copy(setup["lms"]["a"]["words"], words_path(str(lm)))
    body = textwrap.dedent(ENTRY_POINTS[entry]).format(conf=setup["conf"], ckpt=setup["ckpt"], list=setup["list"],
                                                       dir=setup["dir"], out=tmp_path / "res", lm=lm)
    hook = textwrap.dedent(f"""
        import json
        from pathlib import Path
        import wenet_udps
        from wenet_udps.lm.search import LmSearch
        from tests.lm.test_lm_identity import _copy_over, MODE, OPTIONS
        CLIPS = {json.dumps([str(c) for c in setup['clips']])}
        first = LmSearch.__call__
        def overwrite_then_search(self, *args):
            if not getattr(LmSearch, "overwritten", False):
                LmSearch.overwritten = True
                _copy_over(Path("{setup['lms']['b']['bin']}"), Path("{lm}"))
                _copy_over(Path("{setup['lms']['b']['words']}"), Path("{lm}.words"))
            return first(self, *args)
        LmSearch.__call__ = overwrite_then_search""")
    proc = _run(hook + body + "\nprint(json.dumps(texts))")
    assert proc.returncode == 0, (entry, proc.returncode, proc.stderr[-2000:])
    texts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert texts is None or texts == [setup["texts"][lm][i] for i, lm in enumerate(AFTER[entry])], (entry, texts)


@pytest.mark.parametrize("new", ["QQQQ", "ONE"])
def test_a_words_file_edited_after_the_lm_was_loaded_is_refused_at_the_next_call(setup, tmp_path, new):
    """issue 80 case 4 through the API's cache of loaded LMs (keyed by the binary's SHA-256 only, it went on with
    the LM loaded before) and recognize: the line TWO replaced, by a new word or one already in the file, the first
    line kept. An LM is its content, its words file's included (lm.binary.lm_content)."""
    from wenet_udps.bin import recognize
    from wenet_udps.lm.arpa import LmError
    lm = tmp_path / "lm.bin"
    shutil.copy(setup["lms"]["a"]["bin"], lm)
    shutil.copy(setup["lms"]["a"]["words"], words_path(str(lm)))
    model = wenet_udps.load_model(str(setup["dir"]), checkpoint="avg.pt")
    clip = str(setup["clips"][0])
    assert model.transcribe(clip, mode=MODE, lm=str(lm), **OPTIONS) == setup["texts"]["a"][0]
    words = Path(words_path(str(lm)))
    lines = words.read_text().split("\n")
    lines[lines.index("TWO")] = new
    words.write_text("\n".join(lines))
    expected = f"{words}: its words were changed after they were written"
    with pytest.raises(LmError, match=expected):
        model.transcribe(clip, mode=MODE, lm=str(lm), **OPTIONS)
    with pytest.raises(LmError, match=expected):
        recognize.main(["--config", str(setup["conf"]), "--checkpoint", str(setup["ckpt"]), "--test_data",
                        str(setup["list"]), "--result_dir", str(tmp_path / "res"), "--modes", MODE, "--lm", str(lm)])
    assert not (tmp_path / "res" / MODE).exists()
    shutil.copy(setup["lms"]["a"]["words"], words)  # the words as written: the LM again
    assert model.transcribe(clip, mode=MODE, lm=str(lm), **OPTIONS) == setup["texts"]["a"][0]
