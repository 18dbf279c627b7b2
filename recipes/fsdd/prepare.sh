#!/usr/bin/env bash
# Usage: recipes/fsdd/prepare.sh [--rate 16000 --seed 1 --num_train 2000 ...] DOWNLOAD_DIR DATA_DIR
# Builds connected-digit utterances (wenet_udps.corpora.fsdd) from DOWNLOAD_DIR/recordings (made by
# download.sh; DOWNLOAD_DIR may also be the recordings folder itself) into DATA_DIR/{train,dev,test}.
# Test utterances use only recordings with index in --test_indices, train/dev the others. --unseen_speaker is
# held out of train/dev/test and makes DATA_DIR/test_unseen on its own ('none': every speaker trains).
# --dev_speaker makes dev of one more held-out speaker, so settings are chosen on a voice never heard in training.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "${root}/tools/log.sh"
. "${root}/recipes/common.sh"

rate=16000          # output sample rate (FSDD is 8 kHz; 16 kHz suits the usual 80-bin fbank)
seed=1
num_train=2000
num_dev=200
num_test=300
unseen_speaker=yweweler  # one of george jackson nicolas theo yweweler, or none
num_test_unseen=300
dev_speaker=none    # a training speaker held out as dev alone (a speaker-disjoint dev set), or none
test_indices=0-4
train_indices=5-49
noise=1             # add white/pink noise at 20-40 dB SNR
allow_partial=false # true: use a copy in which a speaker lacks some of their 500 recordings (sets marked)
help_message="Usage: $0 [options] DOWNLOAD_DIR DATA_DIR"
. "${root}/tools/parse_options.sh"

prepare_args recordings "$@"
require_dir "${src}" "run recipes/fsdd/download.sh DIR (or --fsdd_dir RECORDINGS DIR) and pass DIR"

python3 -m wenet_udps.corpora.fsdd --fsdd_dir "${src}" \
  --out "${data_dir}" --rate "${rate}" --seed "${seed}" --num_train "${num_train}" --num_dev "${num_dev}" \
  --num_test "${num_test}" --test_indices "${test_indices}" --train_indices "${train_indices}" --noise "${noise}" \
  --unseen_speaker "${unseen_speaker}" --num_test_unseen "${num_test_unseen}" --dev_speaker "${dev_speaker}" \
  --allow_partial "${allow_partial}"
sets="train dev test"; [[ ${unseen_speaker} != none ]] && sets+=" test_unseen"
for x in ${sets}; do
  check_kaldi_dir "${data_dir}/${x}"
done
