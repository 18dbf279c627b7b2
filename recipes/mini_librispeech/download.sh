#!/usr/bin/env bash
# Usage: recipes/mini_librispeech/download.sh [--parts "dev-clean-2 train-clean-5"] [--mirror URL] DIR
# Downloads mini LibriSpeech (OpenSLR 31: dev-clean-2, then train-clean-5) into DIR/LibriSpeech, md5-checked.
# A part already unpacked there is skipped, and nothing is written for it (DIR may be a read-only copy). A DIR that
# already holds train-clean-5 is a copy of your own: nothing is downloaded into it (this script fetches
# train-clean-5 last, so its own downloads are complete by then); without dev-clean-2 there, stage 0 makes a
# speaker-disjoint dev set from train-clean-5. --parts dev-clean-2 fetches it into such a copy.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "${root}/tools/log.sh"
. "${root}/recipes/common.sh"

parts=                  # empty: both parts, unless DIR already holds train-clean-5 (then none)
mirror=https://www.openslr.org/resources/31   # or https://openslr.elda.org/resources/31 (EU), https://us.openslr.org/resources/31
keep_archives=false
help_message="Usage: $0 [--parts \"dev-clean-2 train-clean-5\"] [--mirror URL] [--keep_archives true] DIR"
. "${root}/tools/parse_options.sh"

[[ $# -eq 1 ]] || die "expected the download directory, got $# arguments ($0 --help for usage)"
dir=$1
# md5 sums published at https://www.openslr.org/resources/31/md5sum.txt
declare -A md5=([dev-clean-2]=6d7ab67ac6a1d2c993d050e16d61080d [train-clean-5]=5df7d4e78065366204ca6845bb08f490)
if [[ -z ${parts} ]]; then
  if [[ -d ${dir}/LibriSpeech/train-clean-5 ]]; then
    have=$( [[ -d ${dir}/LibriSpeech/dev-clean-2 ]] && echo "and dev-clean-2" || echo "without dev-clean-2")
    log "${dir}/LibriSpeech holds train-clean-5 ${have}: using it as it is, nothing downloaded"
    exit 0
  fi
  parts="dev-clean-2 train-clean-5"
fi
mkdir -p "${dir}"
for part in ${parts}; do
  [[ -n ${md5[${part}]:-} ]] || die "--parts: unknown part '${part}'; valid: dev-clean-2 train-clean-5"
  fetch_part "${mirror}/${part}.tar.gz" "${md5[${part}]}" "${dir}" "${part}"
done
log "mini LibriSpeech is in ${dir}/LibriSpeech; next: recipes/mini_librispeech/prepare.sh ${dir} DATA_DIR"
