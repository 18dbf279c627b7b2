#!/usr/bin/env bash
# Usage: recipes/aishell/download_hotwords.sh [--base_url URL] DIR
# Downloads SeACo-Paraformer's AISHELL-1 hotword subsets (Shi et al., 2023, arXiv 2308.03266;
# github.com/R1ckShi/SeACo-Paraformer, data/{dev,test}) into DIR/{dev,test}: text (the subset's utterances: 1334
# of dev, 808 of test), hotword.txt (600 and 400 hotwords) and r1-hotword.txt (371 and 226, those a general model
# recalls under 40 %), from the commit pinned below, each checked against the Git blob id that commit's tree
# records. (Its data/test/uttid is a copy of data/test/text, so the subsets are read from text.) run.sh --hotwords
# true runs it in stage -1 (into DOWNLOAD_DIR/biasing); stage 0 prepares them (wenet_udps/corpora/biasing_sets.py).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "${root}/tools/log.sh"
. "${root}/recipes/common.sh"

commit=855b0fb7cadd57f111e192dcd08682ebf391693b   # SeACo-Paraformer main (2023)
base_url=https://raw.githubusercontent.com/R1ckShi/SeACo-Paraformer/${commit}/data
help_message="Usage: $0 [--base_url URL] DIR"
. "${root}/tools/parse_options.sh"

[[ $# -eq 1 ]] || die "expected the download directory, got $# arguments ($0 --help for usage)"
dir=$1
# Git blob ids of data/* in the tree of ${commit} (git ls-tree).
declare -A blob=(
  [dev/text]=b0ca17c076ace367abd51cc7406a041f5e43e3a4
  [dev/hotword.txt]=1236e85151fe42d1df9002c1155d55a827f39f05
  [dev/r1-hotword.txt]=c3edd09e0ce397dc12c6362c2190928ac207cbcf
  [test/text]=3a3628020d6f7793508d76c11084c5b233c135d0
  [test/hotword.txt]=f3361bc4abc315a42fef314cd44e559f44f349af
  [test/r1-hotword.txt]=53de60b9c0b3b8d5a8596ab2c74791f927349822
)
for split in dev test; do
  mkdir -p "${dir}/${split}"
  for name in text hotword.txt r1-hotword.txt; do
    fetch_blob "${base_url}/${split}/${name}" "${dir}/${split}" "${blob[${split}/${name}]}"
  done
done
log "the AISHELL-1 hotword subsets are in ${dir}; next: run.sh --hotwords true --stage 0 (or python -m" \
    "wenet_udps.corpora.biasing_sets aishell ${dir} DATA_DIR)"
