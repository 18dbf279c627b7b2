#!/usr/bin/env bash
# Usage: recipes/librispeech/download_lm.sh [--lm_name NAME] [--mirror URL] DIR
# Downloads one of the word n-gram LMs published with LibriSpeech (OpenSLR 11) into DIR/NAME.arpa.gz:
# 3-gram.pruned.1e-7 (the default, the usual first-pass LM) and 3-gram.pruned.3e-7 (tens of MB each), 3-gram and
# 4-gram (about a gigabyte each, unpruned). OpenSLR 11 lists no checksum this script could be sure of, so the download is checked as what
# it must be: a non-empty, whole gzip stream (an interrupted download fails gzip's test and is resumed on the next
# run); stage 2 then reads it as ARPA, checking every section against the header. Its md5 is logged.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "${root}/tools/log.sh"
. "${root}/recipes/common.sh"
. "${root}/recipes/librispeech/settings.sh"   # lm_names, lm_name_default

lm_name=${lm_name_default}   # one of: 3-gram.pruned.1e-7 3-gram.pruned.3e-7 3-gram 4-gram
mirror=https://www.openslr.org/resources/11   # or https://openslr.elda.org/resources/11 (EU), https://us.openslr.org/resources/11
help_message="Usage: $0 [--lm_name NAME] [--mirror URL] DIR"
. "${root}/tools/parse_options.sh"

[[ $# -eq 1 ]] || die "expected the download directory, got $# arguments ($0 --help for usage)"
[[ " ${lm_names} " == *" ${lm_name} "* ]] || die "--lm_name takes one of: ${lm_names}; got '${lm_name}'"
dir=$1
file=${dir}/${lm_name}.arpa.gz
if [[ -s ${file} ]] && gzip -t "${file}" 2> /dev/null; then
  log "${file} already downloaded (a whole gzip file)"
  exit 0
fi
fetch "${mirror}/${lm_name}.arpa.gz" "${dir}"
[[ -s ${file} ]] || die "${file} is empty: the download from ${mirror} failed; delete it and rerun (or pick --mirror)"
gzip -t "${file}" 2> /dev/null \
  || die "${file} is not a whole gzip file (an interrupted or corrupt download): rerun to resume, or delete it"
log "${file}: $(stat -c %s "${file}") bytes, md5 $(md5sum < "${file}" | cut -c1-32)"
