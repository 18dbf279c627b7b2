#!/usr/bin/env bash
# Shared body of recipes/tiny_{zh,en}/prepare.sh (they set TINY_LANG). Usage of those:
#   recipes/tiny_zh/prepare.sh [--seed 1 --num_train 800 --num_dev 60 --num_test 60 --jobs 2] DOWNLOAD_DIR DATA_DIR
# Synthesises a tiny corpus in TINY_LANG (wenet_udps.corpora.tiny) into DATA_DIR/{train,dev,test}
# with the wavs under DATA_DIR/wav. DOWNLOAD_DIR is unused (nothing is downloaded).
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
help_message="Usage: $0 [options] DOWNLOAD_DIR DATA_DIR"
. "${root}/tools/parse_options.sh"

[[ $# -eq 2 ]] || die "expected DOWNLOAD_DIR DATA_DIR, got $# arguments ($0 --help for usage)"
data_dir=$2
command -v espeak-ng > /dev/null || die "espeak-ng not found; install it with: bash tools/install.sh --espeak_ng true" \
  "(or sudo apt-get install espeak-ng)"

python3 -m wenet_udps.corpora.tiny --lang "${lang}" --out "${data_dir}" \
  --seed "${seed}" --num_train "${num_train}" --num_dev "${num_dev}" --num_test "${num_test}" --jobs "${jobs}"
for x in train dev test; do
  check_kaldi_dir "${data_dir}/${x}"
done
