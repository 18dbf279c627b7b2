#!/usr/bin/env bash
# Installs what wenet_udps needs on a fresh Debian/Ubuntu machine: espeak-ng (speech synthesis for the embedded
# tiny corpora) and the pinned Python packages (torch==2.13.0 so pip takes the CPU build, not GBs of CUDA wheels).
# Safe to rerun: it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/log.sh

if ! command -v espeak-ng >/dev/null 2>&1; then
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
  log "installing espeak-ng with apt-get"
  ${sudo} apt-get update -qq
  DEBIAN_FRONTEND=noninteractive ${sudo} apt-get install -y -qq espeak-ng >/dev/null
fi
if python3 -m pip install --dry-run -q -r requirements.txt 2>/dev/null | grep -q "Would install"; then
  log "installing Python packages from requirements.txt"
  python3 -m pip install -q -r requirements.txt
fi
python3 -c "import torch, soundfile, soxr, kaldi_native_fbank, sentencepiece" \
  || die "Python packages still missing after pip install -r requirements.txt"
log "environment ready: $(python3 -c 'import torch; print("torch", torch.__version__)'), $(espeak-ng --version | head -n 1)"
