#!/usr/bin/env bash
# run.sh's stages 5-7: average and decode, export, results. Each skips its work when its stamp file records the same
# checkpoints and options. Source after tools/run_setup.sh; the functions read run.sh's option variables.

# averaged EXP: sets avg (the averaged checkpoint, named by how many it holds), avg_k and avg_key (its inputs).
averaged() {
  local exp=$1 n
  n=$(find "${exp}" -maxdepth 1 -name 'epoch_*.yaml' | wc -l)
  [[ ${n} -gt 0 ]] || die "missing ${exp}/epoch_N.pt checkpoints (made by stage 4): run with --stage 4"
  avg_k=$(( average_num < n ? average_num : n ))
  avg=${exp}/avg_${avg_k}.pt
  # The epoch YAMLs record each checkpoint's SHA-256, and stay when --keep_checkpoints averaged deletes the .pt.
  avg_key=$(stamp_text average_mode="${average_mode}" average_num="${avg_k}" \
            checkpoints="$(cd "${exp}" && cat epoch_*.yaml | md5sum | cut -c1-32)")
  if [[ ${avg_k} -lt ${average_num} ]]; then
    log "${exp} has ${n} epoch checkpoints, fewer than --average_num ${average_num}: using ${avg##*/}"
  fi
}
# parity_set: the test set of the export parity check and the attention plots: the first whose name starts with
# "test", else the first.
parity_set() {
  local x
  for x in ${test_sets}; do [[ ${x} == test* ]] && { echo "${x}"; return 0; }; done
  echo "${test_sets%% *}"
}

# avg_stamp_ok FILE KEY: stamp_ok for a stamp of something made from an averaged checkpoint, whose KEY carries
# its avg_sha256 line (avg_made); a stamp written before stamps carried it is redone, saying so.
avg_stamp_ok() {
  [[ -f $1 ]] || return 1
  if ! grep -q '^avg_sha256=' "$1"; then
    log "$1 records no SHA-256 of the averaged checkpoint (written before stamps carried it): redoing"
    return 1
  fi
  stamp_ok "$1" "$2"
}

# avg_made: avg_key (the averaging's inputs) with the SHA-256 of ${avg} as it is now (sets avg_sha), the key of
# everything made from it: an avg_N.pt replaced (averaged again by hand from other epochs) is another model.
avg_made() {
  avg_sha=$(sha256sum < "${avg}" | cut -c1-64)
  avg_key+=$'\n'"avg_sha256=${avg_sha}"
}

average_run() {  # average_run EXP: stage 5's averaged checkpoint of EXP (sets avg, avg_k, avg_key, avg_sha)
  local avg_args
  averaged "$1"
  if [[ -f ${avg} ]] && avg_stamp_ok "${avg}.stamp" \
      "${avg_key}"$'\n'"avg_sha256=$(sha256sum < "${avg}" | cut -c1-64)"; then
    log "stage 5: ${avg} is up to date, skipping averaging"
    avg_made
  else
    compgen -G "$1/epoch_*.pt" > /dev/null || die "stage 5: $1 has no epoch_N.pt left to average" \
      "(--keep_checkpoints averaged deleted them): keep the earlier --average_num/--average_mode or retrain"
    log "stage 5: average ${avg_k} checkpoints (${average_mode}) -> ${avg}"
    avg_args=(--dst_model "${avg}" --src_path "$1" --num "${avg_k}")
    [[ ${average_mode} == val_best ]] && avg_args+=(--val_best)
    rm -f "${avg}.stamp"
    python3 -m wenet_udps.bin.average_model "${avg_args[@]}"
    avg_made
    stamp_write "${avg}.stamp" "${avg_key}"
  fi
  [[ ${keep_checkpoints} == all ]] || prune_checkpoints "$1"
}

# Stage 5's decodes (decode_set, lm_decode_modes, hotword_decode) go through these three: a decode is skipped only
# when decoded_alike, and made by decode_begin, a recognize into PARTIAL (beside the results), and decode_finish.
# decoded_alike DIR SUFFIX STAMP KEY MODE...: STAMP holds KEY (avg_made's key and the options asked), and each
# DIR/<MODE><SUFFIX>/decode.info records it too (decoded_as, decode_finish), the averaged checkpoint's SHA-256 and
# the references decoded (wenet_udps.scoring.references; one decoded before they were recorded cannot be scored).
decoded_alike() {
  local dir=$1 suffix=$2 stamp=$3 key=$4 digest mode info
  shift 4
  if ! avg_stamp_ok "${stamp}" "${key}"; then   # what changed since, in one line (audio=: a file rewritten)
    [[ ! -f ${stamp} ]] || ! grep -q '^avg_sha256=' "${stamp}" \
      || log "stage 5: ${dir}: decoding again, it was decoded with other inputs ($(stamp_change "${stamp}" "${key}"))"
    return 1
  fi
  digest=$(md5sum <<< "${key}" | cut -c1-32)
  for mode in "$@"; do
    info=${dir}/${mode}${suffix}/decode.info
    grep -qx "decoded_as: ${digest}" "${info}" 2> /dev/null && grep -qx "sha256: ${avg_sha}" "${info}" \
      && grep -q '^refs_sha256:' "${info}" || return 1
  done
}

# decode_begin STAMP PARTIAL: the old stamp goes first (a decode stopped from here on is never taken for done), and
# any earlier partial decode.
decode_begin() {
  rm -f "$1"
  rm -rf "$2"
}

# decode_finish DIR SUFFIX STAMP KEY PARTIAL MODE...: each PARTIAL/<MODE> (recognize's whole output) records
# decoded_as (KEY's md5) in its decode.info (recognize writes one; without it, never decoded_alike) and replaces
# DIR/<MODE><SUFFIX> with its score; then STAMP holds KEY.
decode_finish() {
  local dir=$1 suffix=$2 stamp=$3 key=$4 partial=$5 digest mode
  shift 5
  digest=$(md5sum <<< "${key}" | cut -c1-32)
  for mode in "$@"; do
    [[ ! -f ${partial}/${mode}/decode.info ]] || write_atomic "${partial}/${mode}/decode.info" \
      awk -v d="decoded_as: ${digest}" '{ print } END { print d }' "${partial}/${mode}/decode.info"
    rm -rf "${dir:?}/${mode}${suffix}"
    mv "${partial}/${mode}" "${dir}/${mode}${suffix}"
  done
  rm -rf "${partial}"
  stamp_write "${stamp}" "${key}"
}

# score_into WER REF HYP [compute-wer options...]: WER scores HYP against REF (tools/compute-wer.py, which records
# both files' SHA-256 in its first lines), written whole or not at all: into WER.partial, renamed over WER when
# compute-wer has succeeded; when it fails, the stage stops and WER is not written.
score_into() {
  local wer=$1 ref=$2 hyp=$3
  shift 3
  if ! python3 tools/compute-wer.py --char="${wer_char}" "${text_norm_opts[@]}" "$@" "${ref}" "${hyp}" \
      > "${wer}.partial"; then
    rm -f "${wer}.partial"
    die "scoring ${hyp} against ${ref} failed (compute-wer.py's message above): ${wer} not written"
  fi
  mv -f "${wer}.partial" "${wer}"
}

decode_set() {  # decode_set EXP SET: decode SET with ${avg} in every mode (unless done alike before), then score
  local exp=$1 x=$2 result_dir=$1/$2 key mode modes joint ctc_arg partial
  require "${data}/${x}/$(list_name)" 3
  key=${avg_key}$'\n'$(stamp_text list="$(file_sum "${data}/${x}/$(list_name)")" \
        audio="$(audio_sum "${data}/${x}/$(list_name)")" modes="${decode_modes}" \
        beam_size="${beam_size}" ctc_weight="${ctc_weight}" reverse_weight="${reverse_weight}" \
        decoding_chunk_size="${decoding_chunk_size}" num_decoding_left_chunks="${num_decoding_left_chunks}")
  # (with a joint mode only, so that the stamps of decodes without one stay valid)
  [[ " ${decode_modes}" != *" joint_"* ]] || key+=$'\n'$(stamp_text joint_ctc_weight="${joint_ctc_weight}")
  # shellcheck disable=SC2086  # decode_modes is a list
  if decoded_alike "${result_dir}" "" "${result_dir}/.decode.stamp" "${key}" ${decode_modes}; then
    log "stage 5: ${result_dir} decoded with the same checkpoint and options, skipping decoding"
  else
    log "stage 5: decode ${x} with ${avg} (${decode_modes})"
    partial=${result_dir}/.decode.partial
    decode_begin "${result_dir}/.decode.stamp" "${partial}"
    # The joint modes weigh CTC with their own --ctc_weight (--joint_ctc_weight): a recognize of their own.
    modes=$(tr ' ' '\n' <<< "${decode_modes}" | grep -v '^joint_' | tr '\n' ' ' || true)
    joint=$(tr ' ' '\n' <<< "${decode_modes}" | grep '^joint_' | tr '\n' ' ' || true)
    # recognize refuses an option that would do nothing: the rescoring weights go only with attention_rescoring.
    ctc_arg=()
    [[ " ${modes} " != *" attention_rescoring "* ]] \
      || ctc_arg=(--ctc_weight "${ctc_weight}" --reverse_weight "${reverse_weight}")
    # shellcheck disable=SC2086  # modes is a list
    [[ -z ${modes// } ]] || stage5_recognize "${exp}" "${x}" "${partial}" "${modes}" ${ctc_arg[@]+"${ctc_arg[@]}"}
    [[ -z ${joint// } ]] || stage5_recognize "${exp}" "${x}" "${partial}" "${joint}" --ctc_weight "${joint_ctc_weight}"
    # shellcheck disable=SC2086  # decode_modes is a list
    decode_finish "${result_dir}" "" "${result_dir}/.decode.stamp" "${key}" "${partial}" ${decode_modes}
  fi
  for mode in ${decode_modes}; do
    score_into "${result_dir}/${mode}/wer" "${data}/${x}/text" "${result_dir}/${mode}/text" --v=1
    log "stage 5: ${exp} ${x} ${mode}: $(grep '^Overall' "${result_dir}/${mode}/wer")"
  done
}

# stage5_recognize EXP SET RESULT_DIR MODES [OPTION...]: recognize SET with ${avg} in MODES; the default chunk size
# (-1) is left to the model (full context, or its static_chunk_size).
stage5_recognize() {
  local exp=$1 x=$2 result_dir=$3 modes=$4 device=cpu extra=()
  shift 4
  [[ -z ${gpus} ]] || device=cuda
  [[ ${decoding_chunk_size} == -1 ]] || extra+=(--decoding_chunk_size "${decoding_chunk_size}")
  # shellcheck disable=SC2086  # modes is a list
  CUDA_VISIBLE_DEVICES=${gpus%%,*} python3 -m wenet_udps.bin.recognize --config "${exp}/train.yaml" \
    --checkpoint "${avg}" --data_type "${data_type}" --test_data "${data}/${x}/$(list_name)" \
    --result_dir "${result_dir}" --modes ${modes} --beam_size "${beam_size}" \
    --batch_size "${decode_batch_size}" --num_decoding_left_chunks "${num_decoding_left_chunks}" \
    --device "${device}" ${extra[@]+"${extra[@]}"} "$@"
}

stage_decode() {  # stage 5: average each run's checkpoints, decode and score every test set
  local run exp x
  [[ ${lm} == false ]] || lm_check_held_out   # before any decoding: every set the LM decodes was checked against it
  for run in "${runs[@]}"; do
    exp=$(run_exp "${run}")
    require "${exp}/final.pt" 4
    lock_exp "${exp}"   # no averaging or decoding of checkpoints a training is still writing
    average_run "${exp}"
    for x in ${test_sets}; do decode_set "${exp}" "${x}"; done
    [[ ${lm} == false ]] || lm_decode "${exp}"
    [[ ${hotwords} == false ]] || hotword_decode "${exp}"
  done
}

stage_export() {  # stage 6: TorchScript/ONNX and sherpa-onnx exports of each averaged model, parity checked
  local run exp parity parity_list key problem
  parity=$(parity_set)
  for run in "${runs[@]}"; do
    exp=$(run_exp "${run}")
    averaged "${exp}"
    require "${avg}" 5
    lock_exp "${exp}"
    avg_made
    parity_list=${data}/${parity}/$(list_name)
    require "${parity_list}" 3
    key=${avg_key}$'\n'$(stamp_text parity_list="$(file_sum "${parity_list}")" \
        audio="$(audio_sum "${parity_list}")" formats="wenet sherpa-onnx")
    if avg_stamp_ok "${exp}/export/.export.stamp" "${key}"; then
      # the sherpa-onnx folder verified as sherpa_decode verifies it: a file deleted or changed is exported again
      problem=$(python3 -c 'import sys; from wenet_udps.export.sherpa_runtime import export_problem
print(export_problem(sys.argv[1]) or "")' "${exp}/sherpa")
      if [[ -z ${problem} ]]; then
        log "stage 6: ${exp}/export is up to date, skipping"
        continue
      fi
      log "stage 6: ${exp}/sherpa is not one whole export (${problem}): exporting again"
    fi
    rm -f "${exp}/export/.export.stamp"
    log "stage 6: export ${avg} to TorchScript and ONNX; parity checked on ${parity}"
    python3 -m wenet_udps.bin.export --config "${exp}/train.yaml" --checkpoint "${avg}" \
      --output_dir "${exp}/export" --test_data "${parity_list}" --data_type "${data_type}"
    log "stage 6: export ${avg} for sherpa-onnx -> ${exp}/sherpa"
    python3 -m wenet_udps.bin.export --format sherpa-onnx --config "${exp}/train.yaml" --checkpoint "${avg}" \
      --output_dir "${exp}/sherpa" --test_data "${parity_list}" --data_type "${data_type}"
    stamp_write "${exp}/export/.export.stamp" "${key}"
  done
}

# sherpa_decode_all: sherpa-onnx (stage 6's export) on every test set, before the table so that it has their
# columns: fp32 and int8, offline and (streaming confs) streaming. RTF: one stream, one thread.
sherpa_decode_all() {
  local run exp x model prec name out opts
  for run in "${runs[@]}"; do
    exp=$(run_exp "${run}")
    [[ -f ${exp}/sherpa/model.onnx ]] || continue
    for x in ${test_sets}; do
      for model in model model-streaming; do
        [[ -f ${exp}/sherpa/${model}.onnx ]] || continue
        for prec in fp32 int8; do
          name=sherpa${model#model}_${prec}; out=${exp}/${x}/${name}   # sherpa_fp32, sherpa-streaming_int8, ...
          opts=(); [[ ${prec} == int8 ]] && opts+=(--int8); [[ ${model} == model-streaming ]] && opts+=(--streaming)
          rm -f "${out}/wer"
          python3 -m wenet_udps.bin.sherpa_decode --config "${exp}/train.yaml" --export_dir "${exp}/sherpa" \
            --wav_scp "${data}/${x}/wav.scp" --result_dir "${out}" "${opts[@]}" > /dev/null
          score_into "${out}/wer" "${data}/${x}/text" "${out}/text" --v=1
          log "stage 7: ${exp} ${x} ${name}: $(grep '^Overall' "${out}/wer"), $(cat "${out}/rtf")"
        done
      done
    done
  done
}

# plot_first_seeds: per layer, the attention weights of one utterance of the parity set, and the mean attention
# entropy per head, of each variant's first-seed model (their averaged checkpoints must have the same name).
plot_first_seeds() {
  local look=() look_ckpt= udps exp parity
  for udps in ${variants}; do
    exp=$(run_exp "${udps}:$(first_seed)")
    compgen -G "${exp}/epoch_*.yaml" > /dev/null || continue
    averaged "${exp}"
    [[ ${#look[@]} -eq 0 || ${avg##*/} == "${look_ckpt}" ]] || continue
    look_ckpt=${avg##*/}
    [[ -f ${avg} ]] && look+=("${exp}")
  done
  [[ ${#look[@]} -gt 0 ]] || return 0
  parity=$(parity_set)
  require "${data}/${parity}/$(list_name)" 3
  python3 -m wenet_udps.bin.plot_attention --exp_dirs "${look[@]}" --checkpoint "${look_ckpt}" \
    --test_data "${data}/${parity}/$(list_name)" --data_type "${data_type}" --out_dir "$1/plots"
}

stage_results() {  # stage 7: sherpa-onnx scores, RESULTS.md (one row per model; paired tests with --seeds) and plots
  local results_root peers=()
  results_root=$(dirname "${exp_prefix}")
  log "stage 7: results table and plots for ${results_root}"
  sherpa_decode_all
  # Other toolkits' published results on this split, where settings.sh names them, in a table of their own.
  [[ -z ${peer_results} ]] || peers=(--peer_results "${peer_results}")
  # The thread count that RESULTS.md records (provenance) is the trainings' on the CPU.
  OMP_NUM_THREADS=${cpu_threads} python3 tools/collect_results.py --exp_dir "${results_root}" \
    --out "${results_root}/RESULTS.md" --plots_dir "${results_root}/plots" \
    --metric "$([[ ${wer_char} == 1 ]] && echo CER || echo WER)" --data_dir "${data}" --wer_char "${wer_char}" \
    "${text_norm_opts[@]}" "${peers[@]}"   # (what score_into scored with: collect_results refuses other scores)
  plot_first_seeds "${results_root}"
}
