#!/usr/bin/env bash
# wenet_udps: the stage-by-stage driver for every corpus (WeNet's run.sh, one copy for all recipes).
#
#   bash run.sh                                   # the main job: tiny_zh on CPU, scaled-dot vs UDPS, table at the end
#   bash run.sh --corpus aishell --download_dir /data/aishell --gpus 0,1,2,3 --stage -1 --stop_stage 7
#   bash run.sh --corpus librispeech --config conf/librispeech/train_conformer.yaml --att_udps true --stage 4
#
# Stages: -1 download, 0 prepare wav.scp/text, 1 CMVN stats, 2 units / BPE model, 3 data.list or shards,
#          4 train, 5 average + decode + score, 6 export, 7 results table and plots.
# Every stage logs with a timestamp, can be rerun on its own (--stage N --stop_stage N) and skips work already done.
set -euo pipefail
cd "$(dirname "$0")"
. tools/log.sh

corpus=tiny_zh          # a folder of recipes/: tiny_zh tiny_en fsdd aishell librispeech
stage=-1                # first stage to run
stop_stage=7            # last stage to run
config=                 # training YAML; empty: the corpus' default_config (recipes/<corpus>/settings.sh)
att_udps=both           # true | false | both (train and compare a scaled-dot and a UDPS model)
dir=                    # experiment dir prefix; empty: exp/<corpus>/<config name>; _scaled_dot / _udps are appended
data=                   # data dir; empty: data/<corpus>
download_dir=           # where stage -1 downloads and stage 0 reads; empty: downloads/<corpus>
fsdd_dir=               # fsdd only: a local copy of FSDD's recordings/ (skips the download)
prepare_opts=           # extra options for recipes/<corpus>/prepare.sh, e.g. "--num_train 100" (tiny_*, fsdd)
data_type=raw           # raw (data.list) | shard (tar shards)
num_utts_per_shard=1000 # shard only
num_nodes=1             # machines taking part in training
node_rank=0             # this machine's rank (0 .. num_nodes-1)
HOST_NODE_ADDR=localhost:29400  # rendezvous host:port (torchrun --rdzv_endpoint) for multi-node training
gpus=                   # comma-separated GPU ids, e.g. 0,1,2,3; empty: train on CPU in one process
num_workers=2           # DataLoader workers per training process
train_dtype=fp32        # fp32 | bf16 (autocast) | fp16 (autocast + GradScaler)
train_override=         # extra overrides for training, e.g. "max_epoch=3 dataset_conf.batch_conf.batch_size=8"
checkpoint=             # resume training from this checkpoint (default: the latest epoch_N.pt in the exp dir)
average_num=5           # checkpoints averaged for decoding
average_mode=val_best   # val_best (the N best by cv loss) | latest (the last N epochs)
decode_modes="ctc_greedy_search ctc_prefix_beam_search attention attention_rescoring"
beam_size=10
ctc_weight=0.5          # CTC weight in attention rescoring
reverse_weight=0.0      # right-to-left decoder weight (bitransformer)
decoding_chunk_size=-1  # -1: full attention; >0: streaming chunk size (U2 models)
num_decoding_left_chunks=-1
decode_batch_size=16
. tools/parse_options.sh

[[ -d recipes/${corpus} && -f recipes/${corpus}/settings.sh ]] \
  || die "unknown corpus '${corpus}'; valid: $(ls recipes | tr '\n' ' ')"
# settings.sh sets train_set dev_set test_sets token_type nbpe bpe_mode wer_char default_config
. "recipes/${corpus}/settings.sh"
config=${config:-${default_config}}
[[ -f ${config} ]] || die "config ${config} not found; pick one under conf/${corpus}/"
data=${data:-data/${corpus}}
download_dir=${download_dir:-downloads/${corpus}}
case ${att_udps} in
  both) variants="false true" ;;
  true|false) variants=${att_udps} ;;
  *) die "--att_udps takes true, false or both, got '${att_udps}'" ;;
esac
case ${data_type} in raw|shard) ;; *) die "--data_type takes raw or shard, got '${data_type}'" ;; esac
exp_prefix=${dir:-exp/${corpus}/$(basename "${config}" .yaml)}
exp_dir_of() { if [[ $1 == true ]]; then echo "${exp_prefix}_udps"; else echo "${exp_prefix}_scaled_dot"; fi; }
if [[ ${token_type} == char ]]; then
  units=${data}/dict/lang_char.txt; bpemodel=
else
  units=${data}/lang_bpe/${train_set}_${bpe_mode}${nbpe}_units.txt; bpemodel=${units%_units.txt}
fi
cmvn=${data}/${train_set}/global_cmvn
list_name() { if [[ ${data_type} == raw ]]; then echo data.list; else echo data.list.shards; fi; }

# A stage that needs an earlier stage's output stops here, before any long work, saying which stage makes it.
require() {  # require FILE STAGE
  [[ -e $1 ]] || die "missing $1 (made by stage $2): run with --stage $2, or check --data/--dir"
}
# Python availability and the package, before anything long starts. The stages run tools/*.py, which import the
# installed wenet_udps: it must be this checkout's (tools/install.sh does pip install -e .).
installed=$(cd / && python3 -c "import os, torch, wenet_udps; print(os.path.dirname(wenet_udps.__path__[0]))" \
  2>/dev/null) || die "wenet_udps or torch does not import: run 'bash tools/install.sh' (see README)"
[[ ${installed} -ef ${PWD} ]] || die "python3 imports wenet_udps from ${installed}, not from this checkout" \
  "(${PWD}): run 'bash tools/install.sh' here"

if [[ ${stage} -le -1 && ${stop_stage} -ge -1 ]]; then
  log "stage -1: download ${corpus} to ${download_dir}"
  if [[ ${corpus} == fsdd && -n ${fsdd_dir} ]]; then
    bash recipes/fsdd/download.sh --fsdd_dir "${fsdd_dir}" "${download_dir}"
  else
    bash "recipes/${corpus}/download.sh" "${download_dir}"
  fi
fi

if [[ ${stage} -le 0 && ${stop_stage} -ge 0 ]]; then
  log "stage 0: prepare wav.scp and text in ${data}"
  if [[ -f ${data}/${train_set}/wav.scp && -f ${data}/${train_set}/text ]]; then
    log "stage 0: ${data}/${train_set} already prepared, skipping"
  else
    # shellcheck disable=SC2086  # prepare_opts is a list of options
    bash "recipes/${corpus}/prepare.sh" ${prepare_opts} "${download_dir}" "${data}"
  fi
fi

if [[ ${stage} -le 1 && ${stop_stage} -ge 1 ]]; then
  require "${data}/${train_set}/wav.scp" 0
  if [[ -f ${cmvn} ]]; then
    log "stage 1: ${cmvn} exists, skipping"
  else
    log "stage 1: global CMVN stats of ${train_set} -> ${cmvn}"
    python3 tools/compute_cmvn_stats.py --num_workers "${num_workers}" --train_config "${config}" \
      --in_scp "${data}/${train_set}/wav.scp" --out_cmvn "${cmvn}"
  fi
fi

if [[ ${stage} -le 2 && ${stop_stage} -ge 2 ]]; then
  require "${data}/${train_set}/text" 0
  if [[ -f ${units} ]]; then
    log "stage 2: ${units} exists, skipping"
  elif [[ ${token_type} == char ]]; then
    log "stage 2: character units -> ${units}"
    python3 tools/make_char_units.py "${data}/${train_set}/text" "${units}"
  else
    log "stage 2: sentencepiece ${bpe_mode} ${nbpe} -> ${bpemodel}.model, ${units}"
    python3 tools/train_bpe.py --text "${data}/${train_set}/text" --model_prefix "${bpemodel}" \
      --model_type "${bpe_mode}" --vocab_size "${nbpe}" --units "${units}"
  fi
fi

if [[ ${stage} -le 3 && ${stop_stage} -ge 3 ]]; then
  for x in ${train_set} ${dev_set} ${test_sets}; do
    require "${data}/${x}/wav.scp" 0
    out=${data}/${x}/$(list_name)
    if [[ -f ${out} ]]; then log "stage 3: ${out} exists, skipping"; continue; fi
    log "stage 3: ${data_type} list of ${x} -> ${out}"
    segments=(); [[ -f ${data}/${x}/segments ]] && segments=(--segments "${data}/${x}/segments")
    if [[ ${data_type} == raw ]]; then
      python3 tools/make_raw_list.py "${segments[@]}" "${data}/${x}/wav.scp" "${data}/${x}/text" "${out}"
    else
      python3 tools/make_shard_list.py "${segments[@]}" --num_utts_per_shard "${num_utts_per_shard}" \
        --num_threads "${num_workers}" "${data}/${x}/wav.scp" "${data}/${x}/text" "${data}/${x}/shards" "${out}"
    fi
  done
fi

if [[ ${stage} -le 4 && ${stop_stage} -ge 4 ]]; then
  require "${data}/${train_set}/$(list_name)" 3
  require "${data}/${dev_set}/$(list_name)" 3
  require "${units}" 2
  require "${cmvn}" 1
  for udps in ${variants}; do
    exp=$(exp_dir_of "${udps}")
    if [[ -f ${exp}/final.pt ]]; then log "stage 4: ${exp}/final.pt exists, skipping"; continue; fi
    mkdir -p "${exp}"
    resume=${checkpoint}
    if [[ -z ${resume} ]]; then
      last=$(ls "${exp}"/epoch_*.pt 2>/dev/null | sed 's/.*epoch_\([0-9]*\)\.pt/\1/' | sort -n | tail -n 1 || true)
      [[ -n ${last} ]] && resume=${exp}/epoch_${last}.pt
    fi
    overrides=(att_udps=${udps} cmvn_conf.cmvn_file=${cmvn} tokenizer_conf.symbol_table_path=${units})
    [[ -n ${bpemodel} ]] && overrides+=(tokenizer_conf.bpe_path=${bpemodel}.model)
    for o in ${train_override}; do overrides+=("${o}"); done
    args=(--config "${config}" --data_type "${data_type}" --train_data "${data}/${train_set}/$(list_name)"
          --cv_data "${data}/${dev_set}/$(list_name)" --model_dir "${exp}" --num_workers "${num_workers}"
          --dtype "${train_dtype}")
    for o in "${overrides[@]}"; do args+=(--override "${o}"); done
    [[ -n ${resume} ]] && args+=(--checkpoint "${resume}")
    log "stage 4: train ${exp} (att_udps=${udps})${resume:+, resuming from ${resume}}"
    if [[ -z ${gpus} ]]; then
      python3 -m wenet_udps.bin.train "${args[@]}" --device cpu
    else
      num_gpus=$(echo "${gpus}" | awk -F, '{print NF}')
      CUDA_VISIBLE_DEVICES=${gpus} torchrun --nnodes="${num_nodes}" --nproc_per_node="${num_gpus}" \
        --node_rank="${node_rank}" --rdzv_id=wenet_udps --rdzv_backend=c10d --rdzv_endpoint="${HOST_NODE_ADDR}" \
        -m wenet_udps.bin.train "${args[@]}" --device cuda --dist_backend nccl
    fi
  done
fi

if [[ ${stage} -le 5 && ${stop_stage} -ge 5 ]]; then
  for udps in ${variants}; do
    exp=$(exp_dir_of "${udps}")
    require "${exp}/final.pt" 4
    avg=${exp}/avg_${average_num}.pt
    if [[ ! -f ${avg} ]]; then
      log "stage 5: average ${average_num} checkpoints (${average_mode}) -> ${avg}"
      avg_args=(--dst_model "${avg}" --src_path "${exp}" --num "${average_num}")
      [[ ${average_mode} == val_best ]] && avg_args+=(--val_best)
      python3 -m wenet_udps.bin.average_model "${avg_args[@]}"
    fi
    device=cpu; [[ -n ${gpus} ]] && device=cuda
    for x in ${test_sets}; do
      require "${data}/${x}/$(list_name)" 3
      result_dir=${exp}/${x}
      log "stage 5: decode ${x} with ${exp} (${decode_modes})"
      CUDA_VISIBLE_DEVICES=${gpus%%,*} python3 -m wenet_udps.bin.recognize --config "${exp}/train.yaml" \
        --checkpoint "${avg}" --data_type "${data_type}" --test_data "${data}/${x}/$(list_name)" \
        --result_dir "${result_dir}" --modes ${decode_modes} --beam_size "${beam_size}" \
        --ctc_weight "${ctc_weight}" --reverse_weight "${reverse_weight}" --batch_size "${decode_batch_size}" \
        --decoding_chunk_size "${decoding_chunk_size}" --num_decoding_left_chunks "${num_decoding_left_chunks}" \
        --device "${device}"
      printf 'checkpoint: %s\nconfig: %s\n' "${avg}" "${exp}/train.yaml" > "${result_dir}/decode.info"
      for mode in ${decode_modes}; do
        python3 tools/compute-wer.py --char="${wer_char}" --v=1 "${data}/${x}/text" "${result_dir}/${mode}/text" \
          > "${result_dir}/${mode}/wer"
        log "stage 5: ${exp} ${x} ${mode}: $(grep '^Overall' "${result_dir}/${mode}/wer")"
      done
    done
  done
fi

if [[ ${stage} -le 6 && ${stop_stage} -ge 6 ]]; then
  for udps in ${variants}; do
    exp=$(exp_dir_of "${udps}")
    require "${exp}/avg_${average_num}.pt" 5
    log "stage 6: export ${exp} to TorchScript and ONNX"
    python3 -m wenet_udps.bin.export --config "${exp}/train.yaml" --checkpoint "${exp}/avg_${average_num}.pt" \
      --output_dir "${exp}/export"
  done
fi

if [[ ${stage} -le 7 && ${stop_stage} -ge 7 ]]; then
  results_root=$(dirname "${exp_prefix}")
  log "stage 7: results table and plots for ${results_root}"
  python3 tools/collect_results.py --exp_dir "${results_root}" --out "${results_root}/RESULTS.md" \
    --plots_dir "${results_root}/plots"
fi
log "done (stages ${stage}..${stop_stage})"
