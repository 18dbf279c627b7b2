#!/usr/bin/env bash
# Usage: recipes/mini_librispeech/prepare.sh [--test_speakers "4680 1867"] [--dev_speakers "19 2136"] DOWNLOAD_DIR DATA_DIR
# DOWNLOAD_DIR holds LibriSpeech/train-clean-5 and, optionally, LibriSpeech/dev-clean-2 (or is the LibriSpeech
# folder itself). Writes DATA_DIR/{train,dev,test}/{wav.scp,text}, all three speaker-disjoint:
#   test  = --test_speakers of train-clean-5 (held out of training whatever else is present);
#   dev   = dev-clean-2 when it is present, else --dev_speakers of train-clean-5;
#   train = the rest of train-clean-5.
# The default speakers (1 F + 1 M each, mid-sized, so training keeps the largest speakers) were named from the
# speaker list and utterance counts alone, before any training (recipes/mini_librispeech/README.md).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "${root}/tools/log.sh"
. "${root}/recipes/common.sh"

test_speakers="4680 1867"   # F, M
dev_speakers="19 2136"      # F, M; used only without dev-clean-2
allow_partial=false         # true: use parts with fewer utterances than published (sets marked, RESULTS.md says so)
help_message="Usage: $0 [--test_speakers IDS] [--dev_speakers IDS] [--allow_partial true] DOWNLOAD_DIR DATA_DIR"
. "${root}/tools/parse_options.sh"

prepare_args LibriSpeech "$@"
require_dir "${src}/train-clean-5" "download mini LibriSpeech with recipes/mini_librispeech/download.sh DIR and pass DIR"
for s in ${dev_speakers}; do
  [[ " ${test_speakers} " != *" ${s} "* ]] || die "speaker ${s} is in both --dev_speakers and --test_speakers"
done
part() {
  python3 -m wenet_udps.corpora.librispeech --allow_partial "${allow_partial}" "${src}/$1" "${data_dir}/$2" "${@:3}"
  check_kaldi_dir "${data_dir}/$2"
}

part train-clean-5 test --speakers "${test_speakers}"
if [[ -d ${src}/dev-clean-2 ]]; then
  log "dev = dev-clean-2 (its own speakers); train = train-clean-5 without the test speakers"
  part dev-clean-2 dev
  part train-clean-5 train --exclude_speakers "${test_speakers}"
else
  log "no dev-clean-2 in ${src}: dev = speakers ${dev_speakers} of train-clean-5"
  part train-clean-5 dev --speakers "${dev_speakers}"
  part train-clean-5 train --exclude_speakers "${test_speakers} ${dev_speakers}"
fi
