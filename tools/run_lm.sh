#!/usr/bin/env bash
# run.sh's word-LM steps (--lm true): stage -1 downloads a corpus' published LM, stage 2 builds the LM (or decompresses
# the published one) and converts it to a KenLM binary, stage 5 tunes its weights on dev and decodes every test set
# with the *_lm modes. Each skips its work when its stamp file records the same inputs and options. Source after
# tools/run_setup.sh; the functions read run.sh's option variables.

lm_modes="ctc_prefix_beam_search_lm attention_rescoring_lm"
# --lm_tag T: this LM's folders and results end in _T, so that LMs built from other text sit side by side.
lm_suffix() { echo "${lm_tag:+_${lm_tag}}"; }
lm_arpa() { echo "${data}/lm$(lm_suffix)/lm.arpa"; }
lm_file() { echo "${data}/lm$(lm_suffix)/lm.bin"; }   # what stage 5 decodes with (words in lm.bin.words)

# check_lm_install: with --lm true, KenLM's lmplz and build_binary and flashlight-text must be installed (one line
# saying how).
check_lm_install() {
  local err
  err=$(python3 -c 'from wenet_udps.lm.tools import find_kenlm_program, import_flashlight
find_kenlm_program("lmplz"); find_kenlm_program("build_binary"); import_flashlight()' 2>&1 | tail -n 1) \
    || die "--lm true: ${err#*LmToolsMissing: }"
}

# check_lm_options: a corpus whose settings.sh lists published LMs (lm_names) decodes with the one --lm_name picks
# (default lm_name_default), which no option of an LM built from text changes; the others build theirs from text.
check_lm_options() {
  if [[ -z ${lm_names} ]]; then
    [[ -z ${lm_name} && -z ${lm_mirror} ]] || die "--lm_name/--lm_mirror pick a published LM, and ${corpus} has" \
      "none: stage 2 builds its LM from the training transcripts (and --lm_text)"
    lm_order=${lm_order:-3}   # wenet_udps/lm/options.py's DEFAULT_ORDER
    return 0
  fi
  lm_name=${lm_name:-${lm_name_default}}
  [[ " ${lm_names} " == *" ${lm_name} "* ]] || die "--lm_name takes one of: ${lm_names}; got '${lm_name}'"
  [[ -z ${lm_text} && -z ${lm_order} && -z ${lm_prune} ]] || die "--lm_text, --lm_order and --lm_prune build an LM" \
    "from text; ${corpus} decodes with its published LM ${lm_name} (--lm_name picks another)"
}

stage_lm_download() {  # stage -1 with --lm true: the corpus' published LM, if it has one (recipes/<corpus>/download_lm.sh)
  [[ -n ${lm_names} ]] || return 0
  log "stage -1: download the LM ${lm_name} to ${download_dir}/lm"
  bash "recipes/${corpus}/download_lm.sh" --lm_name "${lm_name}" ${lm_mirror:+--mirror "${lm_mirror}"} \
    "${download_dir}/lm"
}

stage_lm() {  # stage 2 with --lm true: the ARPA LM (built or published), then its KenLM binary
  if [[ -n ${lm_names} ]]; then lm_unpack; else lm_build; fi
  lm_binarize
}

# lm_unpack: the published LM decompressed to lm.arpa. Its text is the corpus' LM book corpus, not here to check for
# dev/test sentences (its authors left the dev and test books out of it; docs/lm.md).
lm_unpack() {
  local gz=${download_dir}/lm/${lm_name}.arpa.gz out key
  out=$(lm_arpa)
  require "${gz}" -1
  key=$(stamp_text lm_name="${lm_name}" gz="$(file_sum "${gz}")")
  if [[ -f ${out} ]] && stamp_ok "${out}.stamp" "${key}"; then
    log "stage 2: ${out} (${lm_name}) is up to date, skipping"
    return 0
  fi
  log "stage 2: the published LM ${gz} -> ${out}"
  mkdir -p "$(dirname "${out}")"
  gzip -dc "${gz}" > "${out}.partial" \
    || { rm -f "${out}.partial"; die "${gz}: not a whole gzip file, or a full disk (gzip's message above): ${out} not" \
           "written; a cut file: delete it and rerun stage -1"; }
  mv "${out}.partial" "${out}"
  stamp_write "${out}.stamp" "${key}"
}

lm_binarize() {  # the KenLM binary of lm.arpa, and its words file (bound to the binary by its SHA-256)
  local arpa bin key
  arpa=$(lm_arpa)
  bin=$(lm_file)
  # The writer's checksum too: a pair an older wenet_udps wrote (words not bound to their binary) is written again.
  # The binary's checksum too (another binary copied over it is stale), and the skip only when the pair verifies as
  # a load checks it (binarize_lm --verify: read_lm), so an edited words file is written again, not skipped.
  key=$(stamp_text arpa="$(file_sum "${arpa}")" tool="$(file_sum wenet_udps/lm/binary.py)")
  if [[ -f ${bin} && -f ${bin}.words ]] && stamp_ok "${bin}.stamp" "${key}"$'\n'"bin=$(file_sum "${bin}")"; then
    if python3 -m wenet_udps.bin.binarize_lm --arpa "${arpa}" --out "${bin}" --verify > /dev/null 2>&1; then
      log "stage 2: ${bin} is up to date, skipping"
      return 0
    fi
    log "stage 2: ${bin} and its words file do not verify (binarize_lm --verify), writing them again"
  fi
  log "stage 2: KenLM binary ${bin} of ${arpa}"
  python3 -m wenet_udps.bin.binarize_lm --arpa "${arpa}" --out "${bin}"
  stamp_write "${bin}.stamp" "${key}"$'\n'"bin=$(file_sum "${bin}")"
}

lm_build() {  # an n-gram LM from the training transcripts (+ --lm_text), no dev/test sentence in --lm_text
  local out key x held=() opts=()
  out=$(lm_arpa)
  require "${data}/${train_set}/text" 0
  for x in $(printf '%s\n' ${dev_set} ${test_sets} | awk '!seen[$0]++'); do
    require "${data}/${x}/text" 0
    held+=(--held_out "${data}/${x}/text")
  done
  [[ -z ${lm_text} ]] || opts+=(--lm_text "${lm_text}")
  # A CER-scored corpus is Mandarin here (aishell, tiny_zh): its LM's words are characters (and the whole English
  # words of a code-switch text).
  [[ ${wer_char} != 1 ]] || opts+=(--char_lm)
  # shellcheck disable=SC2206  # lm_prune is a list
  [[ -z ${lm_prune} ]] || opts+=(--prune ${lm_prune})
  key=$(stamp_text text="$(file_sum "${data}/${train_set}/text")" lm_text="$(file_sum "${lm_text}")" \
        lm_order="${lm_order}" lm_prune="${lm_prune}" char="${wer_char}" text_case="${text_case}" \
        text_punctuation="${text_punctuation}" \
        held_out="$(for x in "${held[@]}"; do [[ ${x} == --* ]] || file_sum "${x}"; done | tr '\n' ' ')")
  if [[ -f ${out} ]] && stamp_ok "${out}.stamp" "${key}"; then
    log "stage 2: ${out} is up to date, skipping"
    return 0
  fi
  log "stage 2: ${lm_order}-gram LM from ${data}/${train_set}/text${lm_text:+ and ${lm_text}} -> ${out}"
  python3 -m wenet_udps.bin.build_lm --text "${data}/${train_set}/text" "${opts[@]}" "${held[@]}" \
    --order "${lm_order}" "${text_norm_opts[@]}" --out "${out}"
  stamp_write "${out}.stamp" "${key}"
}

# lm_tune EXP MODE: the LM weight and word score of ${avg} whose MODE WER on ${dev_set} is lowest (a grid of
# --lm_weights x --word_scores; attention_rescoring_lm's in <exp>/lm_tune/<dev>, joint_ctc_attention_lm's in
# <exp>/lm_tune/<dev>_joint); sets lm_weight and word_score. Dev only: test never chooses anything.
lm_tune() {
  local exp=$1 mode=$2 tune key w b out rate best=""
  tune=$1/lm_tune$(lm_suffix)/${dev_set}
  [[ ${mode} != joint_* ]] || tune+=_joint
  key=${avg_key}$'\n'$(stamp_text lm="$(file_sum "$(lm_file)")" lm_weights="${lm_weights}" \
        word_scores="${word_scores}" beam_size="${beam_size}" ctc_weight="$(lm_ctc_weight "${mode}")" \
        list="$(file_sum "${data}/${dev_set}/$(list_name)")" \
        audio="$(audio_sum "${data}/${dev_set}/$(list_name)")")
  if ! { [[ -f ${tune}/best ]] && stamp_ok "${tune}/.tune.stamp" "${key}"; }; then
    log "stage 5: tune the LM weight (${lm_weights}) and word score (${word_scores}) of ${mode} on ${dev_set}"
    python3 -m wenet_udps.bin.check_lm --lm "$(lm_file)" --text "${data}/${dev_set}/text"
    for w in ${lm_weights}; do
      for b in ${word_scores}; do
        out=${tune}/w${w}_b${b}
        lm_recognize "${exp}" "${dev_set}" "${out}" "${mode}" "${w}" "${b}" > /dev/null
        score_into "${out}/wer" "${data}/${dev_set}/text" "${out}/${mode}/text"
        rate=$(awk '/^Overall/ { print $3; exit }' "${out}/wer")
        log "stage 5: ${dev_set} ${mode} lm_weight ${w} word_score ${b}: ${rate} %"
        best=$(printf '%s\n%s %s %s\n' "${best}" "${rate}" "${w}" "${b}" | awk 'NF' | sort -g -k1,1 | head -n 1)
      done
    done
    write_atomic "${tune}/best" echo "${best}"
    stamp_write "${tune}/.tune.stamp" "${key}"
  fi
  read -r rate lm_weight word_score < "${tune}/best"
  log "stage 5: ${exp} ${mode}: lm_weight ${lm_weight}, word_score ${word_score} (${dev_set} ${rate} %)"
}

# lm_ctc_weight MODE: the CTC weight MODE decodes with (the joint modes have their own, --joint_ctc_weight).
lm_ctc_weight() {
  if [[ $1 == joint_* ]]; then echo "${joint_ctc_weight}"; else echo "${ctc_weight}"; fi
}

# lm_recognize EXP SET RESULT_DIR MODES LM_WEIGHT WORD_SCORE: recognize SET with ${avg} and the LM (MODES all joint
# or none: the two weigh CTC differently).
lm_recognize() {
  local device=cpu weights
  [[ -z ${gpus} ]] || device=cuda
  weights=(--ctc_weight "$(lm_ctc_weight "${4%% *}")")
  [[ $4 == joint_* ]] || weights+=(--reverse_weight "${reverse_weight}")
  # shellcheck disable=SC2086  # $4 is a list of modes
  CUDA_VISIBLE_DEVICES=${gpus%%,*} python3 -m wenet_udps.bin.recognize --config "$1/train.yaml" \
    --checkpoint "${avg}" --data_type "${data_type}" --test_data "${data}/$2/$(list_name)" --result_dir "$3" \
    --modes $4 --lm "$(lm_file)" --lm_weight "$5" --word_score "$6" --beam_size "${beam_size}" \
    "${weights[@]}" --batch_size "${decode_batch_size}" --device "${device}"
}

# lm_decode EXP: stage 5 with --lm true: EXP's weights tuned on dev, then every test set decoded in the *_lm modes
# (joint_ctc_attention_lm too when --decode_modes has joint_ctc_attention, with weights tuned on its own dev WER).
lm_decode() {
  require "$(lm_file)" 2
  lm_decode_modes "$1" "${lm_modes}" attention_rescoring_lm decode_lm
  [[ " ${decode_modes} " != *" joint_ctc_attention "* ]] \
    || lm_decode_modes "$1" joint_ctc_attention_lm joint_ctc_attention_lm decode_joint_lm
}

# lm_check_held_out: an LM that stage 2 built from text was checked for held-out sentences against the texts of the
# sets it was given then (its stamp's held_out); stage 5 decodes ${dev_set} and every test set with it, so each of
# their texts must be among them, else a set added after the LM was built (--test_sets) is decoded with an LM that
# may hold its sentences. A published LM (lm_unpack) has its own split, not checked here (docs/lm.md).
lm_check_held_out() {
  local stamp x sum
  [[ -z ${lm_names} ]] || return 0
  stamp=$(lm_arpa).stamp
  require "${stamp}" 2
  for x in $(printf '%s\n' ${dev_set} ${test_sets} | awk '!seen[$0]++'); do
    sum=$(file_sum "${data}/${x}/text")
    grep -q "^held_out=.*${sum}" "${stamp}" || die "stage 5: $(lm_arpa) was built (stage 2) without checking" \
      "${data}/${x}/text for held-out sentences (that text is new, or was not among the sets then): run stage 2" \
      "again with these --test_sets, which rebuilds it"
  done
}

# lm_decode_modes EXP MODES TUNE_MODE STAMP: MODES decoded on every test set with the LM weights tuned for TUNE_MODE,
# into <set>/<mode><lm_suffix> (decoded beside them, then moved in: an interrupted decode leaves the old results).
lm_decode_modes() {
  local exp=$1 modes=$2 x key mode out lm_weight word_score suffix
  suffix=$(lm_suffix)
  lm_tune "${exp}" "$3"
  for x in ${test_sets}; do
    key=${avg_key}$'\n'$(stamp_text lm="$(file_sum "$(lm_file)")" lm_weight="${lm_weight}" \
          word_score="${word_score}" beam_size="${beam_size}" ctc_weight="$(lm_ctc_weight "$3")" \
          list="$(file_sum "${data}/${x}/$(list_name)")" \
          audio="$(audio_sum "${data}/${x}/$(list_name)")")
    # shellcheck disable=SC2086  # modes is a list
    if decoded_alike "${exp}/${x}" "${suffix}" "${exp}/${x}/.$4${suffix}.stamp" "${key}" ${modes}; then
      log "stage 5: ${exp}/${x} decoded in ${modes} with the same LM and weights, skipping"
    else
      log "stage 5: decode ${x} with ${avg} and $(lm_file) (${modes})"
      out=${exp}/${x}/.$4${suffix}.partial
      decode_begin "${exp}/${x}/.$4${suffix}.stamp" "${out}"
      lm_recognize "${exp}" "${x}" "${out}" "${modes}" "${lm_weight}" "${word_score}"
      # shellcheck disable=SC2086  # modes is a list
      decode_finish "${exp}/${x}" "${suffix}" "${exp}/${x}/.$4${suffix}.stamp" "${key}" "${out}" ${modes}
    fi
    for mode in ${modes}; do
      out=${exp}/${x}/${mode}${suffix}
      score_into "${out}/wer" "${data}/${x}/text" "${out}/text" --v=1
      log "stage 5: ${exp} ${x} ${mode}${suffix}: $(grep '^Overall' "${out}/wer")"
    done
  done
}
