#!/usr/bin/env bash
# Usage: recipes/an4/prepare.sh [--num_dev 100] DOWNLOAD_DIR DATA_DIR
# DOWNLOAD_DIR holds an4/ (or is that folder). Writes DATA_DIR/{train,dev,test}/{wav.scp,text,utt2spk} as ESPnet's
# egs2/an4 recipe splits AN4, so results compare with its published ones (wenet_udps/corpora/an4.py):
#   test  = an4_test.transcription (130 utterances, 10 speakers never in training);
#   dev   = the first 100 training utterances by key (<speaker>-<prompt>-<session>): 8 speakers;
#   train = the other 848 (66 speakers).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "${root}/tools/log.sh"
. "${root}/recipes/common.sh"

num_dev=100   # ESPnet's ndev_utt
allow_partial=false  # true: use a copy without all 948 + 130 utterances (its sets marked, RESULTS.md says so)
help_message="Usage: $0 [--num_dev N] [--allow_partial true] DOWNLOAD_DIR DATA_DIR"
. "${root}/tools/parse_options.sh"

prepare_args an4 "$@"
require_dir "${src}/etc" "download AN4 with recipes/an4/download.sh DIR and pass DIR (it holds an4/etc and an4/wav)"
python3 -m wenet_udps.corpora.an4 --num_dev "${num_dev}" --allow_partial "${allow_partial}" "${src}" "${data_dir}"
for set in train dev test; do check_kaldi_dir "${data_dir}/${set}"; done
