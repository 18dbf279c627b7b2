#!/usr/bin/env bash
# Command-line options for recipe scripts, Kaldi/WeNet style. Source it after the defaults:
#
#   stage=0        # first stage to run
#   nj=16          # parallel jobs
#   . tools/parse_options.sh
#
# "--name value" and "--name=value" set a variable that already exists ("-" in a name reads as "_",
# so --train-config sets train_config); a variable whose default is true/false only takes true/false.
# Parsing stops at the first argument that is not an option (or after "--"); the remaining arguments
# stay in "$@". "--help" prints $help_message (if the script sets one) and the options with their
# defaults, read from the script's assignments above the line that sources this file; a comment continued on
# the following lines ("   # more", indented) is shown whole. A variable whose name starts with "_" is the
# script's own (e.g. _caller_dir): not listed, and not an option.
# An unknown option prints one error line and exits 1. Safe under "set -euo pipefail".

_po_script=${0##*/}

_po_print_help() {
  if [[ -n ${help_message:-} ]]; then
    printf '%s\n' "${help_message}"
  else
    printf 'Usage: %s [options] [args]\n' "${_po_script}"
  fi
  [[ -f $0 ]] || return 0
  printf 'Options (current values):\n'
  local line name value comment indent=0
  while IFS= read -r line || [[ -n ${line} ]]; do
    # Defaults end where this file is sourced.
    [[ ${line} =~ ^[[:space:]]*(\.|source)[[:space:]]+[^[:space:]]*parse_options\.sh ]] && break
    # An indented comment right after an option's commented line continues that comment, under it.
    if (( indent > 0 )) && [[ ${line} =~ ^[[:space:]]+\#[[:space:]]?(.*)$ ]]; then
      printf '%*s# %s\n' "${indent}" '' "${BASH_REMATCH[1]}"
      continue
    fi
    indent=0
    [[ ${line} =~ ^[A-Za-z_][A-Za-z0-9_]*=\( ]] && continue  # an array is not an option
    [[ ${line} =~ ^([A-Za-z][A-Za-z0-9_]*)= ]] || continue   # _name: the script's own, not an option
    name=${BASH_REMATCH[1]}
    value=${!name-}
    comment=""
    if [[ ${line} =~ [[:space:]]\#[[:space:]]*(.*)$ ]]; then
      comment="  # ${BASH_REMATCH[1]}"
      indent=$(( 2 + 2 + (${#name} > 24 ? ${#name} : 24) + 1 + ${#value} + 2 ))
    fi
    printf '  --%-24s %s%s\n' "${name}" "${value}" "${comment}"
  done < "$0"
}

_po_fail() {
  printf '%s: %s (run "%s --help" for the options)\n' "${_po_script}" "$1" "${_po_script}" >&2
  exit 1
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --help|-h)
      _po_print_help
      exit 0
      ;;
    --)
      shift
      break
      ;;
    --*=*)
      _po_name=${1%%=*}
      _po_value=${1#*=}
      shift
      ;;
    --?*)
      _po_name=$1
      [[ $# -ge 2 ]] || _po_fail "option ${1} needs a value"
      _po_value=$2
      shift 2
      ;;
    *)
      break
      ;;
  esac
  _po_name=${_po_name#--}
  _po_name=${_po_name//-/_}
  if [[ ! ${_po_name} =~ ^[A-Za-z][A-Za-z0-9_]*$ ]] || ! declare -p "${_po_name}" > /dev/null 2>&1; then
    _po_fail "unknown option --${_po_name}"
  fi
  case "${!_po_name}" in
    true|false)
      [[ ${_po_value} == true || ${_po_value} == false ]] \
        || _po_fail "option --${_po_name} takes true or false, got '${_po_value}'"
      ;;
  esac
  printf -v "${_po_name}" '%s' "${_po_value}"
done
unset _po_name _po_value _po_script
unset -f _po_print_help _po_fail
true
