#!/usr/bin/env bash
# Helpers of run.sh; source after tools/log.sh.
#
# Stamp files: a stage's output counts as done only when the stamp written next to it records the same inputs and
# options ("key=value" lines) as this run would use.
#
#   text=$(stamp_text corpus="${corpus}" prepare_opts="${prepare_opts}")
#   if stamp_ok FILE "${text}"; then log "done, skipping"; else ...; stamp_write FILE "${text}"; fi
#   stamp_change FILE "${text}"   # "prepare_opts: '--num_train 2' -> '--num_train 20'" (what differs)

# stamp_text KEY=VALUE...: one line per argument (newlines inside a value become spaces).
stamp_text() {
  local kv
  for kv in "$@"; do printf '%s\n' "${kv//$'\n'/ }"; done
}

# stamp_ok FILE TEXT: true when FILE holds exactly TEXT.
stamp_ok() {
  [[ -f $1 ]] && [[ "$(cat "$1")" == "${2%$'\n'}" ]]
}

# stamp_change FILE TEXT: what differs between FILE and TEXT, in one line.
stamp_change() {
  [[ -f $1 ]] || { echo "no stamp file $1 records how it was made"; return 0; }
  local line key old
  while IFS= read -r line; do
    key=${line%%=*}
    old=$(awk -v k="${key}" 'index($0, k "=") == 1 { print; exit }' "$1")
    if [[ ${old} != "${line}" ]]; then
      echo "${key}: '${old#*=}' -> '${line#*=}'"
      return 0
    fi
  done <<< "$2"
  echo "$1 records other settings"
}

# stamp_write FILE TEXT
stamp_write() {
  mkdir -p "$(dirname "$1")"
  write_atomic "$1" printf '%s\n' "${2%$'\n'}"
}

# write_atomic FILE COMMAND [ARG...]: COMMAND's output into FILE, whole or not at all (the shell's side of
# wenet_udps/utils/atomic.py): into FILE.partial, renamed over FILE once COMMAND has succeeded (a command, not a
# pipe into this function: a producer failing half way would end a pipe's input as if it were whole); when the
# write or the command fails (a full disk), the partial file is removed, an earlier FILE is left as it was, and the
# stage stops naming FILE.
write_atomic() {
  local file=$1
  shift
  if ! "$@" > "${file}.partial"; then
    rm -f "${file}.partial"
    die "${file}: not written (the reason above: a full disk, a permission, or $1 failed); any earlier ${file} is" \
      "unchanged"
  fi
  mv -f "${file}.partial" "${file}"
}

# kept_by DIR CHECKOUT [KEY=VALUE...]: DIR is to hold decodes that CHECKOUT's HEAD makes with these settings (the
# model's checkpoint SHA, the data, the beam...): a research script's kept hypotheses, where a rerun keeps the cells
# already done. Refused: a checkout with changes to tracked files or untracked files in wenet_udps/ or tools/ (the
# cells would come from no commit); a python3 that imports wenet_udps from anywhere but CHECKOUT (a PYTHONPATH or a
# working directory with another copy); a DIR whose record (DIR/KEPT: commit=, then the settings) differs, naming
# what differs (its cells came from other code or inputs, and would sit beside new ones). Else DIR/KEPT is written
# before any cell. Call it again before each cell is moved in: a checkout changed during the run stops the run.
kept_by() {
  local dir=$1 checkout=$2 head text found where
  shift 2
  head=$(git -C "${checkout}" rev-parse HEAD)
  [[ -z $(git -C "${checkout}" status --porcelain --untracked-files=no) ]] \
    || die "${checkout} has changes to tracked files: the decodes kept in ${dir} must come from a commit"
  [[ -z $(git -C "${checkout}" ls-files --others --exclude-standard -- wenet_udps tools) ]] \
    || die "${checkout} has untracked files in wenet_udps/ or tools/: the decodes kept in ${dir} must come from a" \
      "commit"
  # `python3 -m` and `-c` import from the working directory first, `python3 tools/x.py` from PYTHONPATH (or the
  # venv's install): both must find this checkout
  for where in . /; do
    found=$(cd "${where}" && python3 -c 'import os, wenet_udps
print(os.path.dirname(os.path.dirname(os.path.realpath(wenet_udps.__file__))))')
    [[ ${found} == "$(canonical_path "${checkout}")" ]] || die "python3 imports wenet_udps from ${found}, not" \
      "${checkout}: run from ${checkout} with PYTHONPATH=${checkout}"
  done
  text=$(stamp_text "commit=${head}" "$@")
  if [[ -f ${dir}/KEPT ]]; then
    stamp_ok "${dir}/KEPT" "${text}" || die "${dir} holds decodes made otherwise ($(stamp_change "${dir}/KEPT" \
      "${text}")): give another folder (--out), or remove it to decode it again"
  elif [[ -e ${dir} && -n $(ls -A "${dir}") ]]; then
    die "${dir} holds files but no KEPT record of how they were made: give another folder (--out)"
  else
    stamp_write "${dir}/KEPT" "${text}"
  fi
}

# canonical_path PATH: absolute, symlinks and .. resolved; PATH need not exist (python3: macOS has no realpath -m).
canonical_path() {
  python3 -c 'import os, sys; print(os.path.realpath(sys.argv[1]))' "$1"
}
# file_sum FILE: md5 of FILE's content, "absent" when there is no such file.
file_sum() {
  if [[ -f $1 ]]; then md5sum < "$1" | cut -c1-32; else echo absent; fi
}

# audio_sum LIST: the fingerprint of the audio files (or shard tars) LIST names, by size and mtime_ns, no audio read
# (wenet_udps/dataset/list_fingerprint.py); every decode key holds it beside the list's md5, which names paths only.
audio_sum() {
  python3 -m wenet_udps.dataset.list_fingerprint "$1"
}

# conf_sum YAML [KEY...]: md5 of the parsed YAML with its base chain resolved (comments and layout do not count, an
# edited base does), or of dataset_conf's KEYs only.
conf_sum() {
  python3 -c "import hashlib, json, sys
from wenet_udps.utils.conf_file import read_conf
c = read_conf(sys.argv[1])
if sys.argv[2:]: c = {k: (c.get('dataset_conf') or {}).get(k) for k in sys.argv[2:]}
print(hashlib.md5(json.dumps(c, sort_keys=True).encode()).hexdigest())" "$@"
}

# newest_checkpoint EXP: the complete epoch_N.pt or step_N.pt with the most optimizer steps, or nothing.
newest_checkpoint() {
  python3 -c "import sys; from wenet_udps.train.checkpoint_files import latest_checkpoint as newest
print(newest(sys.argv[1]) or '')" "$1"
}

# lock_exp EXP: run.sh's claim on an experiment dir, taken before it writes anything there, so that a run refused
# for a dir in use changes nothing (not its .train.stamp: a later rerun would take another run's model for its
# own). Holds a flock on EXP/.run.lock until run.sh and the trainings it started end; refuses while another
# run.sh holds it or a training (bin.train's flock on EXP/.lock) runs there. Once per dir: a second flock from
# this shell, on another open of the file, would conflict with its own first one.
declare -A locked_exps=()
lock_exp() {
  local exp=$1 fd held
  [[ -z ${locked_exps[${exp}]:-} ]] || return 0
  mkdir -p "${exp}"
  exec {fd}>> "${exp}/.run.lock"
  # flock(2) on the descriptor this shell keeps open: the lock stays after python exits. EXP/.lock is only probed.
  held=$(python3 -c "import fcntl, os, sys
def busy(fd):
    try: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError: return True
if busy(int(sys.argv[1])): print('another run.sh|' + sys.argv[2] + '.run.lock')
elif os.path.exists(sys.argv[2] + '.lock') and busy(os.open(sys.argv[2] + '.lock', os.O_RDONLY)):
    print('a training run|' + sys.argv[2] + '.lock')" "${fd}" "${exp}/")
  if [[ -n ${held} ]]; then
    exec {fd}>&-
    die "${exp} is in use by ${held%%|*} (pid $(head -c 16 "${held#*|}" | tr -d '\n')); wait for it or use" \
      "another --dir"
  fi
  echo "$$" > "${exp}/.run.lock"
  locked_exps[${exp}]=${fd}
}

# one_of OPTION VALUE CHOICE...: die with the choices unless VALUE is one of them.
one_of() {
  local name=$1 value=$2; shift 2
  [[ " $* " == *" ${value} "* ]] || die "--${name} takes one of: $*; got '${value}'"
}

# prune_checkpoints EXP: delete EXP's epoch_N.pt/step_N.pt once stage 5 has averaged them (run.sh
# --keep_checkpoints averaged). Their .yaml files stay: they record each checkpoint's SHA-256 and cv loss, which the
# averaging stamp and the val_best order are made from. final.pt is a hard link to the last epoch, so it keeps
# that checkpoint's bytes: training continues from it with --checkpoint EXP/final.pt.
prune_checkpoints() {
  local files
  files=$(find "$1" -maxdepth 1 \( -name 'epoch_*.pt' -o -name 'step_*.pt' \) -type f)
  [[ -n ${files} ]] || return 0
  log "$1: --keep_checkpoints averaged: deleting $(wc -l <<< "${files}") epoch/step checkpoints" \
      "($(xargs du -ch <<< "${files}" | tail -n 1 | cut -f1); final.pt and avg_*.pt stay)"
  xargs rm -f <<< "${files}"
}
