#!/usr/bin/env bash
# Usage: recipes/fsdd/download.sh [--fsdd_dir RECORDINGS_DIR] DIR
# Fetches the Free Spoken Digit Dataset release v1.0.10 from GitHub and links its recordings folder as
# DIR/recordings. With --fsdd_dir (an existing FSDD "recordings" folder) nothing is downloaded: DIR/recordings
# then points there.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "${root}/tools/log.sh"
. "${root}/recipes/common.sh"

fsdd_dir=""     # existing FSDD recordings folder; empty: download
version=1.0.10
help_message="Usage: $0 [--fsdd_dir RECORDINGS_DIR] DIR"
. "${root}/tools/parse_options.sh"

[[ $# -eq 1 ]] || die "expected the download directory, got $# arguments ($0 --help for usage)"
dir=$1
mkdir -p "${dir}"
if [[ -z ${fsdd_dir} ]]; then
  fsdd_dir=${dir}/free-spoken-digit-dataset-${version}/recordings
  if [[ ! -d ${fsdd_dir} ]]; then
    # GitHub publishes no checksum for tag archives; prepare.sh checks the recordings it finds instead.
    url=https://github.com/Jakobovski/free-spoken-digit-dataset/archive/refs/tags/v${version}.tar.gz
    fetch "${url}" "${dir}"
    tar -xzf "${dir}/v${version}.tar.gz" -C "${dir}"
  fi
fi
require_dir "${fsdd_dir}" "pass the 'recordings' folder of FSDD with --fsdd_dir, or omit --fsdd_dir to download it"
n=$(find "${fsdd_dir}/" -maxdepth 1 -name '[0-9]_*_*.wav' | wc -l)
[[ ${n} -gt 0 ]] || die "${fsdd_dir} holds no {digit}_{speaker}_{index}.wav files"
ln -sfn "$(cd "${fsdd_dir}" && pwd)" "${dir}/recordings"
log "${dir}/recordings -> ${fsdd_dir} (${n} recordings); next: recipes/fsdd/prepare.sh ${dir} DATA_DIR"
