#!/usr/bin/env bash
# run.sh's stage 4: one training per run (variant x seed), on the CPU side by side, or through torchrun on GPUs or
# CPU processes, on one node or several. A run is never overwritten: an exp dir trained with other settings stops
# the stage (its .train.stamp says how). Source after tools/run_setup.sh; the functions read run.sh's options.

# On the CPU, up to --cpu_jobs trainings run at once: a small model gains little from more intra-op threads, so
# two one-thread trainings on two cores take about the time of one (measured: docs/small_confs.md).
training_pids=() training_exps=() training_lines=()
# train_threads: torch threads per CPU training, OMP_NUM_THREADS when set, else nproc / the trainings that run at
# once: --cpu_jobs, or the models this command trains when they are fewer (one model alone gets every core instead of
# leaving them idle). The count is fixed by the command, not by which of its runs are left to train, so a rerun
# resumes with the same one; another count rounds differently (docs/reproducibility.md), and RESULTS.md records it.
train_threads() {
  local at_once=$(( ${#runs[@]} < cpu_jobs ? ${#runs[@]} : cpu_jobs ))
  (( at_once >= 1 )) || at_once=1
  echo "${OMP_NUM_THREADS:-$(( $(nproc) / at_once > 0 ? $(nproc) / at_once : 1 ))}"
}
progress_poll=2    # seconds between two looks at the background trainings' logs (print_progress)
train_on_cpu() {  # train_on_cpu EXP ARGS...: run bin.train now (cpu_jobs 1) or in the background
  local exp=$1; shift
  if [[ ${cpu_jobs} -eq 1 ]]; then
    python3 -m wenet_udps.bin.train "$@"; log_trained "${exp}"; return
  fi
  log "stage 4: ${exp} trains in the background (torch threads: ${cpu_threads}), log: ${exp}/train.log;" \
    "its progress lines follow here as each epoch ends"
  # Appended: a resumed run's log follows the interrupted one's, whose lines are not printed again.
  training_lines+=("$( (wc -l < "${exp}/train.log") 2> /dev/null || echo 0)")
  OMP_NUM_THREADS=${cpu_threads} python3 -m wenet_udps.bin.train "$@" >> "${exp}/train.log" 2>&1 &
  training_pids+=($!) training_exps+=("${exp}")
}
# print_progress: each background training's progress lines (wenet_udps.train.progress: the epoch, the losses,
# the time left; a warning such as a warm-up longer than the run) written to its train.log since the last call, on
# the terminal with the model's name.
print_progress() {
  local i total line
  for i in "${!training_exps[@]}"; do
    total=$( (wc -l < "${training_exps[i]}/train.log") 2> /dev/null || echo 0)
    (( total > training_lines[i] )) || continue
    while IFS= read -r line; do
      log "stage 4 progress, ${training_exps[i]##*/}: ${line#*progress: }"
    done < <(sed -n "$(( training_lines[i] + 1 )),${total}p" "${training_exps[i]}/train.log" | grep "progress: ")
    training_lines[i]=${total}
  done
}
log_trained() {  # log_trained EXP: the seed that ran, as the run's train.yaml records it (not run.sh's --seeds)
  local seed
  seed=$(sed -n 's/^seed: //p' "${1}/train.yaml" 2> /dev/null || true)   # none on a node other than the first
  log "stage 4: ${1} trained with seed ${seed:-unknown here} (${1}/train.yaml)"
}
wait_trainings() {  # wait for the background trainings, printing their progress; stop naming each one that failed
  local i failed=() running=true
  while [[ ${running} == true ]]; do
    running=false
    for i in "${!training_pids[@]}"; do
      ! kill -0 "${training_pids[i]}" 2> /dev/null || running=true
    done
    [[ ${running} == false ]] || sleep "${progress_poll}"
    print_progress
  done
  for i in "${!training_pids[@]}"; do
    if wait "${training_pids[i]}"; then
      log_trained "${training_exps[i]}"
    else
      failed+=("${training_exps[i]}")
      tail -n 5 "${training_exps[i]}/train.log" >&2
    fi
  done
  training_pids=() training_exps=() training_lines=()
  [[ ${#failed[@]} -eq 0 ]] || die "stage 4: training failed in ${failed[*]} (see train.log there); rerun" \
    "stage 4 to resume from the last valid checkpoint"
}

# gpu_preflight: kernel parity, a step per variant, a decode, speed (wenet_udps.bin.gpu_check). Sets gpu_json, copied
# into each exp dir that trains: a refused one keeps its own verdict.
gpu_preflight() {
  gpu_json=
  [[ -n ${gpus} && ${skip_gpu_check} != true ]] || return 0
  gpu_json=${tmp}/gpu_check.json
  log "stage 4: GPU preflight (python -m wenet_udps.bin.gpu_check)"
  if ! CUDA_VISIBLE_DEVICES=${gpus} python3 -m wenet_udps.bin.gpu_check --device cuda --config "${config}" \
      --dtype "${train_dtype}" --json "${gpu_json}"; then
    cp "${gpu_json}" "${exp_prefix}_gpu_check.json" 2> /dev/null || true
    die "stage 4: the GPU preflight failed (${exp_prefix}_gpu_check.json); attach it to a bug report;" \
      "--skip_gpu_check true trains anyway"
  fi
}

# train_key VARIANT SEED INIT: sets overrides (the conf overrides the run trains with) and train_stamp (what its
# .train.stamp records).
train_key() {
  local udps=$1 seed=$2 init=$3
  overrides=(cmvn_conf.cmvn_file="${cmvn}" tokenizer_conf.symbol_table_path="${units}")
  [[ ${udps} == conf ]] || overrides=(att_family="${udps}" "${overrides[@]}")
  [[ -n ${bpemodel} ]] && overrides+=(tokenizer_conf.bpe_path="${bpemodel}.model")
  # the BPE tokenizer upper-cases its input unless told the recipe's case (stage 2 trained the model in that case)
  [[ -z ${bpemodel} || ${text_case} == upper ]] || overrides+=(tokenizer_conf.case="${text_case}")
  overrides+=("${overrides_given[@]}")
  train_stamp=$(stamp_text config="$(conf_sum "${config}")" overrides="${overrides[*]}" data_type="${data_type}" \
    train_list="$(file_sum "${data}/${train_set}/$(list_name)")" \
    cv_list="$(file_sum "${data}/${dev_set}/$(list_name)")" units="$(file_sum "${units}")" \
    cmvn="$(file_sum "${cmvn}.stamp")" seed="${seed}")   # cmvn: what the stats were made from
  [[ -z ${init} ]] || train_stamp+=$'\n'$(stamp_text enc_init="$(file_sum "${init}")" enc_init_mods="${enc_init_mods}")
}

# train_run VARIANT:SEED: start (or resume, or skip) one training. Whether a run with other settings may go on is
# bin.train's one rule (wenet_udps.train.resume_check), asked here before training (--check_resume): max_epoch (and
# log_interval, save_interval) may change, so a finished run extended with --train_override max_epoch=N trains on
# from its newest checkpoint; any other change of data or conf would mix two runs and is refused, naming it.
# On several nodes every node starts every run (a node that skipped one would leave the others waiting at the
# rendezvous), and rank 0 decides in the job, for all nodes: resume, refusal, or nothing left to train.
train_run() {
  local udps=${1%:*} seed=${1##*:} exp init= newest trained=false args o resume
  exp=$(run_exp "$1")
  [[ -z ${enc_init} ]] || init=$(enc_init_of "${udps}")
  resume=$(checkpoint_of "${seed}")
  train_key "${udps}" "${seed}" "${init}"
  if [[ ${num_nodes} -eq 1 ]]; then
    newest=$(newest_checkpoint "${exp}")
    [[ -f ${exp}/final.pt || -n ${newest} ]] && trained=true
  fi
  if [[ ${num_nodes} -eq 1 && ${force} == false && -z ${resume} && -f ${exp}/final.pt ]] \
      && stamp_ok "${exp}/.train.stamp" "${train_stamp}"; then
    log "stage 4: ${exp}/final.pt exists, skipping (trained with the same settings)"; return 0
  fi
  args=(--config "${config}" --data_type "${data_type}" --train_data "${data}/${train_set}/$(list_name)"
        --cv_data "${data}/${dev_set}/$(list_name)" --model_dir "${exp}" --num_workers "${num_workers}"
        --dtype "${train_dtype}")
  for o in "${overrides[@]}"; do args+=(--override "${o}"); done
  [[ ${seed} == none ]] || args+=(--seed "${seed}")
  [[ -z ${init} ]] || args+=(--enc_init "${init}" --enc_init_mods "${enc_init_mods}")
  # Without --checkpoint, train resumes from the newest checkpoint that verifies (falling back past a damaged one).
  if [[ ${force} == true ]]; then args+=(--force); else args+=(--checkpoint "${resume:-auto}"); fi
  if [[ ${force} == false && ${trained} == true ]] && ! stamp_ok "${exp}/.train.stamp" "${train_stamp}" \
      && ! python3 -m wenet_udps.bin.train "${args[@]}" --device cpu --check_resume 2> "${tmp}/resume.err" > /dev/null
  then
    die "stage 4: ${exp} holds a run trained with other settings: $(tail -n 1 "${tmp}/resume.err" \
      | sed 's/^wenet_udps.bin.train: error: //; s/; resume with .*//'); keep its settings (max_epoch may change)," \
      "train afresh there with --force true, or train elsewhere with --dir"
  fi
  if [[ ${node_rank} -eq 0 ]]; then
    mkdir -p "${exp}"
    [[ -z ${gpu_json} ]] || cp "${gpu_json}" "${exp}/gpu_check.json"
    # Several nodes: after training, as rank 0's resume check runs in the job and a refused run leaves no stamp.
    [[ ${num_nodes} -gt 1 ]] || stamp_write "${exp}/.train.stamp" "${train_stamp}"
  fi
  # Wait for a free slot (CPU) first, so that the line below is logged when this training starts.
  [[ -n ${gpus}${nproc_per_node} || ${cpu_jobs} -eq 1 || ${#training_pids[@]} -lt ${cpu_jobs} ]] || wait_trainings
  local from=${resume:+, continuing from ${resume}}${newest:+, resuming}
  log "stage 4: train ${exp} (att_family ${udps}, seed ${seed/#none/of the conf})${from}"
  if [[ -z ${gpus}${nproc_per_node} ]]; then
    train_on_cpu "${exp}" "${args[@]}" --device cpu
  else
    train_torchrun "${exp}" "${args[@]}"
    [[ ${num_nodes} -eq 1 || ${node_rank} -ne 0 ]] || stamp_write "${exp}/.train.stamp" "${train_stamp}"
  fi
}

# train_torchrun EXP ARGS...: bin.train through torchrun, on this node's GPUs (nccl) or --nproc_per_node CPU
# processes (gloo): the same command on every node but --node_rank. Static rendezvous: node_rank R's processes are
# ranks R*N.., so node 0 holds rank 0, which alone writes EXP (its output is appended to EXP/train.log too); another
# node only prints. No restarts: a lost node stops the run (every rank names it within --dist_timeout s), and the
# same commands started again resume from the newest checkpoint.
train_torchrun() {
  local exp=$1 procs env=(CUDA_VISIBLE_DEVICES="${gpus}") device=cuda backend=nccl status=0 where; shift
  if [[ -n ${gpus} ]]; then
    procs=$(echo "${gpus}" | awk -F, '{print NF}')
  else  # the cores shared out among this node's processes, as --cpu_jobs shares them out among trainings
    procs=${nproc_per_node} device=cpu backend=gloo
    env+=(OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(( $(nproc) / procs > 0 ? $(nproc) / procs : 1 ))}")
  fi
  local cmd=(torchrun --nnodes="${num_nodes}" --nproc_per_node="${procs}" --node_rank="${node_rank}"
             --rdzv_backend=static --rdzv_endpoint="${HOST_NODE_ADDR}" --rdzv_id="$(basename "${exp}")"
             --max_restarts=0 -m wenet_udps.bin.train "$@" --device "${device}" --dist_backend "${backend}"
             --dist_timeout "${dist_timeout}")
  if [[ ${num_nodes} -gt 1 ]]; then
    where="this node writes ${exp}"
    [[ ${node_rank} -eq 0 ]] || where="node 0 writes the checkpoints and logs; nothing is written here"
    log "stage 4: node ${node_rank} of ${num_nodes} (training processes here: ${procs}) meets the others at" \
      "${HOST_NODE_ADDR}; ${where}"
  fi
  if [[ ${node_rank} -eq 0 ]]; then
    env "${env[@]}" "${cmd[@]}" 2>&1 | tee -a "${exp}/train.log" || status=$?
  else
    env "${env[@]}" "${cmd[@]}" || status=$?
  fi
  [[ ${status} -eq 0 ]] || die "stage 4: training ${exp} failed (exit ${status}; the lines above say why);" \
    "every checkpoint written stays: start the same command on every node again to resume from the newest"
  [[ ${node_rank} -ne 0 ]] || log_trained "${exp}"
}

stage_train() {  # stage 4: every run, the CPU ones up to --cpu_jobs at a time
  local f run
  for f in "${data}/${train_set}/$(list_name):3" "${data}/${dev_set}/$(list_name):3" "${units}:2" "${cmvn}:1"; do
    require "${f%:*}" "${f##*:}"
  done
  python3 -c "import sys; from wenet_udps.utils.cmvn_stats import read_cmvn_stats as load
try: load(sys.argv[1])
except (OSError, ValueError) as e: sys.exit(str(e))" "${cmvn}" || exit 1   # e.g. Kaldi stats: names the converter
  if [[ ${node_rank} -eq 0 ]]; then   # another node writes nothing into the exp dirs
    for run in "${runs[@]}"; do lock_exp "$(run_exp "${run}")"; done   # before anything is written there
  fi
  gpu_preflight
  for run in "${runs[@]}"; do train_run "${run}"; done
  wait_trainings
}
