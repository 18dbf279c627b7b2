"""Every ``wenet_udps.bin`` entry point and ``tools/*.py`` script refuses bad arguments in one line, before any work.

The entry points and their options are discovered, not listed: each program's parser is captured by running its
``main`` up to ``parse_args``, and its options are found by the checker (``wenet_udps.utils.cli``) their ``type=``
is. A new program or option is swept the day it is added:

- every program parses with ``cli.ArgumentParser`` (one-line usage errors) and takes no unchecked number or path;
- in-process, every checked option refuses a bad value (a missing input, a number out of range, an output that
  cannot be created) naming the option;
- as a subprocess, one bad value per program (the classes in turn): exit 2, exactly one line on stderr naming the
  option, no Python traceback, nothing created.
"""
import argparse
import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from tests.tools.load import TOOLS, load_tool
from wenet_udps.utils import cli

ROOT = Path(__file__).resolve().parents[2]
BIN = sorted(p.stem for p in (ROOT / "wenet_udps" / "bin").glob("*.py") if p.stem != "__init__")
SCRIPTS = sorted(p.stem for p in TOOLS.glob("*.py"))
PROGRAMS = [f"bin/{name}" for name in BIN] + [f"tools/{name}" for name in SCRIPTS]
# Words of option names (split at "_") that hold a path: such an option must have an input or output checker.
PATH_WORDS = {"dir", "dirs", "data", "path", "file", "config", "checkpoint", "scp", "list", "json", "model", "units",
              "text", "cmvn", "out", "ref", "hyp", "prefix", "syms", "segments", "table", "words"}
# Options named like paths that are not paths (why in each comment).
NOT_PATHS = {
    "bin/plot_attention --checkpoint",      # a file name inside each --exp_dirs (checked after parsing)
    "tools/make_shard_list --prefix",       # tar file name prefix inside shards_dir
}


class _Parsed(Exception):
    def __init__(self, parser: argparse.ArgumentParser):
        super().__init__()
        self.parser = parser


def _main(program: str):
    kind, name = program.split("/")
    return (importlib.import_module(f"wenet_udps.bin.{name}") if kind == "bin" else load_tool(name)).main


_PARSERS: Dict[str, argparse.ArgumentParser] = {}


def parser_of(program: str) -> argparse.ArgumentParser:
    """The parser ``program``'s main builds, caught at its ``parse_args`` (nothing else of main runs)."""
    if program not in _PARSERS:
        def catch(self, *args, **kwargs):
            raise _Parsed(self)
        real = argparse.ArgumentParser.parse_args
        argparse.ArgumentParser.parse_args = catch
        try:
            _main(program)([])
        except _Parsed as parsed:
            _PARSERS[program] = parsed.parser
        finally:
            argparse.ArgumentParser.parse_args = real
    return _PARSERS[program]


def _actions(program: str) -> List[argparse.Action]:
    return [a for a in parser_of(program)._actions if not isinstance(a, argparse._HelpAction)]


def _role(action: argparse.Action) -> str:
    return getattr(action.type, "role", "")


def _name(action: argparse.Action) -> str:
    """How argparse names the option in its errors: ``--opt`` (the first spelling) or the positional's dest."""
    return "/".join(action.option_strings) if action.option_strings else action.dest


def _bad_value(action: argparse.Action, tmp: Path) -> Tuple[str, str]:
    """(a value ``action`` must refuse, the words its message must contain)."""
    role = _role(action)
    if role == "input":
        return str(tmp / "missing"), "no such"
    if role == "output":
        blocker = tmp / "a_file"
        blocker.write_text("")
        return str(blocker / "sub" / "out"), "cannot be created"
    if role == "number":
        low, high, also = action.type.low, action.type.high, getattr(action.type, "also", ())
        if low is None and high is None:
            return "inf", "finite"
        value = low - 1 if low is not None else high + 1
        while value in also:  # e.g. -1 meaning "all" below a range starting at 0
            value -= 1
        return str(value), "must be"
    if role == "device":
        import torch
        return ("tpu" if torch.cuda.is_available() else "cuda"), "cuda"
    raise AssertionError(role)


def _good_value(action: argparse.Action, tmp: Path) -> str:
    """A value ``action`` accepts (for the required options around the one under test)."""
    role = _role(action)
    if action.choices:
        return str(list(action.choices)[0])
    if role == "input":
        path = tmp / f"in_{action.dest}"
        path.mkdir(exist_ok=True) if action.type is cli.existing_dir else path.write_text("x\n")
        return str(path)
    if role == "output":
        return str(tmp / f"out_{action.dest}")
    if role == "number":
        return str(next((b for b in (action.type.low, action.type.high) if b is not None), 0))
    return "x"


def _argv(program: str, bad: argparse.Action, value: str, tmp: Path) -> List[str]:
    """``bad`` given ``value``; every other required option and positional a good value, in parser order."""
    argv: List[str] = []
    for action in _actions(program):
        if action is not bad and not (action.required or not action.option_strings):
            continue
        given = value if action is bad else _good_value(action, tmp)
        argv += ([action.option_strings[0]] if action.option_strings else []) + [given]
    return argv


def _checked(program: str, role: str = "") -> List[argparse.Action]:
    return [a for a in _actions(program) if _role(a) and (not role or _role(a) == role)]


@pytest.mark.parametrize("program", PROGRAMS)
def test_every_program_uses_the_shared_checks(program):
    parser = parser_of(program)
    assert isinstance(parser, cli.ArgumentParser), f"{program}: build its parser with wenet_udps.utils.cli"
    for action in _actions(program):
        where = f"{program} {action.option_strings[0] if action.option_strings else action.dest}"
        assert action.type not in (int, float) or action.choices, \
            f"{where}: an unchecked number; use cli.int_range / float_range"
        pathlike = bool(PATH_WORDS & set(action.dest.split("_"))) and action.nargs != 0 and not action.choices
        if pathlike and where not in NOT_PATHS:
            assert _role(action) in ("input", "output"), f"{where}: a path without cli.existing_* / output_*"


@pytest.mark.parametrize("program", PROGRAMS)
def test_every_checked_option_refuses_a_bad_value(program, tmp_path, capsys):
    checked = _checked(program)
    assert checked, f"{program} checks none of its options"
    for action in checked:
        value, words = _bad_value(action, tmp_path)
        with pytest.raises(SystemExit) as exit_info:
            parser_of(program).parse_args(_argv(program, action, value, tmp_path))
        lines = capsys.readouterr().err.strip().splitlines()
        assert exit_info.value.code == 2 and len(lines) == 1, (action.dest, lines)
        assert f"argument {_name(action)}: " in lines[0] and words in lines[0], lines[0]


CLASSES = {"missing input": "input", "number out of range": "number", "output that cannot be created": "output"}


def _subprocess_cases() -> List[Tuple[str, str]]:
    """One case per program (a Python start with torch costs ~1.5 s): its bad value's class taken in turn, so every
    class runs end to end in several programs. The in-process test above covers every option of every class; what
    only a real process shows (exit status, the lone stderr line, no traceback) is the same for all classes."""
    cases = []
    for i, program in enumerate(PROGRAMS):
        kinds = [what for what, role in CLASSES.items() if _checked(program, role)]
        cases.append((program, kinds[i % len(kinds)]))
    return cases


CASES = _subprocess_cases()


@pytest.mark.parametrize("program, what", CASES, ids=[f"{p}-{w.split()[0]}" for p, w in CASES])
def test_bad_argument_is_one_line_without_traceback(program, what, tmp_path):
    action = _checked(program, CLASSES[what])[0]
    value, words = _bad_value(action, tmp_path)
    argv = _argv(program, action, value, tmp_path)
    kind, name = program.split("/")
    command = [sys.executable, "-m", f"wenet_udps.bin.{name}"] if kind == "bin" else [sys.executable,
                                                                                      str(TOOLS / f"{name}.py")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    before = sorted(tmp_path.rglob("*"))
    proc = subprocess.run(command + argv, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 2 and len(lines) == 1, (proc.returncode, proc.stderr[-3000:])
    assert f"argument {_name(action)}: " in lines[0] and words in lines[0], lines[0]
    assert sorted(tmp_path.rglob("*")) == before, "created files although the arguments were refused"


CONF = str(ROOT / "conf" / "aishell" / "train_conformer.yaml")  # decoder: transformer (no right-to-left part)


# (program, options added to the required ones, words of the one line): the cases issue 36 found as tracebacks
# (or, for average_model's epochs, as a run that averaged nothing), each now refused before any work.
ISSUE_CASES = [
    ("bin/recognize", ["--beam_size", "0"], "--beam_size: must be in 1..1000, got 0"),
    ("bin/recognize", ["--beam_size", "-3"], "--beam_size: must be in 1..1000, got -3"),
    ("bin/recognize", ["--decoding_chunk_size", "0"], "--decoding_chunk_size: must be in 1..10000 or -1, got 0"),
    ("bin/recognize", ["--blank_penalty", "-1"], "--blank_penalty: must be >= 0, got -1"),
    ("bin/recognize", ["--num_workers", "-1"], "--num_workers: must be in 0.."),
    ("bin/recognize", ["--simulate_streaming"], "--simulate_streaming decodes one utterance at a time: use "
                                                "--batch_size 1, not 16"),
    ("bin/recognize", ["--config", CONF, "--modes", "attention_rescoring", "--reverse_weight", "0.5"],
     "--reverse_weight 0.5 needs a bitransformer decoder; " + CONF + " has 'transformer'"),
    # issue 80 round 7, F7: a seed numpy cannot take was a traceback in np.random.seed, after the model was built
    ("bin/train", ["--seed", "4294967296"], "--seed: must be in 0..2147483647, got 4294967296 (numpy's seeds are"),
    ("bin/average_model", ["--num", "0"], "--num: must be >= 1, got 0"),
    ("bin/average_model", ["--min_epoch", "5", "--max_epoch", "3"], "--min_epoch 5 is above --max_epoch 3"),
    ("bin/export", ["--format", "sherpa-onnx", "--left_chunks", "0"], "--left_chunks must be > 0"),
]


@pytest.mark.parametrize("program, extra, words", ISSUE_CASES,
                         ids=[f"{p}{' '.join(e[-2:])}" for p, e, _ in ISSUE_CASES])
def test_issue_cases_are_one_line_before_any_work(program, extra, words, tmp_path, capsys):
    argv = _argv(program, None, "", tmp_path) + extra  # argparse keeps the last --config given
    with pytest.raises(SystemExit) as exit_info:
        _main(program)(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(lines) == 1 and words in lines[0], lines


def test_missing_inputs_and_unusable_outputs_of_train_are_refused_before_work(tmp_path, capsys):
    """--tensorboard_dir that is a file and a --model_dir that cannot be created ended in tracebacks after the
    model was built (issue 36); --device cuda without CUDA in one from deep inside torch."""
    import torch
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    cases = [(["--tensorboard_dir", str(a_file)], "--tensorboard_dir: " + f"{a_file} is a file, not a directory"),
             (["--model_dir", str(a_file / "exp")], f"--model_dir: {a_file / 'exp'} cannot be created")]
    if not torch.cuda.is_available():
        cases.append((["--device", "cuda"], "--device: cuda, but torch"))
    for extra, words in cases:
        argv = _argv("bin/train", None, "", tmp_path) + extra
        with pytest.raises(SystemExit) as exit_info:
            _main("bin/train")(argv)
        lines = capsys.readouterr().err.strip().splitlines()
        assert exit_info.value.code == 2 and len(lines) == 1 and words in lines[0], lines
    assert not (tmp_path / "out_model_dir").exists()


def _file_pairs(program: str) -> List[Tuple[argparse.Action, argparse.Action]]:
    """(output, input) option pairs of ``program`` that could name the same file (an output directory may be an
    input directory: files are written into it)."""
    return [(out, inp) for out in _checked(program, "output") for inp in _checked(program, "input")
            if cli.output_dir not in (out.type,) and inp.type is not cli.existing_dir]


def test_an_output_that_is_one_of_the_inputs_is_refused_by_every_program(tmp_path, capsys):
    """Issue 47 case 21: `make_raw_list.py wav.scp text text` and compute_cmvn_stats overwrote their input, exit 0.
    The validation layer now compares every output with every input, after links (here: a symbolic link to the
    input), in every program; the input is left as it was."""
    swept = []
    for program in PROGRAMS:
        for out, inp in _file_pairs(program):
            tmp = tmp_path / f"{program.replace('/', '_')}_{out.dest}_{inp.dest}"
            tmp.mkdir()
            source = Path(_good_value(inp, tmp))
            link = tmp / "link_to_input"
            link.symlink_to(source)
            argv: List[str] = []
            for action in _actions(program):
                if action in (out, inp):
                    value = str(link if action is out else source)
                elif action.required or not action.option_strings or _role(action) in ("input", "output"):
                    value = _good_value(action, tmp)
                else:
                    continue
                argv += ([action.option_strings[0]] if action.option_strings else []) + [value]
            with pytest.raises(SystemExit) as exit_info:
                parser_of(program).parse_args(argv)
            lines = capsys.readouterr().err.strip().splitlines()
            assert exit_info.value.code == 2 and len(lines) == 1, (program, out.dest, inp.dest, lines)
            assert f"argument {_name(out)}: {link} is also the input {_name(inp)}" in lines[0], lines[0]
            assert source.read_text() == "x\n"
            swept.append(program)
    assert {"tools/make_raw_list", "tools/compute_cmvn_stats", "tools/make_shard_list"} <= set(swept), swept
