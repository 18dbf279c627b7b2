#!/usr/bin/env bash
# Usage: recipes/librispeech/download_hotwords.sh [--base_url URL] DIR
# Downloads Le et al.'s LibriSpeech biasing lists (2021, "Contextualized streaming end-to-end speech recognition
# with trie-based deep biasing and shallow fusion"; github.com/facebookresearch/fbai-speech, is21_deep_bias/ref)
# into DIR: test-{clean,other}.biasing_{100,500,1000,2000}.tsv, from the commit pinned below, each checked against
# the Git blob id that commit's tree records. run.sh --hotwords true runs it in stage -1 (into DOWNLOAD_DIR/biasing);
# stage 0 prepares them (wenet_udps/corpora/biasing_sets.py).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "${root}/tools/log.sh"
. "${root}/recipes/common.sh"

commit=43cdb3ca9644a755d5c6cc55cbcc91132f85ed44   # fbai-speech main, the repository's last commit (2021)
base_url=https://raw.githubusercontent.com/facebookresearch/fbai-speech/${commit}/is21_deep_bias/ref
help_message="Usage: $0 [--base_url URL] DIR"
. "${root}/tools/parse_options.sh"

[[ $# -eq 1 ]] || die "expected the download directory, got $# arguments ($0 --help for usage)"
dir=$1
mkdir -p "${dir}"
# Git blob ids of is21_deep_bias/ref/* in the tree of ${commit} (git ls-tree).
declare -A blob=(
  [test-clean.biasing_100.tsv]=3b65fb715bd42f3bf6c927aabe5a3ad1861031b5
  [test-clean.biasing_500.tsv]=6bf229624348a3d23f216a2432c558c09f3db3bc
  [test-clean.biasing_1000.tsv]=40710c116074258fa8b20d36cd5b7f56f3d8dc3b
  [test-clean.biasing_2000.tsv]=71e9b77a88efec405b99418a983ba904618f537b
  [test-other.biasing_100.tsv]=c177a65a1769fd680fa2749c09944b8c3ae439dd
  [test-other.biasing_500.tsv]=ccdb30768d420b63fcc579e9eee18e6b7910992f
  [test-other.biasing_1000.tsv]=721f6cd991d07de214b55d717bd180dfc592245b
  [test-other.biasing_2000.tsv]=1faf2f785d2b9f7a25ece7735fc5ab1c57b277e9
)
for part in test-clean test-other; do
  for n in 100 500 1000 2000; do
    name=${part}.biasing_${n}.tsv
    fetch_blob "${base_url}/${name}" "${dir}" "${blob[${name}]}"
  done
done
log "Le et al.'s biasing lists are in ${dir}; next: run.sh --hotwords true --stage 0 (or python -m" \
    "wenet_udps.corpora.biasing_sets librispeech ${dir} DATA_DIR)"
