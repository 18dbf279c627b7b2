#!/usr/bin/env bash
# run.sh's checks before any work: options, corpus settings, the variants and their exp dirs, the runs to train.
# Source after tools/log.sh and tools/run_lib.sh; the functions read and set run.sh's option variables.

# resolve_user_paths: run.sh works from its own folder, so a relative path given from elsewhere would silently name
# the repo's file of that name (an edited conf/... in the caller's folder ignored): make it the caller's. Sets
# resolved, the resolved paths as options, for recipes/fsdd/loso.sh, which reruns run.sh from here.
resolve_user_paths() {
  local v
  resolved=()
  if ! [[ ${_caller_dir} -ef ${PWD} ]]; then
    for v in config dir data download_dir fsdd_dir checkpoint enc_init loso_compare lm_text; do
      [[ -z ${!v} || ${!v} == /* ]] || { printf -v "${v}" '%s' "${_caller_dir}/${!v}"; resolved+=("--${v}" "${!v}"); }
    done
  fi
  # --dir is a prefix (exp dirs are <dir>_<attention>): "exp/x/" would put them at exp/x/_udps.
  while [[ ${dir} == */ && ${dir} != / ]]; do dir=${dir%/}; done
}

given() {  # given NAME: the command line sets --NAME (also written --NAME=VALUE, or with '-' for '_')
  local a
  for a in "${args_given[@]}"; do [[ ${a%%=*} != --${1//_/?} ]] || return 0; done
  return 1
}

check_options() {
  local v corpora
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
  one_of lm "${lm}" true false
  if [[ ${lm} == false ]]; then  # an LM option without --lm true would be ignored
    for v in lm_name lm_mirror lm_text lm_order lm_prune lm_tag; do
      [[ -z ${!v} ]] || die "--${v} sets up the word LM of --lm true, and --lm is false"
    done
    for v in lm_weights word_scores; do   # these two have defaults: given on the command line
      ! given "${v}" || die "--${v} tunes the word LM of --lm true, and --lm is false"
    done
  fi
  [[ -z ${lm_text} || -f ${lm_text} ]] || die "--lm_text ${lm_text}: no such file"
  [[ -z ${lm_tag} || ${lm_tag} =~ ^[A-Za-z0-9][A-Za-z0-9.-]*$ ]] \
    || die "--lm_tag names folders: letters, digits, '.' and '-' (no '_', no '/'), got '${lm_tag}'"
  [[ ${stage} -ge -1 && ${stage} -le 7 ]] || die "--stage must be in -1..7, got ${stage}"
  [[ ${stop_stage} -ge -1 && ${stop_stage} -le 7 ]] || die "--stop_stage must be in -1..7, got ${stop_stage}"
  [[ ${stage} -le ${stop_stage} ]] || die "--stage ${stage} is after --stop_stage ${stop_stage}: no stage would run"
  [[ ${cpu_jobs} -ge 1 ]] || die "--cpu_jobs must be >= 1, got ${cpu_jobs}"
  # a ceiling (issue 80), as --nproc_per_node's: each training side by side wants a CPU of its own
  local cpus
  cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)   # (nproc honours OMP_NUM_THREADS)
  [[ ${#cpu_jobs} -le 6 && ${cpu_jobs} -le ${cpus} ]] \
    || die "--cpu_jobs ${cpu_jobs} is more than this machine's ${cpus} CPUs (nproc): each training side by side" \
           "runs on a CPU of its own; give at most ${cpus}"
  [[ ${average_num} -ge 1 ]] || die "--average_num must be >= 1, got ${average_num}"
  for v in num_utts_per_shard num_nodes; do
    [[ ${!v} -ge 1 ]] || die "--${v} must be >= 1, got ${!v}"
  done
  [[ ${num_workers} -ge 0 ]] || die "--num_workers must be >= 0, got ${num_workers}"
  check_decode_values   # recognize's own checkers (and --num_workers' ceiling), before the checks below compare
  [[ ${node_rank} -ge 0 && ${node_rank} -lt ${num_nodes} ]] \
    || die "--node_rank must be in 0..$((num_nodes - 1)) (--num_nodes ${num_nodes}), got ${node_rank}"
  [[ ${num_decoding_left_chunks} -eq -1 || ${decoding_chunk_size} -ge 1 ]] \
    || die "--num_decoding_left_chunks ${num_decoding_left_chunks} limits the left context of chunked decoding;" \
      "without --decoding_chunk_size it would do nothing"
  [[ -z ${gpus} || ${gpus} =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--gpus takes comma-separated GPU ids like 0,1, got '${gpus}'"
  corpora=$(for v in recipes/*/; do [[ -f ${v}settings.sh ]] && basename "${v}"; done | tr '\n' ' ')
  [[ ${corpus} =~ ^[A-Za-z0-9_]+$ && -f recipes/${corpus}/settings.sh ]] \
    || die "unknown corpus '${corpus}'; valid: ${corpora% }"
}

# check_nodes: torchrun's options (stage 4). Every node runs the same command but --node_rank; node 0 hosts the
# rendezvous at --HOST_NODE_ADDR, its rank 0 alone reads and writes the exp dirs and decides for all (resume,
# refusal: bin.train), so another node needs neither the exp dirs nor --checkpoint (node 0's to read), and leaves
# stages 5-7, which read the checkpoints, to node 0.
check_nodes() {
  [[ -z ${nproc_per_node} || ${nproc_per_node} =~ ^[1-9][0-9]*$ ]] \
    || die "--nproc_per_node takes an integer >= 1, got '${nproc_per_node}'"
  [[ -z ${gpus} || -z ${nproc_per_node} ]] \
    || die "--nproc_per_node is for training on the CPU; with --gpus each node runs one process per GPU listed"
  # a ceiling (issue 80): each gloo process holds a copy of the model and wants a CPU of its own; more only share them
  local cpus
  cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)   # (nproc honours OMP_NUM_THREADS)
  [[ -z ${nproc_per_node} || ${#nproc_per_node} -le 6 && ${nproc_per_node} -le ${cpus} ]] \
    || die "--nproc_per_node ${nproc_per_node} is more than this machine's ${cpus} CPUs (nproc): each training" \
           "process holds a copy of the model and needs a CPU; give at most ${cpus}"
  [[ ${num_nodes} -eq 1 || -n ${gpus}${nproc_per_node} ]] \
    || die "--num_nodes ${num_nodes} trains through torchrun: give --gpus, or --nproc_per_node (CPU processes per node)"
  [[ ${dist_timeout} =~ ^[0-9]*\.?[0-9]+$ && ! ${dist_timeout} =~ ^[0.]+$ ]] \
    || die "--dist_timeout takes a number of seconds > 0, got '${dist_timeout}'"
  [[ ${HOST_NODE_ADDR} =~ ^[^:[:space:]]+:[0-9]+$ ]] \
    || die "--HOST_NODE_ADDR takes node 0's host:port, e.g. node0:29400, got '${HOST_NODE_ADDR}'"
  local port=${HOST_NODE_ADDR##*:}
  [[ ${#port} -le 5 && 10#${port} -ge 1 && 10#${port} -le 65535 ]] \
    || die "--HOST_NODE_ADDR ${HOST_NODE_ADDR}: port ${port} is not a TCP port (1..65535)"
  [[ ${node_rank} -gt 0 ]] || return 0
  [[ ${stage} -le 4 ]] || die "--node_rank ${node_rank}: stages 5-7 run on node 0, which holds the checkpoints"
  if [[ ${stop_stage} -gt 4 ]]; then
    log "node ${node_rank}: stages ${stage}..4 here; stages 5-7 run on node 0, which holds the checkpoints"
    stop_stage=4
  fi
  [[ -z ${checkpoint} ]] || log "node ${node_rank}: --checkpoint is read on node 0 (rank 0 sends it to every rank)"
  checkpoint=
}

# load_corpus_settings: recipes/<corpus>/settings.sh, then what the command line gave (kept in given).
load_corpus_settings() {
  local v settings="train_set dev_set test_sets token_type nbpe bpe_mode wer_char text_case text_punctuation"
  declare -gA given=()
  for v in ${settings}; do given[${v}]=${!v}; done
  train_set_fallback=     # settings.sh may name a set to train on when train_set was not prepared
  lm_names=               # settings.sh may list published LMs (recipes/<corpus>/download_lm.sh fetches them) ...
  lm_name_default=        # ... and the one --lm true decodes with unless --lm_name picks another
  peer_results=           # settings.sh may name other toolkits' published results on its split (stage 7's RESULTS.md)
  . "recipes/${corpus}/settings.sh"
  for v in ${settings}; do [[ -z ${given[${v}]} ]] || printf -v "${v}" '%s' "${given[${v}]}"; done
  one_of token_type "${token_type}" char bpe
  one_of bpe_mode "${bpe_mode}" unigram bpe
  one_of wer_char "${wer_char}" 0 1
  # the recipe's text normalisation (wenet_udps/utils/text_norm.py), passed to every tool that reads transcripts
  text_case=${text_case:-keep}
  text_punctuation=${text_punctuation:-refuse}
  one_of text_case "${text_case}" keep upper lower
  one_of text_punctuation "${text_punctuation}" refuse keep remove
  text_norm_opts=(--case "${text_case}" --punctuation "${text_punctuation}")
  [[ -z ${peer_results} || -f ${peer_results} ]] \
    || die "recipes/${corpus}/settings.sh: peer_results names ${peer_results}, which does not exist"
  [[ ${nbpe} =~ ^[0-9]+$ ]] || die "--nbpe takes an integer, got '${nbpe}'"
  [[ ${token_type} == char || ${nbpe} -gt 0 ]] || die "--token_type bpe needs --nbpe > 0"
  [[ -n ${test_sets// /} ]] || die "--test_sets is empty: name the sets to decode"
}

# pick_variants: sets variants, the att_family value each model trains with (wenet_udps.model_builder maps it to
# each site's type): --families', a site set's of --udps_sites, or with --config alone what the conf says ("conf").
pick_variants() {
  local s err
  one_of keep_checkpoints "${keep_checkpoints}" all averaged
  if [[ -n ${udps_sites} ]]; then
    [[ -z ${families} ]] || die "--udps_sites and --families both pick the models: give one"
    [[ " ${udps_sites} " == *" none "* ]] || die "--udps_sites needs none: the scaled-dot model the others are tested against"
    variants=
    for s in ${udps_sites}; do   # none/all are the scaled_dot/udps families; a site set is UDPS at those sites
      case ${s} in
        none) variants+=" scaled_dot" ;; all) variants+=" udps" ;;
        *:*|true|false) die "--udps_sites takes none, all or sites joined by + (enc_self dec_self dec_cross), got '${s}'" ;;
        *) variants+=" udps:${s}" ;;
      esac
    done
    variants=${variants# }
  elif [[ -n ${families// /} ]]; then
    # wenet_udps' own check, from its registry of families: a new family is valid here without editing run.sh
    err=$(python3 -c 'import sys; from wenet_udps.model_info import families_error; print(families_error(sys.argv[1:]))' \
          ${families}) || die "python3 could not check --families"
    [[ -z ${err} ]] || die "--families: ${err}"
    variants=$(echo ${families})
  elif [[ -n ${config} ]]; then
    variants=conf
  else
    variants="scaled_dot udps"
  fi
  config=${config:-${default_config}}
  [[ -f ${config} ]] || die "config ${config} not found; pick one under ${PWD}/conf/${corpus}/ (a relative path is" \
    "read from the directory run.sh is started in)"
  one_of loso "${loso}" true false
}

# run_loso: --loso true hands the whole run to recipes/fsdd/loso.sh (one run.sh per fold).
run_loso() {
  [[ ${corpus} == fsdd ]] || die "--loso true needs speakers to hold out: only --corpus fsdd has them"
  [[ -z ${udps_sites} ]] || die "--loso true compares attention families (--families, default scaled_dot udps); it does not take --udps_sites"
  check_seeds
  exec bash recipes/fsdd/loso.sh --stage "${stage}" --stop_stage "${stop_stage}" --seeds "${seeds:-1 2}" \
    --cpu_jobs "${cpu_jobs}" --exp_root "${dir:-exp/fsdd_loso/$(basename "${config}" .yaml)}" \
    --data_root "${data:-data/fsdd_loso}" --download_dir "${download_dir:-downloads/fsdd}" \
    --prepare_opts "${prepare_opts}" --compare_root "${loso_compare}" -- "${args_given[@]}" "${resolved[@]}"
}

# check_decode_values: stage 5's decoding options (--decode_modes, --beam_size, --decode_batch_size,
# --decoding_chunk_size, --num_decoding_left_chunks, --joint_ctc_weight) and, with --lm true, --lm_weights,
# --word_scores, --lm_order and --lm_prune, by the rules of the programs stages 2 and 5 give them to
# (wenet_udps/transformer/decode_options.py, wenet_udps/lm/options.py; ceilings included), and --num_workers by the
# checker of the programs stages 1 and 4 give it to (wenet_udps/utils/cli.py workers_int: its ceiling, a multiple of
# the CPUs), before any stage: a bad value would stop a stage half-way, after hours of training. One python3 for all
# (its torch import is most of the time).
check_decode_values() {
  local err lm_values=()
  [[ ${lm} == false ]] || lm_values=("${lm_weights}" "${word_scores}" "${lm_order}" "${lm_prune}")
  err=$(python3 -c 'import argparse, sys; from wenet_udps.lm.options import run_sh_error as lm_error
from wenet_udps.transformer.decode_options import run_sh_error as decode_error
from wenet_udps.utils.cli import workers_int
try:
    workers_int(sys.argv[1])
    workers = ""
except argparse.ArgumentTypeError as e:
    workers = f"--num_workers {sys.argv[1]}: {e}"
args = sys.argv[2:14]
print(workers or decode_error(dict(zip(args[0::2], args[1::2]))) or (lm_error(*sys.argv[14:]) if sys.argv[14:]
                                                                     else ""))' "${num_workers}" \
        decode_modes "${decode_modes}" beam_size "${beam_size}" decode_batch_size "${decode_batch_size}" \
        decoding_chunk_size "${decoding_chunk_size}" num_decoding_left_chunks "${num_decoding_left_chunks}" \
        joint_ctc_weight "${joint_ctc_weight}" ${lm_values[@]+"${lm_values[@]}"}) \
    || die "python3 could not check the decoding options"
  [[ -z ${err} ]] || die "${err}"
}

# check_install: the stages run tools/*.py, which import the installed wenet_udps: it must be this checkout's
# (tools/install.sh does pip install -e .). find_spec, run from /: no 1.5 s torch import on every call, and not this
# folder's copy by accident.
check_install() {
  local installed
  installed=$(cd / && python3 -c "import importlib.util as u, os; s = u.find_spec('wenet_udps'); assert u.find_spec('torch')
print(os.path.dirname(s.submodule_search_locations[0]))" 2>/dev/null) \
    || die "wenet_udps or torch is not installed: run 'bash tools/install.sh' (see README)"
  [[ ${installed} -ef ${PWD} ]] || die "python3 imports wenet_udps from ${installed}, not from this checkout" \
    "(${PWD}): run 'bash tools/install.sh' here"
}

# describe_variants: fills exp_of (variant -> exp dir, named after the attention the variant really builds) and
# checks, before any work, that the GPUs exist and a streaming decode has a streaming conf.
describe_variants() {
  local n_ids desc o udps label streaming v described
  if [[ -n ${gpus} ]]; then
    n_ids=$(echo "${gpus}" | awk -F, '{print NF}')
    CUDA_VISIBLE_DEVICES=${gpus} python3 -c "import sys, torch; sys.exit(torch.cuda.device_count() < ${n_ids})" \
      || die "--gpus ${gpus}: torch sees fewer than ${n_ids} CUDA devices (torch.cuda.is_available():" \
             "$(python3 -c 'import torch; print(torch.cuda.is_available())')); omit --gpus to run on the CPU"
  fi
  desc=(--config "${config}")
  for o in "${overrides_given[@]}"; do desc+=(--override "${o}"); done
  for udps in ${variants}; do desc+=(--variant "${udps}"); done
  [[ -n ${checkpoint} && ${stage} -le 4 ]] && desc+=(--checkpoint "$(checkpoint_of "$(first_seed)")")
  described=$(python3 -m wenet_udps.bin.describe --porcelain "${desc[@]}" 2> "${tmp}/describe.err") \
    || die "$(tail -n 1 "${tmp}/describe.err")"
  while read -r udps label streaming; do
    for v in "${!exp_of[@]}"; do
      [[ ${exp_of[${v}]} != "${exp_prefix}_${label}" ]] || die "att_family ${v} and ${udps}: ${config} builds the" \
        "same attention (${label}) either way; drop one"
    done
    exp_of[${udps}]=${exp_prefix}_${label}
    if [[ ${decoding_chunk_size} -gt 0 && ${streaming} != true ]]; then
      die "--decoding_chunk_size ${decoding_chunk_size}: ${config} trains a non-streaming encoder (no" \
          "encoder_conf.use_dynamic_chunk / static_chunk_size); drop the option or train a streaming conf:" \
          "$(ls conf/*/*u2pp*.yaml | tr '\n' ' ')"
    fi
  done <<< "${described}"
}

# check_seeds: --seeds by value (01 is 1: the same model), each once, since a seed trained twice would count as two.
check_seeds() {
  local s n seen=" " normal=""
  for s in ${seeds}; do
    [[ ${s} =~ ^[0-9]+$ ]] || die "--seeds takes non-negative integers, got '${s}'"
    n=$((10#${s}))
    [[ ${seen} != *" ${n} "* ]] || die "--seeds lists seed ${n} more than once ('${s}' is ${n}): one model trained" \
      "twice would count as two seeds"
    seen+="${n} "
    normal+="${normal:+ }${n}"
  done
  seeds=${normal}
}

# check_checkpoint: --checkpoint continues one model. With --seeds each seed's model continues from its own
# checkpoint, so the path names it with {seed} (bin.train refuses a checkpoint of another seed: the seed is part of
# the conf its resume check compares).
check_checkpoint() {
  local s
  [[ -n ${checkpoint} ]] || return 0
  if [[ -n ${seeds} ]]; then
    [[ ${checkpoint} == *"{seed}"* ]] || die "--checkpoint continues one model, and --seeds trains one per seed:" \
      "write {seed} where each seed's path differs, e.g. --checkpoint exp/x_udps_seed{seed}/epoch_9.pt"
    for s in ${seeds}; do
      [[ -f $(checkpoint_of "${s}") ]] || die "--checkpoint: $(checkpoint_of "${s}") (seed ${s}) is not a file"
    done
  else
    [[ ${checkpoint} != *"{seed}"* ]] || die "--checkpoint ${checkpoint}: {seed} stands for each of --seeds, and" \
      "no --seeds is given"
    [[ -f ${checkpoint} ]] || die "--checkpoint: ${checkpoint} is not a file"
  fi
}

# plan_runs: sets runs, "<variant>:<seed>" per model trained ("none": the config's seed, exp dir without suffix).
plan_runs() {
  local s udps
  check_seeds
  runs=()
  # Seed by seed: with --cpu_jobs 2 a seed's two variants train side by side and their pair is complete first.
  for s in ${seeds:-none}; do for udps in ${variants}; do runs+=("${udps}:${s}"); done; done
  if [[ -n ${enc_init} ]] && runs_stage 4; then
    for udps in ${variants}; do
      [[ -f $(enc_init_of "${udps}") ]] || die "--enc_init: $(enc_init_of "${udps}") (for ${udps}) is not a file"
    done
  fi
}

runs_stage() { [[ ${stage} -le ${2:-$1} && ${stop_stage} -ge $1 ]]; }  # runs_stage N [M]: this run has stage N (or one of N..M)
enc_init_of() {  # enc_init_of VARIANT -> its --enc_init file ({attention} replaced by the variant's exp suffix)
  echo "${enc_init//\{attention\}/${exp_of[${1}]#"${exp_prefix}_"}}"
}
run_exp() {  # run_exp VARIANT:SEED -> its exp dir
  if [[ ${1##*:} == none ]]; then echo "${exp_of[${1%:*}]}"; else echo "${exp_of[${1%:*}]}_seed${1##*:}"; fi
}
first_seed() { local s; read -r -a s <<< "${seeds}"; echo "${s[0]:-none}"; }
checkpoint_of() { echo "${checkpoint//\{seed\}/$1}"; }  # checkpoint_of SEED -> --checkpoint for it ({seed} replaced)
list_name() { if [[ ${data_type} == raw ]]; then echo data.list; else echo data.list.shards; fi; }
# A stage that needs an earlier stage's output stops here, before any long work, saying which stage makes it.
require() {  # require FILE STAGE
  [[ -e $1 ]] || die "missing $1 (made by stage $2): run with --stage $2, or check --data/--dir"
}
