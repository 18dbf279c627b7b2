#!/usr/bin/env bash
# Usage: recipes/aishell/prepare.sh DOWNLOAD_DIR DATA_DIR
# DOWNLOAD_DIR holds data_aishell/ (from download.sh, or the folder data_aishell itself). Writes
# DATA_DIR/{train,dev,test}/{wav.scp,text}: every wav with a transcript, transcript spaces removed (the
# transcript file is word-segmented; WeNet scores characters). Wavs without a transcript are skipped.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "${root}/tools/log.sh"
. "${root}/recipes/common.sh"
allow_partial=false  # true: use sets with fewer utterances than published (sets marked, RESULTS.md says so)
help_message="Usage: $0 [--allow_partial true] DOWNLOAD_DIR DATA_DIR"
. "${root}/tools/parse_options.sh"

prepare_args data_aishell "$@"
hint="download AISHELL-1 with recipes/aishell/download.sh DIR and pass DIR"
require_dir "${src}/wav" "${hint}"
transcript=${src}/transcript/aishell_transcript_v0.8.txt
require_file "${transcript}" "${hint}"
src=$(cd "${src}" && pwd)

for x in train dev test; do
  require_dir "${src}/wav/${x}" "${hint} (the per-speaker archives in data_aishell/wav must be unpacked)"
  mkdir -p "${data_dir}/${x}"
  find "${src}/wav/${x}" -name '*.wav' | sort > "${data_dir}/${x}/wav.flist"
  [[ -s ${data_dir}/${x}/wav.flist ]] || die "no wav files under ${src}/wav/${x}"
  # Join on the utterance id (file name without .wav); drop wavs without transcript and vice versa.
  LC_ALL=C awk -v scp="${data_dir}/${x}/wav.scp" -v txt="${data_dir}/${x}/text" '
    FNR == NR {
      key = $1; $1 = ""; gsub(/[ \t\r]/, "", $0)
      if ($0 != "") text[key] = $0
      next
    }
    {
      n = split($0, parts, "/"); key = parts[n]; sub(/\.wav$/, "", key)
      if (key in text) { print key, $0 > scp; print key, text[key] > txt; kept++ } else { skipped++ }
    }
    END { if (skipped) printf("%d wavs have no transcript and were skipped\n", skipped) > "/dev/stderr" }
  ' "${transcript}" "${data_dir}/${x}/wav.flist"
  rm -f "${data_dir}/${x}/wav.flist"
  for f in wav.scp text; do
    LC_ALL=C sort -k1,1 -o "${data_dir}/${x}/${f}" "${data_dir}/${x}/${f}"
  done
  check_kaldi_dir "${data_dir}/${x}" --part "aishell:${x}" --allow_partial "${allow_partial}"
done
