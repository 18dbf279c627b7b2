#!/usr/bin/env bash
# Issue 82's biasing table for one tiny corpus (docs/hotwords.md, "How do I bias decoding toward a list of words?").
#
#   bash recipes/tiny_biasing.sh --corpus tiny_zh|tiny_en --exp EXP --data DATA [--scores "1 2 3 4 6 8 10 13 16 20"] \
#     [--beam 10] [--variants "prefix carry carry_ctc0 wenet"] [--out DIR]
#
# DATA holds the corpus built with its biasing sets (run.sh --prepare_opts "--biasing true"), EXP a model run.sh
# trained and averaged on it (EXP/avg_*.pt; tiny_en: a letter model, --token_type bpe --nbpe 25, as its
# whole-word units cannot spell an absent word). For each variant (below) this decodes dev_biasing with no list and with
# the mixed list (the true phrases and ten times as many distractors) at each --scores context score, takes the score
# of the lowest dev error rate (the lower score on a tie), then decodes test_biasing with no list, the true list and
# the mixed list at that score. Each decode is scored by tools/compute-biased-wer.py against the list it had (no
# list: against each list), and its text, score and decode.info are kept in recipes/<corpus>/hypotheses/issue82/
# <set>/<list>_s<score>/<variant>/ with the table in table.tsv, so the table can be scored again without a model
# (issue82_beam<N>/ for a --beam other than 10; --out DIR: another folder). The folder's KEPT record (written first:
# the commit, the checkpoint's SHA-256, the beam, the sets' and lists' sums) must match this run, or it is refused:
# its cells were decoded by other code or inputs, and a rerun would keep them (tools/run_lib.sh kept_by; the
# package and tools are this checkout's, whatever the working directory and PYTHONPATH).
#
# Variants: prefix = ctc_prefix_beam_search; carry = attention_rescoring keeping the bonus (CTC weight 0.5, context
# weight 1); carry_ctc0 = the same at CTC weight 0; wenet = WeNet's rescoring (the bonus only chose the n-best, as
# WeNet's finalize assigns its correction over it, and CTC weight 0: context weight 0, CTC weight 0).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "${root}/tools/log.sh"
. "${root}/tools/run_lib.sh"
corpus= exp= data= scores="1 2 3 4 6 8 10 13 16 20" beam=10 variants="prefix carry carry_ctc0 wenet" out=
while [[ $# -gt 0 ]]; do
  case $1 in
    --corpus) corpus=$2 ;; --exp) exp=$2 ;; --data) data=$2 ;; --scores) scores=$2 ;; --beam) beam=$2 ;;
    --variants) variants=$2 ;; --out) out=$2 ;;
    *) die "tiny_biasing.sh: unknown option '$1' (--corpus --exp --data --scores --beam --variants --out)" ;;
  esac
  shift 2
done
[[ ${corpus} == tiny_zh || ${corpus} == tiny_en ]] || die "tiny_biasing.sh: --corpus tiny_zh or tiny_en, got '${corpus}'"
[[ -d ${exp} && -d ${data}/dev_biasing && -d ${data}/test_biasing ]] \
  || die "tiny_biasing.sh: --exp ${exp} and --data ${data}/{dev,test}_biasing must exist"
checkpoint=$(canonical_path "$(ls "${exp}"/avg_*.pt | head -1)")
exp=$(canonical_path "${exp}") data=$(canonical_path "${data}")
char=0; [[ ${corpus} == tiny_zh ]] && char=1
if [[ -z ${out} ]]; then
  out=${root}/recipes/${corpus}/hypotheses/issue82
  [[ ${beam} == 10 ]] || out+=_beam${beam}
fi
out=$(canonical_path "${out}")
# This checkout's package and tools, whatever the caller's directory and PYTHONPATH (kept_by checks it).
cd "${root}"
export PYTHONPATH=${root}
inputs() {  # what the cells depend on besides the code (kept_by's settings)
  local x f
  echo "corpus=${corpus}" "beam=${beam}" "checkpoint_sha256=$(sha256sum < "${checkpoint}" | cut -c1-64)"
  for x in dev_biasing test_biasing; do
    for f in data.list text hotwords_true.txt hotwords_true_and_distractors.txt; do
      echo "${x}/${f}=$(file_sum "${data}/${x}/${f}")"
    done
  done
}
# shellcheck disable=SC2046  # one setting a word
kept_by "${out}" "${root}" $(inputs)
tmp=${out}/.tmp

variant_opts() {  # variant_opts VARIANT LIST: the recognize options of a variant
  case $1 in
    prefix) echo "--modes ctc_prefix_beam_search" ;;
    carry) echo "--modes attention_rescoring --ctc_weight 0.5"; [[ $2 == none ]] || echo "--context_weight 1.0" ;;
    carry_ctc0) echo "--modes attention_rescoring --ctc_weight 0.0"; [[ $2 == none ]] || echo "--context_weight 1.0" ;;
    wenet) echo "--modes attention_rescoring --ctc_weight 0.0"; [[ $2 == none ]] || echo "--context_weight 0.0" ;;
  esac
}

list_file() { echo "${data}/$1/hotwords_$2.txt"; }   # list_file SET true|true_and_distractors

decode() {  # decode SET LIST SCORE VARIANT: one cell (a rerun keeps a cell already done)
  local x=$1 list=$2 score=$3 variant=$4 dir ctx=() mode scored
  dir=${out}/${x}/${list}_s${score}/${variant}
  [[ -s ${dir}/text ]] && return 0
  [[ ${list} == none ]] || ctx=(--context_file "$(list_file "${x}" "${list}")" --context_score "${score}")
  # shellcheck disable=SC2046  # the variant's options are words
  python3 -m wenet_udps.bin.recognize --config "${exp}/train.yaml" --checkpoint "${checkpoint}" \
    --test_data "${data}/${x}/data.list" --result_dir "${tmp}" --beam_size "${beam}" --batch_size 16 \
    --device cpu $(variant_opts "${variant}" "${list}") ${ctx[@]+"${ctx[@]}"} 2> "${tmp}.log" \
    || { cat "${tmp}.log" >&2; die "recognize failed: ${x} ${list} ${score} ${variant}"; }
  mode=ctc_prefix_beam_search; [[ ${variant} == prefix ]] || mode=attention_rescoring
  mkdir -p "${dir}"
  for scored in true true_and_distractors; do
    [[ ${list} == none || ${list} == "${scored}" ]] || continue
    python3 tools/compute-biased-wer.py --char="${char}" --biasing_list "$(list_file "${x}" "${scored}")" \
      "${data}/${x}/text" "${tmp}/${mode}/text" > "${dir}/biased_wer_${scored}"
  done
  cp "${tmp}/${mode}/decode.info" "${dir}/decode.info"
  # shellcheck disable=SC2046
  kept_by "${out}" "${root}" $(inputs)   # the checkout unchanged while this cell was decoded
  cp "${tmp}/${mode}/text" "${dir}/text"   # last: a cell with its text is complete
  log "${x} ${list} s${score} ${variant}: $(grep -h '^B-WER\|^WER' "${dir}"/biased_wer_* | tr '\n' ' ')"
}

wer_of() { awk '$1 == "WER" {print $3}' "$1"; }

for variant in ${variants}; do decode dev_biasing none 0 "${variant}"; done
for score in ${scores}; do
  for variant in ${variants}; do decode dev_biasing true_and_distractors "${score}" "${variant}"; done
done
printf 'variant\tset\tlist\tscore\tscored_against\tWER\tU-WER\tB-WER\trecall\tprecision\tF1\n' > "${out}/table.tsv"
for variant in ${variants}; do
  best= best_wer=
  for score in ${scores}; do
    w=$(wer_of "${out}/dev_biasing/true_and_distractors_s${score}/${variant}/biased_wer_true_and_distractors")
    if [[ -z ${best} ]] || awk -v a="${w}" -v b="${best_wer}" 'BEGIN {exit !(a < b)}'; then best=${score} best_wer=${w}; fi
  done
  log "${variant}: context score ${best} (dev WER/CER ${best_wer} % with the mixed list)"
  decode test_biasing none 0 "${variant}"
  decode test_biasing true "${best}" "${variant}"
  decode test_biasing true_and_distractors "${best}" "${variant}"
  for x in dev_biasing test_biasing; do
    for f in "${out}/${x}"/none_s0/"${variant}"/biased_wer_* "${out}/${x}"/true*_s"${best}"/"${variant}"/biased_wer_*; do
      [[ -f ${f} ]] || continue
      list=$(basename "$(dirname "$(dirname "${f}")")"); scored=${f##*/biased_wer_}
      awk -v v="${variant}" -v x="${x}" -v l="${list%_s*}" -v s="${list##*_s}" -v c="${scored}" '
        $1 == "WER" {w = $3} $1 == "U-WER" {u = $3} $1 == "B-WER" {b = $3}
        $1 == "Phrases" {r = $4; p = $6; f = $8}
        END {printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v, x, l, s, c, w, u, b, r, p, f}' "${f}" \
        >> "${out}/table.tsv"
    done
  done
done
rm -rf "${tmp}" "${tmp}.log"
log "table: ${out}/table.tsv"
