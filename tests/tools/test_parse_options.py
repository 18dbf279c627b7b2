"""tools/parse_options.sh and tools/log.sh, exercised through small bash scripts."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """#!/usr/bin/env bash
set -euo pipefail
. {root}/tools/log.sh
stage=0            # first stage to run
stop_stage=5
train_config=conf/a.yaml
use_amp=false
saved=("$@")
. {root}/tools/parse_options.sh
echo "stage=$stage stop_stage=$stop_stage train_config=$train_config use_amp=$use_amp args=$*"
"""


def run_script(tmp_path, *args):
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT.format(root=ROOT), encoding="utf-8")
    return subprocess.run(["bash", str(script), *args], capture_output=True, text=True)


def test_options_set_existing_variables(tmp_path):
    proc = run_script(tmp_path, "--stage", "3", "--stop-stage=4", "--train_config", "my conf.yaml",
                      "--use_amp", "true", "pos1", "pos2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("stage=3 stop_stage=4 train_config=my conf.yaml use_amp=true "
                                   "args=pos1 pos2")


def test_defaults_kept_without_options(tmp_path):
    proc = run_script(tmp_path)
    assert proc.stdout.strip() == "stage=0 stop_stage=5 train_config=conf/a.yaml use_amp=false args="


def test_double_dash_ends_options(tmp_path):
    proc = run_script(tmp_path, "--stage", "1", "--", "--stage", "2")
    assert proc.stdout.strip().startswith("stage=1 ")
    assert proc.stdout.strip().endswith("args=--stage 2")


def test_unknown_option_is_one_error_line(tmp_path):
    proc = run_script(tmp_path, "--stgae", "3")
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        'run.sh: unknown option --stgae (run "run.sh --help" for the options)']


def test_missing_value_and_bad_boolean_fail(tmp_path):
    proc = run_script(tmp_path, "--stage")
    assert proc.returncode == 1 and "option --stage needs a value" in proc.stderr
    proc = run_script(tmp_path, "--use_amp", "yes")
    assert proc.returncode == 1 and "takes true or false" in proc.stderr


def test_help_lists_options_with_defaults(tmp_path):
    proc = run_script(tmp_path, "--help")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("Usage: run.sh")
    assert any(re.match(r"^\s+--stage\s+0\s+# first stage to run$", line) for line in lines)
    assert any(re.match(r"^\s+--use_amp\s+false$", line) for line in lines)
    assert "args=" not in proc.stdout
    assert "--saved" not in proc.stdout  # an array assignment is not an option


def test_log_and_die_format(tmp_path):
    script = tmp_path / "prep.sh"
    script.write_text(f"""set -euo pipefail
. {ROOT}/tools/log.sh
step() {{ log "inside step"; }}
log "hello"
step
die "fatal problem"
echo unreachable
""", encoding="utf-8")
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stdout == ""
    stamp = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"
    lines = proc.stderr.splitlines()
    assert re.fullmatch(stamp + r" \(prep\.sh:4:main\) hello", lines[0])
    assert re.fullmatch(stamp + r" \(prep\.sh:3:step\) inside step", lines[1])
    assert re.fullmatch(stamp + r" \(prep\.sh:6:main\) fatal problem", lines[2])


def test_help_shows_continued_comments_whole_and_hides_internal_variables(tmp_path):
    """Issue 48: run.sh --help cut a comment to its first line and listed its internal --caller_dir."""
    script = tmp_path / "run.sh"
    script.write_text(f"""#!/usr/bin/env bash
set -euo pipefail
_here=$PWD          # the script's own
att=both            # true | false | both: one model per value,
                    # each in its own dir
stage=0
. {ROOT}/tools/parse_options.sh
echo "att=$att"
""", encoding="utf-8")
    help_text = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True).stdout
    lines = help_text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.lstrip().startswith("--att"))
    assert lines[first].endswith("# true | false | both: one model per value,")
    assert lines[first + 1].strip() == "# each in its own dir"
    assert lines[first + 1].index("#") == lines[first].index("#")  # under the comment it continues
    assert lines[first + 2].lstrip().startswith("--stage") and "_here" not in help_text
    proc = subprocess.run(["bash", str(script), "--_here", "/tmp"], capture_output=True, text=True)
    assert proc.returncode == 1 and "unknown option --_here" in proc.stderr
