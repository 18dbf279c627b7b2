#!/usr/bin/env bash
# Issue 82's no-harm check (docs/hotwords.md, "Does a list of absent words do harm?"): AN4 test decoded by a
# trained AN4 model with no list and with 100 words that never occur in the test transcripts, in every mode that
# takes a list, each mode with the options its stage-5 decode used (read from EXP/test/<mode>/decode.info).
#
#   bash recipes/an4/biasing_no_harm.sh --exp EXP --data DATA [--scores "1 3"] [--out DIR]
#
# EXP is an AN4 model run.sh trained, averaged and decoded (stage 5, with --lm true for the *_lm modes); DATA its
# data folder (DATA/test/data.list and text, DATA/train/text). Two lists of 100 words that test never has:
# absent100 (DIR/absent100.txt) is the training words that test lacks, then tiny_en's absent words
# (wenet_udps.corpora.tiny_lexicon.EN_ABSENT_WORDS) that test lacks, in that order: the first 30 are words the model
# knows and that sound like test words (EIGHTH beside EIGHT, SIXTH beside SIX); unrelated100 is tiny_en's absent
# words that neither train nor test has (APPLE, BANANA, ...), as a list of rare names would be. Each decode's text, wer and decode.info go to DIR/<list>_s<score>/<mode>/
# (DIR: recipes/an4/hypotheses/issue82_no_harm), and the WER of each mode and score beside no list to DIR/table.tsv.
# The decode with no list must give stage 5's text byte for byte (else the comparison is not like for like: refused).
# A rerun keeps a decode already done, in a folder made alike (DIR/KEPT, written first: the commit, the checkpoint's
# SHA-256, the data's and stage 5's records; another, or a checkout with changes, is refused: tools/run_lib.sh
# kept_by; the package and tools are this checkout's, whatever the working directory and PYTHONPATH).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "${root}/tools/log.sh"
. "${root}/tools/run_lib.sh"
exp= data= scores="1 3" lists="absent100 unrelated100" out=${root}/recipes/an4/hypotheses/issue82_no_harm
modes="ctc_prefix_beam_search attention_rescoring joint_ctc_attention ctc_prefix_beam_search_lm attention_rescoring_lm
joint_ctc_attention_lm"
while [[ $# -gt 0 ]]; do
  case $1 in
    --exp) exp=$2 ;; --data) data=$2 ;; --scores) scores=$2 ;; --out) out=$2 ;;
    *) die "biasing_no_harm.sh: unknown option '$1' (--exp --data --scores --out)" ;;
  esac
  shift 2
done
[[ -d ${exp} && -f ${data}/test/data.list && -f ${data}/test/text && -f ${data}/train/text ]] \
  || die "biasing_no_harm.sh: --exp ${exp} must exist, and --data ${data} hold test/data.list, test/text, train/text"
exp=$(canonical_path "${exp}") data=$(canonical_path "${data}") out=$(canonical_path "${out}")
checkpoint=$(canonical_path "$(awk '$1 == "checkpoint:" {print $2}' "${exp}/test/attention_rescoring/decode.info")")
[[ -f ${checkpoint} ]] || die "biasing_no_harm.sh: ${exp}/test/attention_rescoring/decode.info names ${checkpoint}: missing"
# This checkout's package and tools, whatever the caller's directory and PYTHONPATH (kept_by checks it).
cd "${root}"
export PYTHONPATH=${root}
inputs() {  # what the cells depend on besides the code (kept_by's settings): the model, the data, stage 5's options
  local f m
  echo "checkpoint_sha256=$(sha256sum < "${checkpoint}" | cut -c1-64)"
  for f in test/data.list test/text train/text; do echo "${f}=$(file_sum "${data}/${f}")"; done
  for m in ${modes}; do echo "stage5_${m}=$(file_sum "${exp}/test/${m}/decode.info")"; done
}
# shellcheck disable=SC2046  # one setting a word
kept_by "${out}" "${root}" $(inputs)
python3 - "${data}/train/text" "${data}/test/text" "${out}" <<'EOF'
import sys
from wenet_udps.corpora.tiny_lexicon import EN_ABSENT_WORDS
from wenet_udps.utils.atomic import write_text


def words(path):
    with open(path, encoding="utf-8") as f:
        return [w for line in f for w in line.split()[1:]]


train, test = set(words(sys.argv[1])), set(words(sys.argv[2]))
known = sorted(train - test)
lists = {"absent100": known + [w for w in EN_ABSENT_WORDS if w not in test and w not in known],
         "unrelated100": [w for w in EN_ABSENT_WORDS if w not in test and w not in train]}
for name, chosen in lists.items():
    if len(chosen) < 100:
        sys.exit(f"biasing_no_harm.sh: {name}: only {len(chosen)} words absent from {sys.argv[2]}")
    write_text(f"{sys.argv[3]}/{name}.txt", "".join(f"{w}\n" for w in chosen[:100]))
EOF
stage5_opts() {  # stage5_opts MODE: the recognize options stage 5 decoded MODE with (those MODE uses)
  local info=${exp}/test/$1/decode.info
  [[ -f ${info} ]] || die "biasing_no_harm.sh: ${info} missing: decode ${exp} in $1 first (run.sh stage 5)"
  python3 - "$1" "${info}" <<'EOF'
import sys
from wenet_udps.transformer.decode_options import idle_options

mode, info = sys.argv[1:]
with open(info, encoding="utf-8") as f:
    record = dict(line.rstrip("\n").split(": ", 1) for line in f if ": " in line)
names = [k for k in ("beam_size", "ctc_weight", "reverse_weight", "lm", "lm_weight", "word_score")
         if record.get(k, "None") != "None"]
idle = set(idle_options(mode, names))
print(" ".join(f"--{k} {record[k]}" for k in names if k not in idle))
EOF
}

decode() {  # decode MODE LIST SCORE: one cell (LIST none, or a list of ${lists})
  local mode=$1 name=$2 score=$3 dir ctx=() opts
  dir=${out}/${name}_s${score}/${mode}
  [[ -s ${dir}/text ]] && return 0
  opts=$(stage5_opts "${mode}")
  [[ ${name} == none ]] || ctx=(--context_file "${out}/${name}.txt" --context_score "${score}")
  # shellcheck disable=SC2046  # the options are words
  python3 -m wenet_udps.bin.recognize --config "${exp}/train.yaml" --checkpoint "${checkpoint}" \
    --test_data "${data}/test/data.list" --result_dir "${out}/tmp" --batch_size 16 --device cpu --modes "${mode}" \
    ${opts} ${ctx[@]+"${ctx[@]}"} 2> "${out}/tmp.log" \
    || { cat "${out}/tmp.log" >&2; die "recognize failed: ${mode} ${name} ${score}"; }
  if [[ ${name} == none ]] && ! cmp -s "${out}/tmp/${mode}/text" "${exp}/test/${mode}/text"; then
    die "biasing_no_harm.sh: ${mode} with no list differs from ${exp}/test/${mode}/text: not stage 5's decode"
  fi
  python3 tools/compute-wer.py --char=0 "${data}/test/text" "${out}/tmp/${mode}/text" > "${out}/tmp/${mode}/wer"
  # against its own list: how often a listed word was written (no test word is listed: each one written is an error)
  [[ ${name} == none ]] || python3 tools/compute-biased-wer.py --char=0 --biasing_list "${out}/${name}.txt" \
    "${data}/test/text" "${out}/tmp/${mode}/text" 2> /dev/null > "${out}/tmp/${mode}/biased_wer"
  mkdir -p "${dir}"
  cp "${out}/tmp/${mode}/decode.info" "${out}/tmp/${mode}/wer" "${dir}/"
  [[ ${name} == none ]] || cp "${out}/tmp/${mode}/biased_wer" "${dir}/"
  # shellcheck disable=SC2046
  kept_by "${out}" "${root}" $(inputs)   # the checkout unchanged while this cell was decoded
  cp "${out}/tmp/${mode}/text" "${dir}/text"   # last: a cell with its text is complete
  log "${mode} ${name} s${score}: $(grep -h '^Overall' "${dir}/wer")"
}

wer_of() { awk '$1 == "Overall" {print $3}' "$1/wer"; }
ins_of() { awk '$1 == "Overall" {sub("I=", "", $NF); print $NF}' "$1/wer"; }
printf 'list\tmode\tscore\tWER_none\tWER_list\tdelta\tinsertions_none\tinsertions_list\tlisted_words_written\n' \
  > "${out}/table.tsv.partial"
for name in ${lists}; do
  for mode in ${modes}; do
    decode "${mode}" none 0
    for score in ${scores}; do
      decode "${mode}" "${name}" "${score}"
      a=${out}/none_s0/${mode} b=${out}/${name}_s${score}/${mode}
      awk -v l="${name}" -v m="${mode}" -v s="${score}" -v w0="$(wer_of "${a}")" -v w1="$(wer_of "${b}")" \
        -v i0="$(ins_of "${a}")" -v i1="$(ins_of "${b}")" \
        -v h="$(awk '$1 == "Phrases" {gsub(/,/, ""); print $12}' "${b}/biased_wer")" \
        'BEGIN {printf "%s\t%s\t%s\t%s\t%s\t%+.2f\t%s\t%s\t%s\n", l, m, s, w0, w1, w1 - w0, i0, i1, h}' \
        >> "${out}/table.tsv.partial"
    done
  done
done
mv "${out}/table.tsv.partial" "${out}/table.tsv"
rm -rf "${out}/tmp" "${out}/tmp.log"
log "table: ${out}/table.tsv"
