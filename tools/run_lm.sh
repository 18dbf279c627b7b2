#!/usr/bin/env bash
# run.sh's word-LM steps (--lm true): stage 2 builds the LM, stage 5 tunes its weights on dev and decodes every test
# set with the *_lm modes. Each skips its work when its stamp file records the same inputs and options. Source after
# tools/run_setup.sh; the functions read run.sh's option variables.

lm_modes="ctc_prefix_beam_search_lm attention_rescoring_lm"
lm_file() { echo "${data}/lm/lm.arpa"; }

# check_lm_install: with --lm true, KenLM's lmplz and flashlight-text must be installed (one line saying how).
check_lm_install() {
  local err
  err=$(python3 -c 'from wenet_udps.lm.tools import find_kenlm_program, import_flashlight
find_kenlm_program("lmplz"); import_flashlight()' 2>&1 | tail -n 1) \
    || die "--lm true: ${err#*LmToolsMissing: }"
}

stage_lm() {  # stage 2 with --lm true: an n-gram LM from the training transcripts (+ --lm_text), no dev/test sentence in --lm_text
  local out key x held=() opts=()
  out=$(lm_file)
  require "${data}/${train_set}/text" 0
  for x in $(printf '%s\n' ${dev_set} ${test_sets} | awk '!seen[$0]++'); do
    require "${data}/${x}/text" 0
    held+=(--held_out "${data}/${x}/text")
  done
  [[ -z ${lm_text} ]] || opts+=(--lm_text "${lm_text}")
  # A CER-scored corpus is Mandarin here (aishell, tiny_zh): its LM's words are characters.
  [[ ${wer_char} != 1 ]] || opts+=(--char_lm)
  # shellcheck disable=SC2206  # lm_prune is a list
  [[ -z ${lm_prune} ]] || opts+=(--prune ${lm_prune})
  key=$(stamp_text text="$(file_sum "${data}/${train_set}/text")" lm_text="$(file_sum "${lm_text}")" \
        lm_order="${lm_order}" lm_prune="${lm_prune}" char="${wer_char}" \
        held_out="$(for x in "${held[@]}"; do [[ ${x} == --* ]] || file_sum "${x}"; done | tr '\n' ' ')")
  if [[ -f ${out} ]] && stamp_ok "${out}.stamp" "${key}"; then
    log "stage 2: ${out} is up to date, skipping"
    return 0
  fi
  log "stage 2: ${lm_order}-gram LM from ${data}/${train_set}/text${lm_text:+ and ${lm_text}} -> ${out}"
  python3 -m wenet_udps.bin.build_lm --text "${data}/${train_set}/text" "${opts[@]}" "${held[@]}" \
    --order "${lm_order}" --out "${out}"
  stamp_write "${out}.stamp" "${key}"
}

# lm_tune EXP: the LM weight and word score of ${avg} whose attention_rescoring_lm WER on ${dev_set} is lowest (a
# grid of --lm_weights x --word_scores); sets lm_weight and word_score. Dev only: test never chooses anything.
lm_tune() {
  local exp=$1 tune=$1/lm_tune/${dev_set} key w b out rate best=""
  key=${avg_key}$'\n'$(stamp_text lm="$(file_sum "$(lm_file)")" lm_weights="${lm_weights}" \
        word_scores="${word_scores}" beam_size="${beam_size}" ctc_weight="${ctc_weight}" \
        list="$(file_sum "${data}/${dev_set}/$(list_name)")")
  if ! { [[ -f ${tune}/best ]] && stamp_ok "${tune}/.tune.stamp" "${key}"; }; then
    log "stage 5: tune the LM weight (${lm_weights}) and word score (${word_scores}) on ${dev_set}"
    python3 -m wenet_udps.bin.check_lm --lm "$(lm_file)" --text "${data}/${dev_set}/text"
    for w in ${lm_weights}; do
      for b in ${word_scores}; do
        out=${tune}/w${w}_b${b}
        lm_recognize "${exp}" "${dev_set}" "${out}" attention_rescoring_lm "${w}" "${b}" > /dev/null
        python3 tools/compute-wer.py --char="${wer_char}" "${data}/${dev_set}/text" \
          "${out}/attention_rescoring_lm/text" > "${out}/wer"
        rate=$(awk '/^Overall/ { print $3; exit }' "${out}/wer")
        log "stage 5: ${dev_set} lm_weight ${w} word_score ${b}: ${rate} %"
        best=$(printf '%s\n%s %s %s\n' "${best}" "${rate}" "${w}" "${b}" | awk 'NF' | sort -g -k1,1 | head -n 1)
      done
    done
    echo "${best}" > "${tune}/best"
    stamp_write "${tune}/.tune.stamp" "${key}"
  fi
  read -r rate lm_weight word_score < "${tune}/best"
  log "stage 5: ${exp}: lm_weight ${lm_weight}, word_score ${word_score} (${dev_set} ${rate} %)"
}

# lm_recognize EXP SET RESULT_DIR MODES LM_WEIGHT WORD_SCORE: recognize SET with ${avg} and the LM.
lm_recognize() {
  local device=cpu
  [[ -z ${gpus} ]] || device=cuda
  # shellcheck disable=SC2086  # $4 is a list of modes
  CUDA_VISIBLE_DEVICES=${gpus%%,*} python3 -m wenet_udps.bin.recognize --config "$1/train.yaml" \
    --checkpoint "${avg}" --data_type "${data_type}" --test_data "${data}/$2/$(list_name)" --result_dir "$3" \
    --modes $4 --lm "$(lm_file)" --lm_weight "$5" --word_score "$6" --beam_size "${beam_size}" \
    --ctc_weight "${ctc_weight}" --reverse_weight "${reverse_weight}" --batch_size "${decode_batch_size}" \
    --device "${device}"
}

lm_decode() {  # stage 5 with --lm true: EXP's weights tuned on dev, then every test set decoded in the *_lm modes
  local exp=$1 x key mode lm_weight word_score
  require "$(lm_file)" 2
  lm_tune "${exp}"
  for x in ${test_sets}; do
    key=${avg_key}$'\n'$(stamp_text lm="$(file_sum "$(lm_file)")" lm_weight="${lm_weight}" \
          word_score="${word_score}" beam_size="${beam_size}" ctc_weight="${ctc_weight}" \
          list="$(file_sum "${data}/${x}/$(list_name)")")
    if stamp_ok "${exp}/${x}/.decode_lm.stamp" "${key}"; then
      log "stage 5: ${exp}/${x} decoded with the same LM and weights, skipping"
    else
      log "stage 5: decode ${x} with ${avg} and $(lm_file) (${lm_modes})"
      lm_recognize "${exp}" "${x}" "${exp}/${x}" "${lm_modes}" "${lm_weight}" "${word_score}"
      stamp_write "${exp}/${x}/.decode_lm.stamp" "${key}"
    fi
    for mode in ${lm_modes}; do
      python3 tools/compute-wer.py --char="${wer_char}" --v=1 "${data}/${x}/text" "${exp}/${x}/${mode}/text" \
        > "${exp}/${x}/${mode}/wer"
      log "stage 5: ${exp} ${x} ${mode}: $(grep '^Overall' "${exp}/${x}/${mode}/wer")"
    done
  done
}
