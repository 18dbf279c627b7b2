#!/usr/bin/env bash
# Leave-one-speaker-out (LOSO) over FSDD: run.sh --corpus fsdd --loso true runs this. For every speaker of the
# recordings, one fold: its data (prepare.sh --unseen_speaker SPEAKER: the speaker is in test_unseen only), then
# each variant and seed trained and decoded on test_unseen by run.sh. Folds run side by side, --cpu_jobs at a time,
# each with nproc / cpu_jobs torch threads and its log in <exp_root>/<speaker>.log; stage 7 writes
# <exp_root>/RESULTS.md and loso.png (wenet_udps.results.loso).
#
#   recipes/fsdd/loso.sh [--stage -1 --stop_stage 7 --seeds "1 2" --cpu_jobs 2 --exp_root E --data_root D] \
#       -- RUN_SH_OPTIONS...
# RUN_SH_OPTIONS (the user's run.sh options: --config, --fsdd_dir, --train_override, --att_udps, ...) are passed to
# every fold's run.sh; the fold's own --data, --dir, --test_sets, --seeds and stages come after them and win.
set -euo pipefail
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
log "LOSO over $(wc -w <<< "${speakers}") speakers: $(echo ${speakers}); seeds: ${seeds}; ${cpu_jobs} folds at once"

fold_stage=$(( stage > 0 ? stage : 0 ))
fold_stop=$(( stop_stage < 5 ? stop_stage : 5 ))
if [[ ${fold_stage} -le ${fold_stop} ]]; then
  mkdir -p "${exp_root}"
  threads=$(( $(nproc) / cpu_jobs > 0 ? $(nproc) / cpu_jobs : 1 ))
  pids=() names=()
  wait_folds() {
    local i failed=()
    for i in "${!pids[@]}"; do wait "${pids[i]}" || failed+=("${names[i]}"); done
    pids=() names=()
    [[ ${#failed[@]} -eq 0 ]] || die "LOSO fold(s) failed: ${failed[*]} (see ${exp_root}/<speaker>.log); rerun" \
      "to resume them"
  }
  trap '[[ ${#pids[@]} -eq 0 ]] || kill "${pids[@]}" 2> /dev/null' EXIT
  for spk in ${speakers}; do
    [[ ${#pids[@]} -lt ${cpu_jobs} ]] || wait_folds
    log "fold ${spk}: stages ${fold_stage}..${fold_stop} in the background, log: ${exp_root}/${spk}.log"
    OMP_NUM_THREADS=${threads} bash run.sh "${run_opts[@]}" --loso false --corpus fsdd \
      --download_dir "${download_dir}" --stage "${fold_stage}" --stop_stage "${fold_stop}" \
      --data "${data_root}/${spk}" --dir "${exp_root}/${spk}" \
      --prepare_opts "${prepare_opts} --unseen_speaker ${spk}" --test_sets test_unseen --seeds "${seeds}" \
      --cpu_jobs 1 >> "${exp_root}/${spk}.log" 2>&1 &
    pids+=($!) names+=("${spk}")
  done
  wait_folds
fi

if [[ ${stage} -le 7 && ${stop_stage} -ge 7 ]]; then
  compare=(); [[ -n ${compare_root} ]] && compare=(--compare_root "${compare_root}")
  log "LOSO results -> ${exp_root}/RESULTS.md, ${exp_root}/loso.png"
  python3 -m wenet_udps.results.loso --exp_root "${exp_root}" --data_root "${data_root}" \
    --out "${exp_root}/RESULTS.md" --plot "${exp_root}/loso.png" "${compare[@]}"
fi
log "LOSO done (stages ${stage}..${stop_stage})"
