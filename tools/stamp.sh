#!/usr/bin/env bash
# Stamp files for run.sh: a stage's output counts as done only when the stamp written next to it records the
# same inputs and options ("key=value" lines) as this run would use. Source after tools/log.sh.
#
#   text=$(stamp_text corpus="${corpus}" prepare_opts="${prepare_opts}")
#   if stamp_ok FILE "${text}"; then log "done, skipping"; else ...; stamp_write FILE "${text}"; fi
#   stamp_change FILE "${text}"   # "prepare_opts: '--num_train 2' -> '--num_train 20'" (what differs)

# stamp_text KEY=VALUE...: one line per argument (newlines inside a value become spaces).
stamp_text() {
  local kv
  for kv in "$@"; do printf '%s\n' "${kv//$'\n'/ }"; done
}

# stamp_ok FILE TEXT: true when FILE holds exactly TEXT.
stamp_ok() {
  [[ -f $1 ]] && [[ "$(cat "$1")" == "${2%$'\n'}" ]]
}

# stamp_change FILE TEXT: what differs between FILE and TEXT, in one line.
stamp_change() {
  [[ -f $1 ]] || { echo "no stamp file $1 records how it was made"; return 0; }
  local line key old
  while IFS= read -r line; do
    key=${line%%=*}
    old=$(awk -v k="${key}" 'index($0, k "=") == 1 { print; exit }' "$1")
    if [[ ${old} != "${line}" ]]; then
      echo "${key}: '${old#*=}' -> '${line#*=}'"
      return 0
    fi
  done <<< "$2"
  echo "$1 records other settings"
}

# stamp_write FILE TEXT
stamp_write() {
  mkdir -p "$(dirname "$1")"
  printf '%s\n' "${2%$'\n'}" > "$1"
}

# file_sum FILE: md5 of FILE's content, "absent" when there is no such file.
file_sum() {
  if [[ -f $1 ]]; then md5sum < "$1" | cut -c1-32; else echo absent; fi
}
