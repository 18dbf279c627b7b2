#!/usr/bin/env bash
# One row of the small-conf sweep (docs/small_confs.md): train one model from a conf with overrides, average its 5
# best epochs (cv loss), decode the dev set and print its error rate in three modes.
#
#   bash bench/conf_sweep.sh NAME true|false [KEY=VALUE ...]
#   e.g. bash bench/conf_sweep.sh lr1 false optim_conf.lr=0.001      # after 'bash run.sh --stop_stage 3'
#
# Environment: DATA (data/tiny_zh, made by run.sh stages 0-3), CONF (conf/<corpus of DATA>/train_conformer.yaml),
# OUT (exp/sweep), AVG (5), CHAR (1: CER; 0: WER). The sweep of 2026-11-23 ran two rows at a time with
# OMP_NUM_THREADS=1 each. A finished row is not retrained: its NAME dir holds final.pt.
set -euo pipefail
[[ $# -ge 2 && $2 =~ ^(true|false)$ ]] || { echo "usage: $0 NAME true|false [KEY=VALUE ...]" >&2; exit 2; }
name=$1 udps=$2
shift 2
data=${DATA:-data/tiny_zh}
conf=${CONF:-conf/$(basename "${data}")/train_conformer.yaml}
exp=${OUT:-exp/sweep}/${name}
for f in "${data}/train/data.list" "${data}/dev/data.list" "${conf}"; do
  [[ -f ${f} ]] || { echo "$0: missing ${f} (run 'bash run.sh --stop_stage 3' for the corpus first)" >&2; exit 1; }
done
mkdir -p "${exp}"
args=(--config "${conf}" --train_data "${data}/train/data.list" --cv_data "${data}/dev/data.list"
      --model_dir "${exp}" --num_workers 1 --device cpu --override "att_udps=${udps}"
      --override "cmvn_conf.cmvn_file=${data}/train/global_cmvn"
      --override "tokenizer_conf.symbol_table_path=${data}/dict/lang_char.txt")
for o in "$@"; do args+=(--override "${o}"); done
start=$(date +%s)
[[ -f ${exp}/final.pt ]] || python3 -m wenet_udps.bin.train "${args[@]}" > "${exp}/train.log" 2>&1
train_s=$(( $(date +%s) - start ))
[[ -f ${exp}/avg.pt ]] || python3 -m wenet_udps.bin.average_model --dst_model "${exp}/avg.pt" --src_path "${exp}" \
  --num "${AVG:-5}" --val_best > /dev/null 2>&1
modes="ctc_greedy_search attention attention_rescoring"
# shellcheck disable=SC2086  # modes is a list
python3 -m wenet_udps.bin.recognize --config "${exp}/train.yaml" --checkpoint "${exp}/avg.pt" \
  --test_data "${data}/dev/data.list" --result_dir "${exp}/dev" --modes ${modes} --beam_size 10 --ctc_weight 0.5 \
  --batch_size 16 > "${exp}/decode_dev.log" 2>&1
for m in ${modes}; do
  python3 tools/compute-wer.py --char="${CHAR:-1}" --v=1 "${data}/dev/text" "${exp}/dev/${m}/text" > "${exp}/dev/${m}/wer"
  echo "${name} dev ${m} $(grep '^Overall' "${exp}/dev/${m}/wer")"
done | tee "${exp}/summary"
echo "${name} train_s=${train_s}" | tee -a "${exp}/summary"
