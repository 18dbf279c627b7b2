#!/usr/bin/env bash
# Shared body of recipes/tiny_{zh,en}/prepare.sh (they set TINY_LANG). Usage of those:
#   recipes/tiny_zh/prepare.sh [--seed 1 --num_train 800 --num_dev 60 --num_test 60 --jobs 2 --biasing false] \
#     DOWNLOAD_DIR DATA_DIR
# Synthesises a tiny corpus in TINY_LANG (wenet_udps.corpora.tiny) into DATA_DIR/{train,dev,test}
# with the wavs under DATA_DIR/wav; --biasing true adds DATA_DIR/{dev,test}_biasing with their hotword lists
# (wenet_udps/corpora/tiny_biasing.py; Mandarin also adds training utterances of the homophones, docs/hotwords.md).
# DOWNLOAD_DIR is unused (nothing is downloaded).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lang=${TINY_LANG:?set by recipes/tiny_*/prepare.sh}
. "${root}/tools/log.sh"
. "${root}/recipes/common.sh"

seed=1          # corpus seed: same seed, same corpus
num_train=800
num_dev=60
num_test=60
jobs=2          # parallel espeak-ng processes
biasing=false   # true: also the biasing sets dev_biasing, test_biasing and their hotword lists
help_message="Usage: $0 [options] DOWNLOAD_DIR DATA_DIR"
. "${root}/tools/parse_options.sh"

[[ $# -eq 2 ]] || die "expected DOWNLOAD_DIR DATA_DIR, got $# arguments ($0 --help for usage)"
data_dir=$2
command -v espeak-ng > /dev/null || die "espeak-ng not found; install it with: bash tools/install.sh --espeak_ng true" \
  "(or sudo apt-get install espeak-ng)"

python3 -m wenet_udps.corpora.tiny --lang "${lang}" --out "${data_dir}" \
  --seed "${seed}" --num_train "${num_train}" --num_dev "${num_dev}" --num_test "${num_test}" --jobs "${jobs}" --biasing "${biasing}"
sets="train dev test"; [[ ${biasing} == false ]] || sets+=" dev_biasing test_biasing"
for x in ${sets}; do
  check_kaldi_dir "${data_dir}/${x}"
done
