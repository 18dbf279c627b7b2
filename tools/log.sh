#!/usr/bin/env bash
# Logging helpers for the recipe scripts; source this file (". tools/log.sh").
#   log "message"  -> "YYYY-MM-DD HH:MM:SS (script:line:func) message" on stderr
#   die "message"  -> the same line, then exit 1
# The location is the caller's, so a message points at the line that logged it.

_log_at() {
  # $1: how many frames above _log_at's caller the reported location is.
  local depth=$(( $1 + 1 ))
  shift
  local src=${BASH_SOURCE[$((depth + 1))]:-${0}}
  local line=${BASH_LINENO[$depth]:-0}
  local func=${FUNCNAME[$((depth + 1))]:-main}
  printf '%s (%s:%s:%s) %s\n' "$(date '+%Y-%m-%d %H:%M:%S')" "${src##*/}" "${line}" "${func}" "$*" >&2
}

log() {
  _log_at 0 "$@"
}

die() {
  _log_at 0 "$@"
  exit 1
}
