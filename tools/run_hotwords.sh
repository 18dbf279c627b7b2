#!/usr/bin/env bash
# run.sh --hotwords true (aishell, librispeech): the public biasing test sets, downloaded in stage -1
# (recipes/<corpus>/download_hotwords.sh into <download_dir>/biasing), prepared in stage 0
# (wenet_udps/corpora/biasing_sets.py), listed in stage 3, and in stage 5 decoded with each list in the modes that
# take hotwords, the decode without a list and the one with it both scored by tools/compute-biased-wer.py; stage 7's
# RESULTS.md shows them side by side (wenet_udps/results/biasing.py). Source after tools/run_eval.sh.
#
#   aishell: SeACo-Paraformer's subsets hotword_dev, hotword_test, each with one list for the set: all (its
#            hotword.txt) and r1 (r1-hotword.txt); recognize --context_file, compute-biased-wer --biasing_list.
#   librispeech: test_clean, test_other with Le et al.'s per-utterance lists of 100 500 1000 2000 words;
#            recognize --context_list <set>/biasing/list_N, scored on each reference's rare words (rare_N) with
#            compute-biased-wer --biasing_lists, as their score.py scores.
# A listed phrase the model's units cannot spell (a character the training transcripts lack) is dropped from the
# decode (recognize --context_unspellable drop; the count is in decode.info as context_dropped) and still scored.
# Results: <exp>/<set>/hot_<list>/<mode>/{text,decode.info,biased_wer} (decoded with the list) and
# baseline_biased_wer beside them (<exp>/<set>/<mode>/text, decoded without, scored on the same list).

# hotword_sets: the sets with biasing lists; hotword_lists: the lists of each.
hotword_sets() {
  if [[ ${corpus} == aishell ]]; then echo hotword_dev hotword_test; else echo test_clean test_other; fi
}
hotword_lists() { if [[ ${corpus} == aishell ]]; then echo all r1; else echo 100 500 1000 2000; fi; }

check_hotword_options() {
  one_of hotwords "${hotwords}" true false
  if [[ ${hotwords} == false ]]; then
    ! given context_score || die "--context_score weighs the lists of --hotwords true, and --hotwords is false"
    return 0
  fi
  [[ ${corpus} == aishell || ${corpus} == librispeech ]] || die "--hotwords true: public biasing test sets exist" \
    "for aishell (SeACo-Paraformer's hotword subsets) and librispeech (Le et al.'s lists), not for ${corpus}"
  [[ ${corpus} == aishell || ${data_type} == raw ]] || die "--hotwords true decodes librispeech with a list per" \
    "utterance (recognize --context_list), which reads the keys of a raw data.list: use --data_type raw"
  [[ ${context_score} =~ ^[0-9]*\.?[0-9]+$ ]] || die "--context_score takes a number in (0, 20], got '${context_score}'"
}

stage_hotwords_download() {  # stage -1
  log "stage -1: download the ${corpus} biasing lists to ${download_dir}/biasing"
  bash "recipes/${corpus}/download_hotwords.sh" "${download_dir}/biasing"
}

stage_hotwords_prepare() {  # stage 0: the biasing sets and lists (after stage_prepare)
  local src=${download_dir}/biasing key partial=false x
  [[ -d ${src} ]] || die "${src} not found: the lists are downloaded by stage -1 with --hotwords true"
  [[ " ${prepare_opts} " != *" --allow_partial true "* ]] || partial=true
  key=$(stamp_text lists="$(find "${src}" -type f | LC_ALL=C sort | xargs md5sum | md5sum | cut -c1-32)" \
        texts="$(for x in dev test test_clean test_other; do file_sum "${data}/${x}/text"; done | tr '\n' ' ')" \
        text_case="${text_case}" allow_partial="${partial}")
  if stamp_ok "${data}/.biasing.stamp" "${key}"; then
    log "stage 0: the biasing lists in ${data} are up to date, skipping"
    return 0
  fi
  log "stage 0: biasing sets and lists from ${src} -> ${data} ($(hotword_sets))"
  python3 -m wenet_udps.corpora.biasing_sets "${corpus}" "${src}" "${data}" --case "${text_case}" \
    --allow_partial "${partial}"
  stamp_write "${data}/.biasing.stamp" "${key}"
}

# hotword_list_args SET LIST: sets decode_list_args (recognize) and score_list_args (compute-biased-wer).
hotword_list_args() {
  local dir=${data}/$1/biasing
  if [[ ${corpus} == aishell ]]; then
    decode_list_args=(--context_file "${dir}/list_$2"); score_list_args=(--biasing_list "${dir}/list_$2")
  else
    decode_list_args=(--context_list "${dir}/list_$2"); score_list_args=(--biasing_lists "${dir}/rare_$2")
  fi
  require "${decode_list_args[1]}" 0
  require "${score_list_args[1]}" 0
}

# biased_score_into OUT REF HYP: compute-biased-wer of HYP against REF and ${score_list_args}, whole or not at all.
biased_score_into() {
  write_atomic "$1" python3 tools/compute-biased-wer.py --char="${wer_char}" "${text_norm_opts[@]}" \
    "${score_list_args[@]}" "$2" "$3"
}

# hotword_decode EXP: stage 5 with --hotwords true (after the plain decodes of the test sets).
hotword_decode() {
  local exp=$1 x name modes mode joint plain key out
  # the modes that take hotwords, without the LM ones (their LM weights are tuned without lists)
  modes=$(tr ' ' '\n' <<< "${decode_modes}" | grep -v -x -e ctc_greedy_search -e attention | grep -v '_lm$' \
          | tr '\n' ' ' || true)
  [[ -n ${modes// } ]] || die "--hotwords true: none of --decode_modes (${decode_modes}) takes hotwords" \
    "(ctc_greedy_search and attention do not)"
  for x in $(hotword_sets); do
    [[ " ${test_sets} " == *" ${x} "* ]] || decode_set "${exp}" "${x}"   # the same set without a list
    for name in $(hotword_lists); do
      hotword_list_args "${x}" "${name}"
      out=${exp}/${x}/hot_${name}
      key=${avg_key}$'\n'$(stamp_text list="$(file_sum "${data}/${x}/$(list_name)")" \
            audio="$(audio_sum "${data}/${x}/$(list_name)")" modes="${modes}" \
            context="$(file_sum "${decode_list_args[1]}")" context_score="${context_score}" \
            beam_size="${beam_size}" ctc_weight="${ctc_weight}" joint_ctc_weight="${joint_ctc_weight}" \
            reverse_weight="${reverse_weight}" decoding_chunk_size="${decoding_chunk_size}" \
            num_decoding_left_chunks="${num_decoding_left_chunks}")
      # shellcheck disable=SC2086  # modes is a list
      if decoded_alike "${out}" "" "${out}/.decode.stamp" "${key}" ${modes}; then
        log "stage 5: ${out} decoded with the same checkpoint, list and options, skipping decoding"
      else
        log "stage 5: decode ${x} with ${avg} and the list ${decode_list_args[1]} (${modes})"
        decode_begin "${out}/.decode.stamp" "${out}/.decode.partial"
        plain=$(tr ' ' '\n' <<< "${modes}" | grep -v '^joint_' | tr '\n' ' ' || true)
        joint=$(tr ' ' '\n' <<< "${modes}" | grep '^joint_' | tr '\n' ' ' || true)
        local ctc_arg=()
        [[ " ${plain} " != *" attention_rescoring "* ]] \
          || ctc_arg=(--ctc_weight "${ctc_weight}" --reverse_weight "${reverse_weight}")
        [[ -z ${plain// } ]] || stage5_recognize "${exp}" "${x}" "${out}/.decode.partial" "${plain}" \
          ${ctc_arg[@]+"${ctc_arg[@]}"} "${decode_list_args[@]}" --context_score "${context_score}" \
          --context_unspellable drop
        [[ -z ${joint// } ]] || stage5_recognize "${exp}" "${x}" "${out}/.decode.partial" "${joint}" \
          --ctc_weight "${joint_ctc_weight}" "${decode_list_args[@]}" --context_score "${context_score}" \
          --context_unspellable drop
        # shellcheck disable=SC2086  # modes is a list
        decode_finish "${out}" "" "${out}/.decode.stamp" "${key}" "${out}/.decode.partial" ${modes}
      fi
      for mode in ${modes}; do
        biased_score_into "${out}/${mode}/biased_wer" "${data}/${x}/text" "${out}/${mode}/text"
        biased_score_into "${out}/${mode}/baseline_biased_wer" "${data}/${x}/text" "${exp}/${x}/${mode}/text"
        log "stage 5: ${exp} ${x} ${mode} list ${name}: $(grep '^B-WER' "${out}/${mode}/baseline_biased_wer")" \
            "without it, $(grep '^B-WER' "${out}/${mode}/biased_wer") with it"
      done
    done
  done
}
