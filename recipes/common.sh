#!/usr/bin/env bash
# Helpers sourced by recipes/<corpus>/{download,prepare}.sh (after tools/log.sh).

# fetch URL DIR [SUM]: download URL into DIR (resuming a partial file), then check its checksum if one is given:
# an md5 (32 hex digits) or a sha256 (64). A complete file with the right checksum is not downloaded again.
fetch() {
  local url=$1 dir=$2 md5=${3:-}
  local file="${dir}/${url##*/}" sum=md5sum
  [[ ${#md5} -ne 64 ]] || sum=sha256sum
  mkdir -p "${dir}"
  if [[ -f ${file} && -n ${md5} ]] && [[ $(${sum} "${file}" | cut -d' ' -f1) == "${md5}" ]]; then
    log "${file} already downloaded (${sum%sum} ok)"
    return 0
  fi
  log "downloading ${url} -> ${file}"
  if command -v wget > /dev/null; then
    wget --continue --no-verbose --output-document="${file}" "${url}" || die "download of ${url} failed"
  elif command -v curl > /dev/null; then
    curl --fail --location --continue-at - --output "${file}" "${url}" || die "download of ${url} failed"
  else
    die "neither wget nor curl found; install one (apt-get install wget)"
  fi
  if [[ -n ${md5} ]]; then
    local got
    got=$(${sum} "${file}" | cut -d' ' -f1)
    [[ ${got} == "${md5}" ]] || die "${sum%sum} mismatch for ${file}: got ${got}, expected ${md5}; delete it and rerun"
  fi
}

# fetch_part URL MD5 DIR PART: download URL (a LibriSpeech-format archive of DIR/LibriSpeech/PART) and unpack it.
# The part is unpacked into a temporary folder and moved into place when complete, so DIR/LibriSpeech/PART exists
# only whole: an existing one is skipped without writing anything (DIR may be a read-only copy). The archive is
# deleted afterwards unless the calling download.sh set keep_archives=true.
fetch_part() {
  local url=$1 md5=$2 dir=$3 part=$4
  if [[ -d ${dir}/LibriSpeech/${part} ]]; then
    log "${dir}/LibriSpeech/${part} already unpacked"
    return 0
  fi
  fetch "${url}" "${dir}" "${md5}"
  log "unpacking ${url##*/}"
  rm -rf "${dir}/.unpack_${part}"
  mkdir -p "${dir}/.unpack_${part}" "${dir}/LibriSpeech"
  tar -xzf "${dir}/${url##*/}" -C "${dir}/.unpack_${part}"
  mv "${dir}/.unpack_${part}/LibriSpeech/${part}" "${dir}/LibriSpeech/${part}"
  for f in "${dir}/.unpack_${part}/LibriSpeech/"*.TXT; do   # SPEAKERS.TXT, CHAPTERS.TXT, ...: every part has them
    if [[ -e ${f} && ! -e ${dir}/LibriSpeech/${f##*/} ]]; then mv "${f}" "${dir}/LibriSpeech/"; fi
  done
  rm -rf "${dir}/.unpack_${part}"
  [[ ${keep_archives:-false} == true ]] || rm -f "${dir}/${url##*/}"
}

# prepare_args SUBDIR DOWNLOAD_DIR DATA_DIR: a prepare.sh's two arguments. Sets src (DOWNLOAD_DIR, or
# DOWNLOAD_DIR/SUBDIR when it holds one: either the download folder or the corpus folder itself may be passed) and
# data_dir.
prepare_args() {
  local subdir=$1
  shift
  [[ $# -eq 2 ]] || die "expected DOWNLOAD_DIR DATA_DIR, got $# arguments ($0 --help for usage)"
  src=$1
  data_dir=$2
  if [[ -d ${src}/${subdir} ]]; then src=${src}/${subdir}; fi
}

# require_dir DIR HINT: die with HINT unless DIR is a directory.
require_dir() {
  [[ -d $1 ]] || die "$1 not found: $2"
}

# require_file FILE HINT
require_file() {
  [[ -f $1 ]] || die "$1 not found: $2"
}

# check_kaldi_dir DIR [--part CORPUS:PART --allow_partial true|false]: wav.scp and text exist, are non-empty and list
# the same keys (read by the one reader of Kaldi files, as every tool reads them: a BOM, tabs, duplicate keys are
# decided there); with --part, DIR holds that part of a corpus whole (wenet_udps.corpora.common.check_counts).
check_kaldi_dir() {
  local n
  n=$(python3 -m wenet_udps.corpora.common "$@") || exit 1
  log "$1: ${n} utterances"
}

# blob_id FILE: FILE's Git blob id (SHA-1 of "blob <size>\0" and its bytes), what a repository's tree records for it.
blob_id() {
  python3 -c 'import hashlib, sys
data = open(sys.argv[1], "rb").read()
print(hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest())' "$1"
}

# fetch_blob URL DIR BLOB: download URL (a file of a Git repository at a pinned commit) into DIR, checked against
# BLOB, the id the repository's tree records for it (the checksum such a repository publishes). A file already
# there with that id is not downloaded again; one with another id stops the script naming both ids.
fetch_blob() {
  local url=$1 dir=$2 blob=$3 file="$2/${1##*/}" got
  if [[ -f ${file} && $(blob_id "${file}") == "${blob}" ]]; then
    log "${file} already downloaded (Git blob ${blob:0:12} ok)"
    return 0
  fi
  rm -f "${file}"   # a raw file server does not resume: a partial file is fetched again
  fetch "${url}" "${dir}"
  got=$(blob_id "${file}")
  [[ ${got} == "${blob}" ]] || die "Git blob mismatch for ${file} (from ${url}): got ${got}, expected ${blob};" \
    "delete it and rerun"
}
