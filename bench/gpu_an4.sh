#!/usr/bin/env bash
# AN4 from audio to test WER on one GPU, both attentions, through run.sh (issue 56's part b; bench/gpu_report.sh):
#
#   bash bench/gpu_an4.sh WORK AN4_DIR --gpus 0 --train_dtype bf16 --num_workers 6 --skip_gpu_check true
#
# AN4_DIR holds an4/ (SPHERE, or the FLAC copy of tools/an4_to_flac.py); the options after it go to every run.sh
# call. Stages -1 to 3 run once; stage 4 then trains the two attentions side by side, one run.sh each (its own
# torchrun rendezvous port), since one 4.6 M-parameter model leaves the GPU mostly idle (host-bound steps); stage 5
# decodes test, again one run.sh per attention. Writes WORK/data, WORK/exp/an4_<attention>/, and in WORK/logs one
# log per run.sh call, b_stages.tsv (stage, seconds) and, where nvidia-smi exists, b_gpu_util.csv sampled every
# 0.5 s during stage 4 (timestamp, utilisation %, memory MiB).
set -euo pipefail
_root=$(cd "$(dirname "$0")/.." && pwd)
. "${_root}/tools/log.sh"

config=                # the training conf of both attentions; empty: conf/an4/train_conformer_gpu.yaml
decode_modes="ctc_greedy_search ctc_prefix_beam_search attention attention_rescoring"
declare -r help_message="Usage: bash bench/gpu_an4.sh [--config CONF] [--decode_modes MODES] WORK AN4_DIR
       [run.sh options]"
. "${_root}/tools/parse_options.sh"
[[ $# -ge 2 ]] || die "expected WORK AN4_DIR [run.sh options], got $# arguments (--help)"
work=$(realpath -m -- "$1")
an4=$(realpath -m -- "$2")
config=$(realpath -m -- "${config:-${_root}/conf/an4/train_conformer_gpu.yaml}")
shift 2
cd "${_root}"   # after the caller's paths are made absolute
mkdir -p "${work}/logs"
logs=${work}/logs
common=(--corpus an4 --download_dir "${an4}" --data "${work}/data" --dir "${work}/exp/an4" --config "${config}"
        --test_sets test --decode_modes "${decode_modes}" "$@")

since() {  # since START: seconds from START (an EPOCHREALTIME) to now, one decimal
  awk -v a="$1" -v b="${EPOCHREALTIME}" 'BEGIN { printf "%.1f", b - a }'
}

timed() {  # timed STAGE LOG ARGS...: one run.sh call, its log in LOG, its wall seconds in b_stages.tsv
  local stage=$1 log_file=$2 start=${EPOCHREALTIME}
  shift 2
  bash run.sh "${common[@]}" "$@" > "${log_file}" 2>&1 || { tail -n 20 "${log_file}" >&2; return 1; }
  printf '%s\t%s\n' "${stage}" "$(since "${start}")" >> "${logs}/b_stages.tsv"
}

both() {  # both STAGE: run.sh's stage STAGE for each attention at once; fails after both ended if either failed
  local stage=$1 pids=() udps port=29400 failed=0
  local start=${EPOCHREALTIME}
  for udps in scaled_dot udps; do
    timed "${stage}_${udps}" "${logs}/b_stage${stage}_${udps}.log" --families "${udps}" --stage "${stage}" \
      --stop_stage "${stage}" --HOST_NODE_ADDR "localhost:${port}" &
    pids+=($!)
    port=$((port + 1))
  done
  for pid in "${pids[@]}"; do wait "${pid}" || failed=1; done
  printf '%s\t%s\n' "${stage}" "$(since "${start}")" >> "${logs}/b_stages.tsv"
  [[ ${failed} -eq 0 ]] || die "stage ${stage} failed for an attention (logs in ${logs})"
}

log "AN4 stages -1..3 (${an4})"
timed data "${logs}/b_data.log" --families "scaled_dot udps" --stage -1 --stop_stage 3
util_pid=
trap '[[ -z ${util_pid} ]] || kill "${util_pid}" 2> /dev/null || true' EXIT
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader,nounits -lms 500 \
    > "${logs}/b_gpu_util.csv" &
  util_pid=$!
fi
log "AN4 stage 4: both attentions side by side (${config})"
both 4
[[ -z ${util_pid} ]] || kill "${util_pid}"
util_pid=
log "AN4 stage 5: test"
both 5
log "AN4 done: $(cat "${work}"/exp/an4_*/test/attention_rescoring/wer 2> /dev/null | grep -c '^Overall') models scored"
