#!/usr/bin/env bash
# Usage: recipes/tiny_zh/prepare.sh [--seed 1 --num_train 800 --num_dev 60 --num_test 60 --jobs 2 --biasing false] DOWNLOAD_DIR DATA_DIR
# Synthesises the tiny_zh corpus with espeak-ng (recipes/tiny_prepare.sh); nothing is downloaded.
set -euo pipefail
TINY_LANG=zh exec bash "$(dirname "${BASH_SOURCE[0]}")/../tiny_prepare.sh" "$@"
