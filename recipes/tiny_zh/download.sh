#!/usr/bin/env bash
# tiny_zh is synthesised by prepare.sh (espeak-ng); there is nothing to download.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "${root}/tools/log.sh"
log "tiny_zh: nothing to download (prepare.sh synthesises the corpus with espeak-ng)"
