#!/usr/bin/env bash
# Leave-one-speaker-out (LOSO) over FSDD: run.sh --corpus fsdd --loso true runs this. For every speaker of the
# recordings, one fold: its data (prepare.sh --unseen_speaker SPEAKER: the speaker is in test_unseen only), then
# each variant and seed trained and decoded on test_unseen by run.sh. Jobs run side by side, --cpu_jobs at a time,
# each with nproc / cpu_jobs torch threads: a fold's data (log <exp_root>/<speaker>.log), then a fold and seed's
# trainings and decoding (log <exp_root>/<speaker>_seed<N>.log); stage 7 writes <exp_root>/RESULTS.md and loso.png
# (wenet_udps.results.loso). Rerunning resumes: finished stages are skipped, a training continues from its last
# valid checkpoint.
#
#   recipes/fsdd/loso.sh [--stage -1 --stop_stage 7 --seeds "1 2" --cpu_jobs 2 --exp_root E --data_root D] \
#       -- RUN_SH_OPTIONS...
# RUN_SH_OPTIONS (the user's run.sh options: --config, --fsdd_dir, --train_override, --families, ...) are passed to
# every fold's run.sh; the fold's own --data, --dir, --test_sets, --seeds and stages come after them and win.
set -euo pipefail
(( BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] >= 501 )) || { echo "$0: needs bash >= 5.1 (wait -n -p)" >&2; exit 1; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "${root}"
. tools/log.sh

stage=-1
stop_stage=7
seeds="1 2"
cpu_jobs=2
exp_root=exp/fsdd_loso/train_conformer
data_root=data/fsdd_loso
download_dir=downloads/fsdd
prepare_opts=
compare_root=        # another LOSO exp_root over the same folds (an old conf): paired tests against it
. tools/parse_options.sh
[[ ${1:-} == -- ]] && shift
run_opts=("$@")
[[ -n ${seeds// /} ]] || die "--seeds is empty: LOSO trains one model per fold, variant and seed"

if [[ ${stage} -le -1 && ${stop_stage} -ge -1 ]]; then
  bash run.sh "${run_opts[@]}" --loso false --download_dir "${download_dir}" --stage -1 --stop_stage -1
fi
recordings=${download_dir}/recordings
[[ -d ${recordings} ]] || die "missing ${recordings} (made by stage -1): run with --stage -1 (and --fsdd_dir)"
speakers=$(find -L "${recordings}/" -maxdepth 1 -name '[0-9]_*_*.wav' -printf '%f\n' | cut -d_ -f2 | sort -u)
[[ $(wc -w <<< "${speakers}") -ge 2 ]] || die "${recordings}: LOSO needs two speakers or more, found: ${speakers}"
log "LOSO over $(wc -w <<< "${speakers}") speakers: $(echo ${speakers}); seeds: ${seeds}; ${cpu_jobs} jobs at once"

fold_stage=$(( stage > 0 ? stage : 0 ))
fold_stop=$(( stop_stage < 5 ? stop_stage : 5 ))
threads=$(( $(nproc) / cpu_jobs > 0 ? $(nproc) / cpu_jobs : 1 ))
declare -A running=()   # pid -> job log name, at most --cpu_jobs at a time
failed=()
reap_one() {  # wait for any one running job; a failure is collected, the others go on
  local pid
  if ! wait -n -p pid "${!running[@]}"; then failed+=("${running[${pid}]}"); fi
  unset "running[${pid}]"
}
drain() {  # wait for every running job; stop naming each one that failed
  while [[ ${#running[@]} -gt 0 ]]; do reap_one; done
  [[ ${#failed[@]} -eq 0 ]] || die "LOSO job(s) failed: ${failed[*]} (logs in ${exp_root}); rerun to resume them"
}
trap '[[ ${#running[@]} -eq 0 ]] || kill "${!running[@]}" 2> /dev/null' EXIT
fold_run() {  # fold_run SPEAKER LOG FROM TO RUN_SH_OPTIONS...: one fold's run.sh stages FROM..TO, in the background
  local spk=$1 log_file=$2 from=$3 to=$4; shift 4
  [[ ${#running[@]} -lt ${cpu_jobs} ]] || reap_one   # a slot frees as soon as any job ends (a finished one: at once)
  log "fold ${spk}: stages ${from}..${to} $*, log: ${log_file}"
  OMP_NUM_THREADS=${threads} bash run.sh "${run_opts[@]}" --loso false --corpus fsdd \
    --download_dir "${download_dir}" --stage "${from}" --stop_stage "${to}" \
    --data "${data_root}/${spk}" --dir "${exp_root}/${spk}" \
    --prepare_opts "${prepare_opts} --unseen_speaker ${spk}" --test_sets test_unseen --cpu_jobs 1 "$@" \
    >> "${log_file}" 2>&1 &
  running[$!]=${log_file##*/}
}
mkdir -p "${exp_root}"
# Data first, every fold's (stages 0-3: seconds to a minute each), then one job per fold and seed (stages 4-5: its
# variants trained one after the other, then decoded): many jobs of equal length keep the --cpu_jobs slots busy to
# the end, also when the folds do not divide evenly among them.
if [[ ${fold_stage} -le 3 && ${fold_stop} -ge 0 ]]; then
  for spk in ${speakers}; do
    fold_run "${spk}" "${exp_root}/${spk}.log" "${fold_stage}" $(( fold_stop < 3 ? fold_stop : 3 ))
  done
  drain
fi
if [[ ${fold_stage} -le 5 && ${fold_stop} -ge 4 ]]; then
  for seed in ${seeds}; do for spk in ${speakers}; do   # seed-major: a fold's jobs seldom run at once
    fold_run "${spk}" "${exp_root}/${spk}_seed${seed}.log" $(( fold_stage > 4 ? fold_stage : 4 )) "${fold_stop}" \
      --seeds "${seed}"
  done; done
  drain
fi

if [[ ${stage} -le 7 && ${stop_stage} -ge 7 ]]; then
  compare=(); [[ -n ${compare_root} ]] && compare=(--compare_root "${compare_root}")
  log "LOSO results -> ${exp_root}/RESULTS.md, ${exp_root}/loso.png"
  python3 -m wenet_udps.results.loso --exp_root "${exp_root}" --data_root "${data_root}" \
    --out "${exp_root}/RESULTS.md" --plot "${exp_root}/loso.png" "${compare[@]}"
fi
log "LOSO done (stages ${stage}..${stop_stage})"
