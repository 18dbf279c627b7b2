#!/usr/bin/env bash
# Usage: recipes/librispeech/prepare.sh DOWNLOAD_DIR DATA_DIR
# DOWNLOAD_DIR holds LibriSpeech/<part>/<spk>/<chapter>/{<spk>-<chapter>-<utt>.flac,<spk>-<chapter>.trans.txt}
# (or is the LibriSpeech folder itself). Writes DATA_DIR/<set>/{wav.scp,text} with flac paths for
# dev_clean, dev_other, test_clean, test_other, dev (= dev_clean + dev_other), train_100 (train-clean-100)
# and train_960 (all three training parts) for the parts that are present.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "${root}/tools/log.sh"
. "${root}/recipes/common.sh"
allow_partial=false  # true: use parts with fewer utterances than published (sets marked, RESULTS.md says so)
help_message="Usage: $0 [--allow_partial true] DOWNLOAD_DIR DATA_DIR"
. "${root}/tools/parse_options.sh"

prepare_args LibriSpeech "$@"
hint="download LibriSpeech with recipes/librispeech/download.sh DIR and pass DIR"
for part in dev-clean dev-other test-clean test-other train-clean-100; do
  require_dir "${src}/${part}" "${hint}"
done
src=$(cd "${src}" && pwd)

# prepare_part PART SET: one LibriSpeech part -> DATA_DIR/SET (skipped utterances are counted and named).
prepare_part() {
  python3 -m wenet_udps.corpora.librispeech --allow_partial "${allow_partial}" "${src}/$1" "${data_dir}/$2"
  check_kaldi_dir "${data_dir}/$2"
}

# merge_sets OUT SET...: concatenate prepared sets.
merge_sets() {
  local out=${data_dir}/$1 f s
  shift
  mkdir -p "${out}"
  for f in wav.scp text; do
    for s in "$@"; do cat "${data_dir}/${s}/${f}"; done | LC_ALL=C sort -k1,1 > "${out}/${f}"
  done
  check_kaldi_dir "${out}"
}

declare -A set_of=(
  [dev-clean]=dev_clean [dev-other]=dev_other [test-clean]=test_clean [test-other]=test_other
  [train-clean-100]=train_100 [train-clean-360]=train_clean_360 [train-other-500]=train_other_500
)
for part in dev-clean dev-other test-clean test-other train-clean-100 train-clean-360 train-other-500; do
  if [[ -d ${src}/${part} ]]; then
    prepare_part "${part}" "${set_of[${part}]}"
  fi
done
merge_sets dev dev_clean dev_other
if [[ -d ${src}/train-clean-360 && -d ${src}/train-other-500 ]]; then
  merge_sets train_960 train_100 train_clean_360 train_other_500
  rm -rf "${data_dir}/train_clean_360" "${data_dir}/train_other_500"
else
  log "train_960 not made (train-clean-360 and train-other-500 are not both downloaded); run.sh trains on train_100 (--train_set train_100)"
fi
