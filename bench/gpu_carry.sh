#!/usr/bin/env bash
# Makes here (PyPI reachable) what bench/gpu_report.sh needs on a bare GPU machine, in .device/ (git-ignored, and
# carried by the device call of docs/gpu_report.md): AN4 as FLAC (tools/an4_to_flac.py) and the wheels of the
# packages the GPU image lacks, for its Python 3.12 on x86-64 Linux. Then checks that what travels stays within
# the device call's 64 MiB (the tracked and untracked-not-ignored files, plus .device/).
#
#   bash bench/gpu_carry.sh AN4_DIR          # AN4_DIR: CMU's SPHERE an4/ or the folder holding it
set -euo pipefail
_root=$(cd "$(dirname "$0")/.." && pwd)
. "${_root}/tools/log.sh"

dest=.device           # the folder the device call carries (relative: in this checkout)
# The runtime packages of wenet_udps that the GPU image (docs/gpu_report.md) does not have, at tested versions.
wheels="soundfile==0.14.0 soxr==1.1.0 kaldi-native-fbank==1.23.0 cffi==2.1.1 pycparser==3.12"
declare -r help_message="Usage: bash bench/gpu_carry.sh [--dest .device] AN4_DIR"
. "${_root}/tools/parse_options.sh"
[[ $# -eq 1 ]] || die "expected AN4_DIR (the SPHERE an4/ or its folder), got $# arguments"
an4=$(realpath -m -- "$1")
cd "${_root}"   # .device/ is this checkout's: what the device call carries

if [[ -d ${dest}/an4_flac/an4 ]]; then
  log "${dest}/an4_flac/an4 exists: kept ($(find "${dest}/an4_flac/an4" -name '*.flac' | wc -l) FLAC files)"
else
  python3 tools/an4_to_flac.py "${an4}" "${dest}/an4_flac"
fi
mkdir -p "${dest}/whl"
# shellcheck disable=SC2086  # wheels is a list
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "${dest}/whl" ${wheels}
tree_bytes=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } \
  | xargs -0 -r stat -c %s -- 2> /dev/null | awk '{ s += $1 } END { print s + 0 }')
carry_bytes=$(du -sb "${dest}" | cut -f1)
total=$(( (tree_bytes + carry_bytes) / 1048576 ))
log "travels: working tree $(( tree_bytes / 1048576 )) MiB + ${dest} $(( carry_bytes / 1048576 )) MiB = ${total} MiB" \
    "(limit 64 MiB)"
[[ ${total} -lt 62 ]] || die "over the device call's 64 MiB: remove untracked files or ignore them"
