#!/usr/bin/env bash
# Usage: recipes/librispeech/download.sh [--subset 960|100] [--mirror URL] DIR
# Downloads LibriSpeech (OpenSLR 12) into DIR/LibriSpeech: dev/test clean/other plus train-clean-100
# (--subset 100) or all 960 h (train-clean-100, train-clean-360, train-other-500; the default), with md5 checks.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "${root}/tools/log.sh"
. "${root}/recipes/common.sh"

subset=960      # 960: all training data; 100: train-clean-100 only
mirror=https://www.openslr.org/resources/12   # or https://openslr.elda.org/resources/12 (EU), https://us.openslr.org/resources/12
keep_archives=false
help_message="Usage: $0 [--subset 960|100] [--mirror URL] [--keep_archives true] DIR"
. "${root}/tools/parse_options.sh"

[[ $# -eq 1 ]] || die "expected the download directory, got $# arguments ($0 --help for usage)"
dir=$1
case ${subset} in
  960) train_parts="train-clean-100 train-clean-360 train-other-500" ;;
  100) train_parts="train-clean-100" ;;
  *) die "--subset must be 960 or 100, got '${subset}'" ;;
esac

# md5 sums published at https://www.openslr.org/resources/12/md5sum.txt
declare -A md5=(
  [dev-clean]=42e2234ba48799c1f50f24a7926300a1
  [dev-other]=c8d0bcc9cca99d4f8b62fcc847357931
  [test-clean]=32fa31d27d2e1cad72775fee3f4849a9
  [test-other]=fb5a50374b501bb3bac4815ee91d3135
  [train-clean-100]=2a93770f6d5c6c964bc36631d331a522
  [train-clean-360]=c0e676e450a7ff2f54aeade5171606fa
  [train-other-500]=d1a0fd59409feb2c614ce4d30c387708
)
mkdir -p "${dir}"
for part in dev-clean dev-other test-clean test-other ${train_parts}; do
  fetch_part "${mirror}/${part}.tar.gz" "${md5[${part}]}" "${dir}" "${part}"
done
log "LibriSpeech is in ${dir}/LibriSpeech; next: recipes/librispeech/prepare.sh ${dir} DATA_DIR"
