#!/usr/bin/env bash
# Usage: recipes/an4/download.sh [--mirror URL] [--sha256 SUM] DIR
# Downloads CMU AN4 (an4_sphere.tar.gz, NIST SPHERE, 64 MB) into DIR and unpacks it to DIR/an4, sha256-checked, then
# checks it holds the whole corpus (948 training and 130 test utterances with audio and transcript:
# python -m wenet_udps.corpora.an4 --check). A DIR that already holds an4/ (with etc/ and wav/) is a copy of your own:
# nothing is written into it, and stage 0 (prepare.sh) holds it to the same count check, refusing a partial copy
# unless --allow_partial true (run.sh --prepare_opts "--allow_partial true").
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "${root}/tools/log.sh"
. "${root}/recipes/common.sh"

mirror=http://www.speech.cs.cmu.edu/databases/an4   # CMU's AN4 page; a copy of the same archive: https://dldata-public.s3.us-east-2.amazonaws.com
sha256=a0525579493735d32b60fb6fa5975dd0eaacde087b0a4eeb7f13b7ef33077b12   # the archive's, as NVIDIA NeMo's AN4
                        # scripts check the same file; a mirror's re-packed copy needs its own (the counts are checked too)
keep_archives=false
help_message="Usage: $0 [--mirror URL] [--sha256 SUM] [--keep_archives true] DIR"
. "${root}/tools/parse_options.sh"

[[ $# -eq 1 ]] || die "expected the download directory, got $# arguments ($0 --help for usage)"
dir=$1

if [[ -d ${dir}/an4 ]]; then
  [[ -d ${dir}/an4/etc && -d ${dir}/an4/wav ]] || die "${dir}/an4 exists but has no etc/ and wav/: it is not an" \
    "unpacked an4_sphere.tar.gz; move it away and rerun"
  log "${dir}/an4 exists: nothing downloaded; stage 0 checks that it is the whole corpus"
  exit 0
fi
fetch "${mirror}/an4_sphere.tar.gz" "${dir}" "${sha256}"
log "unpacking an4_sphere.tar.gz"
rm -rf "${dir}/.unpack_an4"
mkdir -p "${dir}/.unpack_an4"
tar -xzf "${dir}/an4_sphere.tar.gz" -C "${dir}/.unpack_an4"
python3 -m wenet_udps.corpora.an4 --check "${dir}/.unpack_an4/an4" \
  || die "an4_sphere.tar.gz is not the whole corpus: delete ${dir}/an4_sphere.tar.gz and rerun"
mv "${dir}/.unpack_an4/an4" "${dir}/an4"   # only a whole, checked corpus appears as DIR/an4
rm -rf "${dir}/.unpack_an4"
[[ ${keep_archives} == true ]] || rm -f "${dir}/an4_sphere.tar.gz"
log "AN4 is in ${dir}/an4; next: recipes/an4/prepare.sh ${dir} DATA_DIR"
