#!/usr/bin/env bash
# Usage: recipes/aishell/download.sh [--mirror URL] DIR
# Downloads AISHELL-1 (OpenSLR 33: data_aishell.tgz, 15 GB, and resource_aishell.tgz) into DIR, checks the
# md5 sums and unpacks everything, including the per-speaker archives in data_aishell/wav.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "${root}/tools/log.sh"
. "${root}/recipes/common.sh"

mirror=https://www.openslr.org/resources/33   # or https://openslr.elda.org/resources/33 (EU), https://openslr.magicdatatech.com/resources/33 (CN)
help_message="Usage: $0 [--mirror URL] DIR"
. "${root}/tools/parse_options.sh"

[[ $# -eq 1 ]] || die "expected the download directory, got $# arguments ($0 --help for usage)"
dir=$1
mkdir -p "${dir}"

declare -A md5=(
  [data_aishell.tgz]=2f494334227864a8a8fec932999db9d8
  [resource_aishell.tgz]=957d480a0fcac85fc18e550756f624e5
)
for name in data_aishell resource_aishell; do
  if [[ -f ${dir}/${name}/.complete ]]; then
    log "${dir}/${name} already unpacked"
    continue
  fi
  fetch "${mirror}/${name}.tgz" "${dir}" "${md5[${name}.tgz]}"
  log "unpacking ${name}.tgz"
  tar -xzf "${dir}/${name}.tgz" -C "${dir}"
  if [[ ${name} == data_aishell ]]; then
    # The archive holds one tar.gz per speaker; unpack them in place (wav/{train,dev,test}/SPK/*.wav).
    for t in "${dir}"/data_aishell/wav/*.tar.gz; do
      [[ -e ${t} ]] || continue
      tar -xzf "${t}" -C "${dir}/data_aishell/wav" && rm -f "${t}"
    done
  fi
  touch "${dir}/${name}/.complete"
done
log "AISHELL-1 is in ${dir}/data_aishell; next: recipes/aishell/prepare.sh ${dir} DATA_DIR"
