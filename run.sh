#!/usr/bin/env bash
# wenet_udps: the stage-by-stage driver for every corpus (WeNet's run.sh, one copy for all recipes).
#
#   bash run.sh                                   # the main job: tiny_zh on CPU, scaled-dot vs UDPS, table at the end
#   bash run.sh --corpus aishell --download_dir /data/aishell --gpus 0,1,2,3 --stage -1 --stop_stage 7
#   bash run.sh --corpus librispeech --train_set train_100 --config conf/librispeech/train_conformer.yaml --stage 4
#   bash run.sh --corpus mini_librispeech --download_dir DIR    # CPU, real read English, speaker-disjoint test
#
# Stages: -1 download, 0 prepare wav.scp/text, 1 CMVN stats, 2 units / BPE model, 3 data.list or shards,
#          4 train, 5 average + decode + score every dev/test set, 6 export, 7 results table and plots.
# Every stage logs with a timestamp and can be rerun on its own (--stage N --stop_stage N). A stage whose output
# exists is skipped only when its stamp file records the same inputs and options; otherwise stages 0-3, 5 and 6
# are redone, and stage 4 stops with a message (a run is never overwritten).
set -euo pipefail
caller_dir=${PWD}  # relative paths given on the command line are read from here (see "user paths" below)
cd "$(dirname "$0")"
. tools/log.sh
. tools/run_lib.sh

corpus=tiny_zh          # recipes/<corpus>: tiny_zh tiny_en fsdd aishell librispeech mini_librispeech (~2.5 h, 2 cores)
stage=-1                # first stage to run
stop_stage=7            # last stage to run
config=                 # training YAML; empty: the corpus' default_config (recipes/<corpus>/settings.sh)
att_udps=               # true | false | both: false = scaled-dot at every site, whatever the conf says; empty: both,
                        # or with --config what the conf's own att_udps says (docs/udps.md)
udps_sites=             # site ablation, one model per set: none | all | sites joined by + from enc_self dec_self
                        # dec_cross, e.g. "none enc_self dec_self+dec_cross all" (enc_self = the paper author's fork)
keep_checkpoints=all    # all | averaged: after stage 5 averages, delete epoch_N.pt/step_N.pt (final.pt stays)
dir=                    # experiment dir prefix; empty: exp/<corpus>/<config name>; _<attention> is appended
data=                   # data dir; empty: data/<corpus>
download_dir=           # where stage -1 downloads and stage 0 reads; empty: downloads/<corpus>
fsdd_dir=               # fsdd only: a local copy of FSDD's recordings/ (skips the download)
download_opts=          # extra options for recipes/<corpus>/download.sh, e.g. "--subset 100" (librispeech 100 h)
prepare_opts=           # extra options for recipes/<corpus>/prepare.sh, e.g. "--num_train 100" (tiny_*, fsdd)
train_set=              # corpus settings, empty: recipes/<corpus>/settings.sh's. Training set, e.g. train_100
dev_set=                # cross-validation set of training
test_sets=              # sets decoded and scored in stage 5, e.g. "dev_clean dev_other test_clean test_other"
token_type=             # char | bpe
nbpe=                   # BPE vocabulary size (token_type bpe)
bpe_mode=               # unigram | bpe (sentencepiece model type)
wer_char=               # 1: score characters (CER); 0: words (WER)
data_type=raw           # raw (data.list) | shard (tar shards)
num_utts_per_shard=1000 # shard only
num_nodes=1             # machines taking part in training
node_rank=0             # this machine's rank (0 .. num_nodes-1)
HOST_NODE_ADDR=localhost:29400  # rendezvous host:port (torchrun --rdzv_endpoint) for multi-node training
gpus=                   # comma-separated GPU ids, e.g. 0,1,2,3; empty: train on CPU in one process
skip_gpu_check=false    # with --gpus: true skips the GPU preflight (wenet_udps.bin.gpu_check) before stage 4
num_workers=2           # DataLoader workers per training process
cpu_jobs=2              # CPU only: trainings (variants x seeds) run side by side, each with nproc / cpu_jobs torch
                        # threads and its log in <exp>/train.log (1: one at a time, all cores, log to the terminal)
train_dtype=fp32        # fp32 | bf16 (autocast) | fp16 (autocast + GradScaler)
train_override=         # extra overrides for training, e.g. "max_epoch=3 dataset_conf.batch_conf.batch_size=8"
seeds=                  # training seeds, e.g. "1 2 3": one model per variant and seed, in <exp>_seed<N>; empty: one
                        # model with the config's seed (train's default), in <exp>
checkpoint=             # continue training one model from this checkpoint; default: its newest valid epoch_N/step_N.pt
enc_init=               # fine-tuning: a new model starts with --enc_init_mods copied from this checkpoint; {attention}
                        # becomes each model's attention (e.g. exp/mini_librispeech/train_conformer_{attention}/avg_5.pt)
enc_init_mods=encoder.  # comma-separated module-name prefixes copied from --enc_init (WeNet's train.py options)
force=false             # true: train afresh where an exp dir holds an earlier run (its checkpoints are deleted)
average_num=5           # checkpoints averaged for decoding (fewer when fewer exist: avg_<number used>.pt)
average_mode=val_best   # val_best (the N best by cv loss) | latest (the last N epochs)
decode_modes="ctc_greedy_search ctc_prefix_beam_search attention attention_rescoring"
beam_size=10
ctc_weight=0.5          # CTC weight in attention rescoring
reverse_weight=0.0      # right-to-left decoder weight (bitransformer)
decoding_chunk_size=-1  # -1: full attention; >0: streaming chunk size (needs a streaming conf, e.g. *_u2pp_*)
num_decoding_left_chunks=-1
decode_batch_size=16
loso=false              # fsdd: true = leave-one-speaker-out; 5 speakers x 2 variants x 2 seeds: about 4 h on 2 cores
                        # (two folds at a time, 48 min per fold's pair of trainings). A model per held-out speaker,
                        # variant and seed (--seeds, default "1 2"), scored on that speaker; <dir>/RESULTS.md, loso.png
loso_compare=           # with --loso: an earlier LOSO exp dir over the same folds (old conf) for paired tests
declare -r help_message="Usage: bash run.sh [options]   (the main job: bash run.sh)
Stages (--stage N --stop_stage N reruns one):
  -1  download the corpus (recipes/<corpus>/download.sh; tiny_* synthesise it with espeak-ng)
   0  prepare wav.scp and text per set (recipes/<corpus>/prepare.sh)
   1  global CMVN statistics of the training set (global_cmvn)
   2  units: characters (dict/lang_char.txt) or a sentencepiece BPE model
   3  data.list (raw) or tar shards per set
   4  train one model per attention variant (or site set) and seed: <exp>/epoch_N.pt, final.pt, train.yaml
   5  average checkpoints (avg_N.pt), decode every test set in each mode, score (<exp>/<set>/<mode>/wer)
   6  export TorchScript/ONNX (<exp>/export) and sherpa-onnx (<exp>/sherpa), parity checked
   7  sherpa-onnx CER and RTF, RESULTS.md (one row per model, paired tests) and plots"
args_given=("$@")
. tools/parse_options.sh
[[ $# -eq 0 ]] || die "unexpected argument '$1': options are --name value (bash run.sh --help lists them)"

# ---- user paths: run.sh works from its own folder (the cd above), so a relative path given from elsewhere would
# silently name the repo's file of that name (an edited conf/... in the caller's folder ignored): make it the caller's.
resolved=()  # the resolved paths as options, for recipes/fsdd/loso.sh, which reruns run.sh from here
if ! [[ ${caller_dir} -ef ${PWD} ]]; then
  for v in config dir data download_dir fsdd_dir checkpoint enc_init loso_compare; do
    [[ -z ${!v} || ${!v} == /* ]] || { printf -v "${v}" '%s' "${caller_dir}/${!v}"; resolved+=("--${v}" "${!v}"); }
  done
fi
# --dir is a prefix (exp dirs are <dir>_<attention>): "exp/x/" would put them at exp/x/_udps.
while [[ ${dir} == */ && ${dir} != / ]]; do dir=${dir%/}; done

# ---- options: checked before any work ----
for v in stage stop_stage average_num beam_size num_workers cpu_jobs decode_batch_size decoding_chunk_size \
         num_decoding_left_chunks num_nodes node_rank num_utts_per_shard; do
  [[ ${!v} =~ ^-?[0-9]+$ ]] || die "--${v} takes an integer, got '${!v}' (bash run.sh --help lists the options)"
done
for v in ctc_weight reverse_weight; do
  [[ ${!v} =~ ^[0-9]*\.?[0-9]+$ ]] || die "--${v} takes a number >= 0, got '${!v}'"
done
one_of average_mode "${average_mode}" val_best latest
one_of data_type "${data_type}" raw shard
one_of force "${force}" true false
[[ ${stage} -ge -1 && ${stage} -le 7 ]] || die "--stage must be in -1..7, got ${stage}"
[[ ${stop_stage} -ge -1 && ${stop_stage} -le 7 ]] || die "--stop_stage must be in -1..7, got ${stop_stage}"
[[ ${stage} -le ${stop_stage} ]] || die "--stage ${stage} is after --stop_stage ${stop_stage}: no stage would run"
[[ ${cpu_jobs} -ge 1 ]] || die "--cpu_jobs must be >= 1, got ${cpu_jobs}"
[[ ${average_num} -ge 1 ]] || die "--average_num must be >= 1, got ${average_num}"
for v in num_utts_per_shard beam_size decode_batch_size num_nodes; do
  [[ ${!v} -ge 1 ]] || die "--${v} must be >= 1, got ${!v}"
done
[[ ${num_workers} -ge 0 ]] || die "--num_workers must be >= 0, got ${num_workers}"
[[ ${node_rank} -ge 0 && ${node_rank} -lt ${num_nodes} ]] \
  || die "--node_rank must be in 0..$((num_nodes - 1)) (--num_nodes ${num_nodes}), got ${node_rank}"
[[ ${decoding_chunk_size} -ge 1 || ${decoding_chunk_size} -eq -1 ]] \
  || die "--decoding_chunk_size must be -1 (full context) or >= 1, got ${decoding_chunk_size}"
[[ ${num_decoding_left_chunks} -ge -1 ]] \
  || die "--num_decoding_left_chunks must be -1 (all) or >= 0, got ${num_decoding_left_chunks}"
[[ -z ${gpus} || ${gpus} =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--gpus takes comma-separated GPU ids like 0,1, got '${gpus}'"
corpora=$(for d in recipes/*/; do [[ -f ${d}settings.sh ]] && basename "${d}"; done | tr '\n' ' ')
[[ ${corpus} =~ ^[A-Za-z0-9_]+$ && -f recipes/${corpus}/settings.sh ]] \
  || die "unknown corpus '${corpus}'; valid: ${corpora% }"

# Corpus settings: recipes/<corpus>/settings.sh, then what the command line gave.
settings="train_set dev_set test_sets token_type nbpe bpe_mode wer_char"
declare -A given=()
for v in ${settings}; do given[${v}]=${!v}; done
train_set_fallback=     # settings.sh may name a set to train on when train_set was not prepared
. "recipes/${corpus}/settings.sh"
for v in ${settings}; do [[ -z ${given[${v}]} ]] || printf -v "${v}" '%s' "${given[${v}]}"; done
one_of token_type "${token_type}" char bpe
one_of bpe_mode "${bpe_mode}" unigram bpe
one_of wer_char "${wer_char}" 0 1
[[ ${nbpe} =~ ^[0-9]+$ ]] || die "--nbpe takes an integer, got '${nbpe}'"
[[ ${token_type} == char || ${nbpe} -gt 0 ]] || die "--token_type bpe needs --nbpe > 0"
[[ -n ${test_sets// /} ]] || die "--test_sets is empty: name the sets to decode"

# --config alone trains what the conf says; otherwise both attentions unless --att_udps picks one. A variant is
# the att_udps value its model trains with (wenet_udps.model_builder maps it to each site's type).
one_of keep_checkpoints "${keep_checkpoints}" all averaged
if [[ -n ${udps_sites} ]]; then
  [[ -z ${att_udps} ]] || die "--udps_sites and --att_udps both pick the variants: give one"
  [[ " ${udps_sites} " == *" none "* ]] || die "--udps_sites needs none: the scaled-dot model the others are tested against"
  variants=
  for s in ${udps_sites}; do   # none/all are att_udps false/true; a site set is att_udps' own value
    case ${s} in
      none) variants+=" false" ;; all) variants+=" true" ;;
      true|false) die "--udps_sites takes none, all or sites joined by + (enc_self dec_self dec_cross), got '${s}'" ;;
      *) variants+=" ${s}" ;;
    esac
  done
  variants=${variants# }
else
  [[ -n ${att_udps} ]] || { if [[ -n ${config} ]]; then att_udps=conf; else att_udps=both; fi; }
  case ${att_udps} in
    both) variants="false true" ;;
    true|false|conf) variants=${att_udps} ;;
    *) die "--att_udps takes true, false or both, got '${att_udps}'" ;;
  esac
fi
config=${config:-${default_config}}
[[ -f ${config} ]] || die "config ${config} not found; pick one under ${PWD}/conf/${corpus}/ (a relative path is" \
  "read from the directory run.sh is started in)"
one_of loso "${loso}" true false
if [[ ${loso} == true ]]; then
  [[ ${corpus} == fsdd ]] || die "--loso true needs speakers to hold out: only --corpus fsdd has them"
  [[ -z ${udps_sites} ]] || die "--loso true compares scaled-dot with UDPS; it does not take --udps_sites"
  exec bash recipes/fsdd/loso.sh --stage "${stage}" --stop_stage "${stop_stage}" --seeds "${seeds:-1 2}" \
    --cpu_jobs "${cpu_jobs}" --exp_root "${dir:-exp/fsdd_loso/$(basename "${config}" .yaml)}" \
    --data_root "${data:-data/fsdd_loso}" --download_dir "${download_dir:-downloads/fsdd}" \
    --prepare_opts "${prepare_opts}" --compare_root "${loso_compare}" -- "${args_given[@]}" "${resolved[@]}"
fi
data=${data:-data/${corpus}}
download_dir=${download_dir:-downloads/${corpus}}
exp_prefix=${dir:-exp/${corpus}/$(basename "${config}" .yaml)}
read -r -a overrides_given <<< "${train_override}"
# The stages run tools/*.py, which import the installed wenet_udps: it must be this checkout's (tools/install.sh does
# pip install -e .). find_spec, run from /: no 1.5 s torch import on every call, and not this folder's copy by accident.
installed=$(cd / && python3 -c "import importlib.util as u, os; s = u.find_spec('wenet_udps'); assert u.find_spec('torch')
print(os.path.dirname(s.submodule_search_locations[0]))" 2>/dev/null) \
  || die "wenet_udps or torch is not installed: run 'bash tools/install.sh' (see README)"
[[ ${installed} -ef ${PWD} ]] || die "python3 imports wenet_udps from ${installed}, not from this checkout" \
  "(${PWD}): run 'bash tools/install.sh' here"
# Which model each variant builds (exp dirs are named after its real attention), checked before any work.
declare -A exp_of=()
if [[ ${stage} -le 7 && ${stop_stage} -ge 4 ]]; then
  if [[ -n ${gpus} ]]; then
    n_ids=$(echo "${gpus}" | awk -F, '{print NF}')
    CUDA_VISIBLE_DEVICES=${gpus} python3 -c "import sys, torch; sys.exit(torch.cuda.device_count() < ${n_ids})" \
      || die "--gpus ${gpus}: torch sees fewer than ${n_ids} CUDA devices (torch.cuda.is_available():" \
             "$(python3 -c 'import torch; print(torch.cuda.is_available())')); omit --gpus to run on the CPU"
  fi
  desc=(--config "${config}")
  for o in "${overrides_given[@]}"; do desc+=(--override "${o}"); done
  for udps in ${variants}; do desc+=(--variant "${udps}"); done
  [[ -n ${checkpoint} && ${stage} -le 4 ]] && desc+=(--checkpoint "${checkpoint}")
  tmp=$(mktemp -d)
  trap 'rm -rf "${tmp}"' EXIT
  described=$(python3 -m wenet_udps.bin.describe --porcelain "${desc[@]}" 2> "${tmp}/describe.err") \
    || die "$(tail -n 1 "${tmp}/describe.err")"
  while read -r udps label streaming; do
    for v in "${!exp_of[@]}"; do
      [[ ${exp_of[${v}]} != "${exp_prefix}_${label}" ]] || die "att_udps ${v} and ${udps}: ${config} builds the" \
        "same attention (${label}) either way; drop one"
    done
    exp_of[${udps}]=${exp_prefix}_${label}
    if [[ ${decoding_chunk_size} -gt 0 && ${streaming} != true ]]; then
      die "--decoding_chunk_size ${decoding_chunk_size}: ${config} trains a non-streaming encoder (no" \
          "encoder_conf.use_dynamic_chunk / static_chunk_size); drop the option or train a streaming conf:" \
          "$(ls conf/*/*u2pp*.yaml | tr '\n' ' ')"
    fi
  done <<< "${described}"
fi
for s in ${seeds}; do [[ ${s} =~ ^[0-9]+$ ]] || die "--seeds takes non-negative integers, got '${s}'"; done
[[ -z ${seeds} || -z ${checkpoint} ]] || die "--checkpoint continues one model; it cannot go with --seeds"
# runs: "<variant>:<seed>" per model trained ("none": the config's seed, exp dir without suffix).
runs=()
for udps in ${variants}; do for s in ${seeds:-none}; do runs+=("${udps}:${s}"); done; done
enc_init_of() {  # enc_init_of VARIANT -> its --enc_init file ({attention} replaced by the variant's exp suffix)
  echo "${enc_init//\{attention\}/${exp_of[${1}]#"${exp_prefix}_"}}"
}
if [[ -n ${enc_init} && ${stage} -le 4 && ${stop_stage} -ge 4 ]]; then
  for udps in ${variants}; do
    [[ -f $(enc_init_of "${udps}") ]] || die "--enc_init: $(enc_init_of "${udps}") (for att_udps ${udps}) is not a file"
  done
fi
run_exp() {  # run_exp VARIANT:SEED -> its exp dir
  if [[ ${1#*:} == none ]]; then echo "${exp_of[${1%%:*}]}"; else echo "${exp_of[${1%%:*}]}_seed${1#*:}"; fi
}
# On the CPU, up to --cpu_jobs trainings run at once: a small model gains little from more intra-op threads, so
# two one-thread trainings on two cores take about the time of one (measured: docs/benchmarks.md). The thread count
# depends on --cpu_jobs (or OMP_NUM_THREADS) only, not on how many runs there are, so a model's numbers do not
# depend on which other runs this command trains.
cpu_threads=${OMP_NUM_THREADS:-$(( $(nproc) / cpu_jobs > 0 ? $(nproc) / cpu_jobs : 1 ))}
training_pids=() training_exps=()
train_on_cpu() {  # train_on_cpu EXP ARGS...: run bin.train now (cpu_jobs 1) or in the background
  local exp=$1; shift
  if [[ ${cpu_jobs} -eq 1 ]]; then
    python3 -m wenet_udps.bin.train "$@"; return
  fi
  [[ ${#training_pids[@]} -lt ${cpu_jobs} ]] || wait_trainings
  log "stage 4: ${exp} trains in the background (torch threads: ${cpu_threads}), log: ${exp}/train.log"
  # Appended: a resumed run's log follows the interrupted one's.
  OMP_NUM_THREADS=${cpu_threads} python3 -m wenet_udps.bin.train "$@" >> "${exp}/train.log" 2>&1 &
  training_pids+=($!) training_exps+=("${exp}")
}
wait_trainings() {  # wait for the background trainings; stop naming each one that failed, after all have ended
  local i failed=()
  for i in "${!training_pids[@]}"; do
    if ! wait "${training_pids[i]}"; then
      failed+=("${training_exps[i]}")
      tail -n 5 "${training_exps[i]}/train.log" >&2
    fi
  done
  training_pids=() training_exps=()
  [[ ${#failed[@]} -eq 0 ]] || die "stage 4: training failed in ${failed[*]} (see train.log there); rerun" \
    "stage 4 to resume from the last valid checkpoint"
}
trap 'rm -rf "${tmp:-}"; [[ ${#training_pids[@]} -eq 0 ]] || kill "${training_pids[@]}" 2> /dev/null' EXIT
first_seed() { local s; read -r -a s <<< "${seeds}"; echo "${s[0]:-none}"; }
list_name() { if [[ ${data_type} == raw ]]; then echo data.list; else echo data.list.shards; fi; }
# A stage that needs an earlier stage's output stops here, before any long work, saying which stage makes it.
require() {  # require FILE STAGE
  [[ -e $1 ]] || die "missing $1 (made by stage $2): run with --stage $2, or check --data/--dir"
}

if [[ ${stage} -le -1 && ${stop_stage} -ge -1 ]]; then
  log "stage -1: download ${corpus} to ${download_dir}"
  if [[ ${corpus} == fsdd && -n ${fsdd_dir} ]]; then
    # shellcheck disable=SC2086  # download_opts is a list of options
    bash recipes/fsdd/download.sh --fsdd_dir "${fsdd_dir}" ${download_opts} "${download_dir}"
  else
    # shellcheck disable=SC2086
    bash "recipes/${corpus}/download.sh" ${download_opts} "${download_dir}"
  fi
fi

if [[ ${stage} -le 0 && ${stop_stage} -ge 0 ]]; then
  # Canonical paths: ../shared/x and /work/shared/x (or a symlink to it) name one source, so no needless re-prepare.
  source_dir=$(canonical_path "${download_dir}")
  key=$(stamp_text corpus="${corpus}" download_dir="${source_dir}" fsdd_dir="${fsdd_dir:+$(canonical_path "${fsdd_dir}")}" \
        prepare_opts="${prepare_opts}")
  if stamp_ok "${data}/.stage0.stamp" "${key}"; then
    log "stage 0: ${data} already prepared from the same source and options, skipping"
  else
    if [[ -f ${data}/.stage0.stamp ]]; then
      log "stage 0: preparing ${data} again ($(stamp_change "${data}/.stage0.stamp" "${key}"))"
    fi
    log "stage 0: prepare wav.scp and text in ${data}"
    # shellcheck disable=SC2086  # prepare_opts is a list of options
    bash "recipes/${corpus}/prepare.sh" ${prepare_opts} "${download_dir}" "${data}"
    stamp_write "${data}/.stage0.stamp" "${key}"
  fi
fi

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

if [[ ${stage} -le 1 && ${stop_stage} -ge 1 ]]; then
  require "${data}/${train_set}/wav.scp" 0
  key=$(stamp_text wav_scp="$(file_sum "${data}/${train_set}/wav.scp")" \
        segments="$(file_sum "${data}/${train_set}/segments")" \
        features="$(conf_sum "${config}" feats_type fbank_conf mfcc_conf resample_conf)")
  if [[ -f ${cmvn} ]] && stamp_ok "${cmvn}.stamp" "${key}"; then
    log "stage 1: ${cmvn} is up to date, skipping"
  else
    log "stage 1: global CMVN stats of ${train_set} -> ${cmvn}"
    python3 tools/compute_cmvn_stats.py --num_workers "${num_workers}" --train_config "${config}" \
      --in_scp "${data}/${train_set}/wav.scp" --out_cmvn "${cmvn}"
    stamp_write "${cmvn}.stamp" "${key}"
  fi
fi

if [[ ${stage} -le 2 && ${stop_stage} -ge 2 ]]; then
  require "${data}/${train_set}/text" 0
  key=$(stamp_text text="$(file_sum "${data}/${train_set}/text")" token_type="${token_type}" \
        bpe_mode="${bpe_mode}" nbpe="${nbpe}")
  if [[ -f ${units} ]] && stamp_ok "${units}.stamp" "${key}"; then
    log "stage 2: ${units} is up to date, skipping"
  elif [[ ${token_type} == char ]]; then
    log "stage 2: character units -> ${units}"
    python3 tools/make_char_units.py "${data}/${train_set}/text" "${units}"
    stamp_write "${units}.stamp" "${key}"
  else
    log "stage 2: sentencepiece ${bpe_mode} ${nbpe} -> ${bpemodel}.model, ${units}"
    python3 tools/train_bpe.py --text "${data}/${train_set}/text" --model_prefix "${bpemodel}" \
      --bpe_mode "${bpe_mode}" --nbpe "${nbpe}" --units "${units}"
    stamp_write "${units}.stamp" "${key}"
  fi
fi

if [[ ${stage} -le 3 && ${stop_stage} -ge 3 ]]; then
  for x in $(printf '%s\n' ${train_set} ${dev_set} ${test_sets} | awk '!seen[$0]++'); do
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
fi

if [[ ${stage} -le 4 && ${stop_stage} -ge 4 ]]; then
  for f in "${data}/${train_set}/$(list_name):3" "${data}/${dev_set}/$(list_name):3" "${units}:2" "${cmvn}:1"; do
    require "${f%:*}" "${f##*:}"
  done
  python3 -c "import sys; from wenet_udps.transformer.cmvn import load_cmvn_json as load
try: load(sys.argv[1])
except (OSError, ValueError) as e: sys.exit(str(e))" "${cmvn}" || exit 1   # e.g. Kaldi stats: names the converter
  for run in "${runs[@]}"; do lock_exp "$(run_exp "${run}")"; done   # before anything is written there
  gpu_json=
  if [[ -n ${gpus} && ${skip_gpu_check} != true ]]; then   # kernel parity, a step per variant, a decode, speed
    gpu_json=${tmp}/gpu_check.json   # copied into each exp dir that trains: a refused one keeps its own verdict
    log "stage 4: GPU preflight (python -m wenet_udps.bin.gpu_check)"
    if ! CUDA_VISIBLE_DEVICES=${gpus} python3 -m wenet_udps.bin.gpu_check --device cuda --config "${config}" \
        --dtype "${train_dtype}" --json "${gpu_json}"; then
      cp "${gpu_json}" "${exp_prefix}_gpu_check.json" 2> /dev/null || true
      die "stage 4: the GPU preflight failed (${exp_prefix}_gpu_check.json); attach it to a bug report;" \
        "--skip_gpu_check true trains anyway"
    fi
  fi
  for run in "${runs[@]}"; do
    udps=${run%%:*} seed=${run#*:}
    exp=$(run_exp "${run}")
    overrides=(cmvn_conf.cmvn_file="${cmvn}" tokenizer_conf.symbol_table_path="${units}")
    [[ ${udps} == conf ]] || overrides=(att_udps="${udps}" "${overrides[@]}")
    [[ -n ${bpemodel} ]] && overrides+=(tokenizer_conf.bpe_path="${bpemodel}.model")
    overrides+=("${overrides_given[@]}")
    key=$(stamp_text config="$(conf_sum "${config}")" overrides="${overrides[*]}" data_type="${data_type}" \
          train_list="$(file_sum "${data}/${train_set}/$(list_name)")" \
          cv_list="$(file_sum "${data}/${dev_set}/$(list_name)")" units="$(file_sum "${units}")" \
          cmvn="$(file_sum "${cmvn}.stamp")" seed="${seed}")   # cmvn: what the stats were made from
    init=
    if [[ -n ${enc_init} ]]; then
      init=$(enc_init_of "${udps}")
      key+=$'\n'$(stamp_text enc_init="$(file_sum "${init}")" enc_init_mods="${enc_init_mods}")
    fi
    newest=$(newest_checkpoint "${exp}")
    trained=false; [[ -f ${exp}/final.pt || -n ${newest} ]] && trained=true
    if [[ ${force} == false && -z ${checkpoint} && ${trained} == true ]] \
        && ! stamp_ok "${exp}/.train.stamp" "${key}"; then
      die "stage 4: ${exp} holds a run trained with other settings ($(stamp_change "${exp}/.train.stamp" "${key}"));" \
          "continue it with --checkpoint ${newest:-${exp}/final.pt}, train afresh there with --force true," \
          "or train elsewhere with --dir"
    fi
    if [[ ${force} == false && -z ${checkpoint} && -f ${exp}/final.pt ]]; then
      log "stage 4: ${exp}/final.pt exists, skipping"; continue
    fi
    mkdir -p "${exp}"
    [[ -z ${gpu_json} ]] || cp "${gpu_json}" "${exp}/gpu_check.json"
    stamp_write "${exp}/.train.stamp" "${key}"
    args=(--config "${config}" --data_type "${data_type}" --train_data "${data}/${train_set}/$(list_name)"
          --cv_data "${data}/${dev_set}/$(list_name)" --model_dir "${exp}" --num_workers "${num_workers}"
          --dtype "${train_dtype}")
    for o in "${overrides[@]}"; do args+=(--override "${o}"); done
    [[ ${seed} == none ]] || args+=(--seed "${seed}")
    [[ -z ${init} ]] || args+=(--enc_init "${init}" --enc_init_mods "${enc_init_mods}")
    # Without --checkpoint, train resumes from the newest checkpoint that verifies (falling back past a damaged one).
    if [[ ${force} == true ]]; then args+=(--force); else args+=(--checkpoint "${checkpoint:-auto}"); fi
    log "stage 4: train ${exp} (att_udps ${udps}, seed ${seed})${checkpoint:+, continuing from ${checkpoint}}" \
        "${newest:+, resuming}"
    if [[ -z ${gpus} ]]; then
      train_on_cpu "${exp}" "${args[@]}" --device cpu
    else
      num_gpus=$(echo "${gpus}" | awk -F, '{print NF}')
      CUDA_VISIBLE_DEVICES=${gpus} torchrun --nnodes="${num_nodes}" --nproc_per_node="${num_gpus}" \
        --node_rank="${node_rank}" --rdzv_id=wenet_udps --rdzv_backend=c10d --rdzv_endpoint="${HOST_NODE_ADDR}" \
        -m wenet_udps.bin.train "${args[@]}" --device cuda --dist_backend nccl
    fi
  done
  wait_trainings
fi

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
# A test set for the export parity check: the first whose name starts with "test", else the first.
parity_set=$(for x in ${test_sets}; do [[ ${x} == test* ]] && echo "${x}"; done | head -n 1)
parity_set=${parity_set:-${test_sets%% *}}

if [[ ${stage} -le 5 && ${stop_stage} -ge 5 ]]; then
  device=cpu; [[ -n ${gpus} ]] && device=cuda
  for run in "${runs[@]}"; do
    exp=$(run_exp "${run}")
    require "${exp}/final.pt" 4
    lock_exp "${exp}"   # no averaging or decoding of checkpoints a training is still writing
    averaged "${exp}"
    if [[ -f ${avg} ]] && stamp_ok "${avg}.stamp" "${avg_key}"; then
      log "stage 5: ${avg} is up to date, skipping averaging"
    else
      compgen -G "${exp}/epoch_*.pt" > /dev/null || die "stage 5: ${exp} has no epoch_N.pt left to average" \
        "(--keep_checkpoints averaged deleted them): keep the earlier --average_num/--average_mode or retrain"
      log "stage 5: average ${avg_k} checkpoints (${average_mode}) -> ${avg}"
      avg_args=(--dst_model "${avg}" --src_path "${exp}" --num "${avg_k}")
      [[ ${average_mode} == val_best ]] && avg_args+=(--val_best)
      python3 -m wenet_udps.bin.average_model "${avg_args[@]}"
      stamp_write "${avg}.stamp" "${avg_key}"
    fi
    [[ ${keep_checkpoints} == all ]] || prune_checkpoints "${exp}"
    for x in ${test_sets}; do
      require "${data}/${x}/$(list_name)" 3
      result_dir=${exp}/${x}
      key=${avg_key}$'\n'$(stamp_text list="$(file_sum "${data}/${x}/$(list_name)")" modes="${decode_modes}" \
            beam_size="${beam_size}" ctc_weight="${ctc_weight}" reverse_weight="${reverse_weight}" \
            decoding_chunk_size="${decoding_chunk_size}" num_decoding_left_chunks="${num_decoding_left_chunks}")
      if stamp_ok "${result_dir}/.decode.stamp" "${key}"; then
        log "stage 5: ${result_dir} decoded with the same checkpoint and options, skipping decoding"
      else
        log "stage 5: decode ${x} with ${avg} (${decode_modes})"
        # shellcheck disable=SC2086  # decode_modes is a list
        CUDA_VISIBLE_DEVICES=${gpus%%,*} python3 -m wenet_udps.bin.recognize --config "${exp}/train.yaml" \
          --checkpoint "${avg}" --data_type "${data_type}" --test_data "${data}/${x}/$(list_name)" \
          --result_dir "${result_dir}" --modes ${decode_modes} --beam_size "${beam_size}" \
          --ctc_weight "${ctc_weight}" --reverse_weight "${reverse_weight}" --batch_size "${decode_batch_size}" \
          --decoding_chunk_size "${decoding_chunk_size}" --num_decoding_left_chunks "${num_decoding_left_chunks}" \
          --device "${device}"
        stamp_write "${result_dir}/.decode.stamp" "${key}"
      fi
      for mode in ${decode_modes}; do
        python3 tools/compute-wer.py --char="${wer_char}" --v=1 "${data}/${x}/text" "${result_dir}/${mode}/text" \
          > "${result_dir}/${mode}/wer"
        log "stage 5: ${exp} ${x} ${mode}: $(grep '^Overall' "${result_dir}/${mode}/wer")"
      done
    done
  done
fi

if [[ ${stage} -le 6 && ${stop_stage} -ge 6 ]]; then
  for run in "${runs[@]}"; do
    exp=$(run_exp "${run}")
    averaged "${exp}"
    require "${avg}" 5
    lock_exp "${exp}"
    parity_list=${data}/${parity_set}/$(list_name)
    require "${parity_list}" 3
    key=${avg_key}$'\n'$(stamp_text parity_list="$(file_sum "${parity_list}")" formats="wenet sherpa-onnx")
    if stamp_ok "${exp}/export/.export.stamp" "${key}"; then
      log "stage 6: ${exp}/export is up to date, skipping"
      continue
    fi
    log "stage 6: export ${avg} to TorchScript and ONNX; parity checked on ${parity_set}"
    python3 -m wenet_udps.bin.export --config "${exp}/train.yaml" --checkpoint "${avg}" \
      --output_dir "${exp}/export" --test_data "${parity_list}" --data_type "${data_type}"
    log "stage 6: export ${avg} for sherpa-onnx -> ${exp}/sherpa"
    python3 -m wenet_udps.bin.export --format sherpa-onnx --config "${exp}/train.yaml" --checkpoint "${avg}" \
      --output_dir "${exp}/sherpa" --test_data "${parity_list}" --data_type "${data_type}"
    stamp_write "${exp}/export/.export.stamp" "${key}"
  done
fi

if [[ ${stage} -le 7 && ${stop_stage} -ge 7 ]]; then
  results_root=$(dirname "${exp_prefix}")
  log "stage 7: results table and plots for ${results_root}"
  # sherpa-onnx (stage 6's export) on every test set, before the table so that it has their columns: fp32 and int8,
  # offline and (streaming confs) streaming. RTF: one stream, one thread.
  for run in "${runs[@]}"; do
    exp=$(run_exp "${run}")
    [[ -f ${exp}/sherpa/model.onnx ]] || continue
    for x in ${test_sets}; do
      for model in model model-streaming; do
        [[ -f ${exp}/sherpa/${model}.onnx ]] || continue
        for prec in fp32 int8; do
          name=sherpa${model#model}_${prec}; dir=${exp}/${x}/${name}   # sherpa_fp32, sherpa-streaming_int8, ...
          opts=(); [[ ${prec} == int8 ]] && opts+=(--int8); [[ ${model} == model-streaming ]] && opts+=(--streaming)
          python3 -m wenet_udps.bin.sherpa_decode --config "${exp}/train.yaml" --export_dir "${exp}/sherpa" \
            --wav_scp "${data}/${x}/wav.scp" --result_dir "${dir}" "${opts[@]}" > /dev/null
          python3 tools/compute-wer.py --char="${wer_char}" --v=1 "${data}/${x}/text" "${dir}/text" > "${dir}/wer"
          log "stage 7: ${exp} ${x} ${name}: $(grep '^Overall' "${dir}/wer"), $(cat "${dir}/rtf")"
        done
      done
    done
  done
  # The thread count that RESULTS.md records (provenance) is the trainings' on the CPU.
  OMP_NUM_THREADS=${cpu_threads} python3 tools/collect_results.py --exp_dir "${results_root}" \
    --out "${results_root}/RESULTS.md" --plots_dir "${results_root}/plots" \
    --metric "$([[ ${wer_char} == 1 ]] && echo CER || echo WER)" --data_dir "${data}" --wer_char "${wer_char}" \
    --seeds "${seeds}"
  # Look inside: per layer, the attention weights of one utterance of ${parity_set}, and the mean attention entropy
  # per head, of each variant's first-seed model (their averaged checkpoints must have the same name).
  look=()
  for udps in ${variants}; do
    exp=$(run_exp "${udps}:$(first_seed)")
    compgen -G "${exp}/epoch_*.yaml" > /dev/null || continue
    averaged "${exp}"
    [[ ${#look[@]} -eq 0 || ${avg##*/} == "${look_ckpt}" ]] || continue
    look_ckpt=${avg##*/}
    [[ -f ${avg} ]] && look+=("${exp}")
  done
  if [[ ${#look[@]} -gt 0 ]]; then
    require "${data}/${parity_set}/$(list_name)" 3
    python3 -m wenet_udps.bin.plot_attention --exp_dirs "${look[@]}" --checkpoint "${look_ckpt}" \
      --test_data "${data}/${parity_set}/$(list_name)" --data_type "${data_type}" --out_dir "${results_root}/plots"
  fi
fi
log "done (stages ${stage}..${stop_stage})"
