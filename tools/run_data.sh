#!/usr/bin/env bash
# run.sh's data stages, -1 to 3. Each skips its work when its stamp file (tools/run_lib.sh) records the same inputs
# and options. Source after tools/run_setup.sh; the functions read run.sh's option variables.

stage_download() {  # stage -1: recipes/<corpus>/download.sh (tiny_* synthesise with espeak-ng)
  log "stage -1: download ${corpus} to ${download_dir}"
  if [[ ${corpus} == fsdd && -n ${fsdd_dir} ]]; then
    # shellcheck disable=SC2086  # download_opts is a list of options
    bash recipes/fsdd/download.sh --fsdd_dir "${fsdd_dir}" ${download_opts} "${download_dir}"
  else
    # shellcheck disable=SC2086
    bash "recipes/${corpus}/download.sh" ${download_opts} "${download_dir}"
  fi
}

stage_prepare() {  # stage 0: wav.scp and text per set (recipes/<corpus>/prepare.sh), then the texts normalised
  local source_dir key norm_key sizes
  # Canonical paths: ../shared/x and /work/shared/x (or a symlink to it) name one source, so no needless re-prepare.
  source_dir=$(canonical_path "${download_dir}")
  # The corpus' published sizes, which prepare.sh holds the copy to: a dir prepared before they were checked is redone.
  sizes=$(python3 -c "import sys; from wenet_udps.corpora.common import published_sizes as p
print(p(sys.argv[1]))" "${corpus}")
  key=$(stamp_text corpus="${corpus}" download_dir="${source_dir}" fsdd_dir="${fsdd_dir:+$(canonical_path "${fsdd_dir}")}" \
        prepare_opts="${prepare_opts}" ${sizes:+"published=${sizes}"})
  # Texts normalised under another declaration are prepared again (upper case cannot be undone); a dir prepared
  # before normalisation existed is normalised where it is.
  norm_key=$(stamp_text text_case="${text_case}" text_punctuation="${text_punctuation}")
  if stamp_ok "${data}/.stage0.stamp" "${key}" \
      && { [[ ! -f ${data}/.text_norm.stamp ]] || stamp_ok "${data}/.text_norm.stamp" "${norm_key}"; }; then
    log "stage 0: ${data} already prepared from the same source and options, skipping"
  else
    if stamp_ok "${data}/.stage0.stamp" "${key}"; then
      log "stage 0: preparing ${data} again ($(stamp_change "${data}/.text_norm.stamp" "${norm_key}"))"
    elif [[ -f ${data}/.stage0.stamp ]]; then
      log "stage 0: preparing ${data} again ($(stamp_change "${data}/.stage0.stamp" "${key}"))"
    fi
    log "stage 0: prepare wav.scp and text in ${data}"
    rm -f "${data}/.text_norm.stamp"
    # shellcheck disable=SC2086  # prepare_opts is a list of options
    bash "recipes/${corpus}/prepare.sh" ${prepare_opts} "${download_dir}" "${data}"
    stamp_write "${data}/.stage0.stamp" "${key}"
  fi
  if ! stamp_ok "${data}/.text_norm.stamp" "${norm_key}"; then
    log "stage 0: normalise the transcripts (case ${text_case}, punctuation ${text_punctuation})"
    python3 tools/normalise_text.py "${text_norm_opts[@]}" "${data}"/*/text
    stamp_write "${data}/.text_norm.stamp" "${norm_key}"
  fi
}

# pick_units: sets train_set (settings.sh's fallback when only that set was prepared), units, bpemodel and cmvn.
pick_units() {
  if [[ -z ${given[train_set]} && -n ${train_set_fallback} && ! -f ${data}/${train_set}/wav.scp \
        && -f ${data}/${train_set_fallback}/wav.scp ]]; then
    log "${data}/${train_set} is not prepared but ${data}/${train_set_fallback} is: training on" \
        "${train_set_fallback} (say --train_set ${train_set_fallback} to pick it yourself)"
    train_set=${train_set_fallback}
  fi
  if [[ ${token_type} == char ]]; then
    units=${data}/dict/lang_char.txt; bpemodel=
  else
    units=${data}/lang_bpe/${train_set}_${bpe_mode}${nbpe}_units.txt; bpemodel=${units%_units.txt}
  fi
  cmvn=${data}/${train_set}/global_cmvn
}

stage_cmvn() {  # stage 1: global CMVN statistics of the training set
  local key
  require "${data}/${train_set}/wav.scp" 0
  key=$(stamp_text wav_scp="$(file_sum "${data}/${train_set}/wav.scp")" \
        segments="$(file_sum "${data}/${train_set}/segments")" \
        features="$(conf_sum "${config}" feats_type fbank_conf mfcc_conf resample_conf)" \
        tool="$(file_sum tools/compute_cmvn_stats.py)")  # stats a fixed tool would make otherwise are remade
  if [[ -f ${cmvn} ]] && stamp_ok "${cmvn}.stamp" "${key}"; then
    log "stage 1: ${cmvn} is up to date, skipping"
  else
    log "stage 1: global CMVN stats of ${train_set} -> ${cmvn}"
    python3 tools/compute_cmvn_stats.py --num_workers "${num_workers}" --train_config "${config}" \
      --in_scp "${data}/${train_set}/wav.scp" --out_cmvn "${cmvn}"
    stamp_write "${cmvn}.stamp" "${key}"
  fi
}

stage_units() {  # stage 2: characters (dict/lang_char.txt) or a sentencepiece BPE model
  local key
  require "${data}/${train_set}/text" 0
  key=$(stamp_text text="$(file_sum "${data}/${train_set}/text")" token_type="${token_type}" \
        bpe_mode="${bpe_mode}" nbpe="${nbpe}" text_case="${text_case}" text_punctuation="${text_punctuation}")
  if [[ -f ${units} ]] && stamp_ok "${units}.stamp" "${key}"; then
    log "stage 2: ${units} is up to date, skipping"
  elif [[ ${token_type} == char ]]; then
    log "stage 2: character units -> ${units}"
    python3 tools/make_char_units.py "${text_norm_opts[@]}" "${data}/${train_set}/text" "${units}"
    stamp_write "${units}.stamp" "${key}"
  else
    log "stage 2: sentencepiece ${bpe_mode} ${nbpe} -> ${bpemodel}.model, ${units}"
    python3 tools/train_bpe.py --text "${data}/${train_set}/text" --model_prefix "${bpemodel}" \
      --bpe_mode "${bpe_mode}" --nbpe "${nbpe}" --units "${units}" "${text_norm_opts[@]}"
    stamp_write "${units}.stamp" "${key}"
  fi
}

stage_lists() {  # stage 3: data.list (raw) or tar shards per set
  local x out key segments
  # shellcheck disable=SC2046  # the sets are words
  for x in $(printf '%s\n' ${train_set} ${dev_set} ${test_sets} $([[ ${hotwords} == false ]] || hotword_sets) \
             | awk '!seen[$0]++'); do
    require "${data}/${x}/wav.scp" 0
    out=${data}/${x}/$(list_name)
    key=$(stamp_text wav_scp="$(file_sum "${data}/${x}/wav.scp")" text="$(file_sum "${data}/${x}/text")" \
          segments="$(file_sum "${data}/${x}/segments")" data_type="${data_type}" \
          num_utts_per_shard="${num_utts_per_shard}")
    if [[ -f ${out} ]] && stamp_ok "${out}.stamp" "${key}"; then
      log "stage 3: ${out} is up to date, skipping"
      continue
    fi
    log "stage 3: ${data_type} list of ${x} -> ${out}"
    segments=(); [[ -f ${data}/${x}/segments ]] && segments=(--segments "${data}/${x}/segments")
    if [[ ${data_type} == raw ]]; then
      python3 tools/make_raw_list.py "${segments[@]}" "${data}/${x}/wav.scp" "${data}/${x}/text" "${out}"
    else
      python3 tools/make_shard_list.py "${segments[@]}" --num_utts_per_shard "${num_utts_per_shard}" \
        --num_threads "${num_workers}" "${data}/${x}/wav.scp" "${data}/${x}/text" "${data}/${x}/shards" "${out}"
    fi
    stamp_write "${out}.stamp" "${key}"
  done
}
