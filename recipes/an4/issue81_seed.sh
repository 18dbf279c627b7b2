#!/usr/bin/env bash
# Issue 81's three-way AN4 verdict (docs/an4.md, "Does UDPS beat cosine attention?"), one seed per call.
#
#   bash recipes/an4/issue81_seed.sh --pin PIN_WORKTREE --seed N --work WORK --download_dir AN4_DIR [--out DIR]
#                                    [--families "scaled_dot udps cosine"]
#
# PIN_WORKTREE is a checkout of the verdict's one commit (recipes/an4/hypotheses/issue81/COMMIT): every model of
# every seed is trained and decoded by that commit's run.sh and package, whatever session runs this. For seed N it
# trains the three families (stages -1..4, the one-hour default), decodes dev and test in every mode (stage 5, the
# joint modes at λ 0.3, the LM modes with weights tuned on dev), then, on hard-linked copies of the three models,
# the joint modes at λ 0.1 0.2 0.5 0.7 (the dev grid; test is decoded at each λ too because the models do not
# outlive the machine, and the verdict reads only the λ that dev chose), and copies every decode's text, wer and
# decode.info (and the LM tuning grids' wer and best) to recipes/an4/hypotheses/issue81/<family>_seed<N>/, with the UDPS
# model's r statistics (norm_ratio.json, .txt: this checkout's wenet_udps.bin.norm_ratio), and the references once
# (refs/<set>/text; recipes/an4/issue81_verdict.py reads them). A rerun resumes:
# run.sh skips what its stamps show done. --families: some of the three (two at a time use this 2-core machine's
# cores; one model is about 2 hours of a core, and a session's machine may not outlive three), each kept as it ends.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
pin= seed= work= download_dir= families="scaled_dot udps cosine"
out_root=${here}/recipes/an4/hypotheses/issue81   # --out: where the decodes are kept, and COMMIT read
while [[ $# -gt 0 ]]; do
  case $1 in
    --pin) pin=$2 ;; --seed) seed=$2 ;; --work) work=$2 ;; --download_dir) download_dir=$2 ;; --out) out_root=$2 ;;
    --families) families=$2 ;;
    *) echo "issue81_seed.sh: unknown option '$1' (--pin --seed --work --download_dir --out --families)" >&2
       exit 2 ;;
  esac
  shift 2
done
[[ -n ${pin} && -n ${seed} && -n ${work} && -n ${download_dir} ]] \
  || { echo "issue81_seed.sh: --pin, --seed, --work and --download_dir are all needed" >&2; exit 2; }
[[ ${seed} =~ ^([1-9]|10)$ ]] || { echo "issue81_seed.sh: --seed ${seed}: the verdict's seeds are 1-10" >&2; exit 2; }
[[ -n ${families// /} ]] || { echo "issue81_seed.sh: --families is empty (scaled_dot udps cosine)" >&2; exit 2; }
for family in ${families}; do
  [[ " scaled_dot udps cosine " == *" ${family} "* ]] \
    || { echo "issue81_seed.sh: --families: unknown family '${family}' (scaled_dot udps cosine)" >&2; exit 2; }
done
want=$(cat "${out_root}/COMMIT")
have=$(git -C "${pin}" rev-parse HEAD)
[[ ${have} == "${want}" ]] || { echo "issue81_seed.sh: ${pin} is at ${have}, the verdict's commit is ${want}" >&2; exit 2; }
[[ -z $(git -C "${pin}" status --porcelain --untracked-files=no) ]] \
  || { echo "issue81_seed.sh: ${pin} has changes to tracked files: the verdict's commit must run as committed" >&2; exit 2; }
pin=$(cd "${pin}" && pwd) work=$(mkdir -p "${work}" && cd "${work}" && pwd)
download_dir=$(cd "${download_dir}" && pwd)
log() { echo "$(date -u '+%Y-%m-%d %H:%M:%S') issue81_seed.sh seed ${seed}: $*" >&2; }

modes="ctc_greedy_search ctc_prefix_beam_search attention attention_rescoring joint_ctc_attention"
# The package the pin holds, not the checkout the venv's editable install names.
export PYTHONPATH=${pin}
cd "${pin}"
# One torch thread per training, whatever --families holds and the machine has (run.sh would give one model alone
# every core, and another thread count rounds differently): every seed and session trains the same bytes. Decoding
# (stage 5) keeps run.sh's own thread count.
common=(--corpus an4 --download_dir "${download_dir}" --data "${work}/data" --seeds "${seed}" --lm true --cpu_jobs 2)
log "train ${families} (stages -1..4, one thread each)"
OMP_NUM_THREADS=1 bash run.sh "${common[@]}" --dir "${work}/exp/an4" --families "${families}" \
  --decode_modes "${modes}" --stage -1 --stop_stage 4
log "decode (stage 5, λ 0.3)"
bash run.sh "${common[@]}" --dir "${work}/exp/an4" --families "${families}" --decode_modes "${modes}" \
  --stage 5 --stop_stage 5
for lambda in 0.1 0.2 0.5 0.7; do
  copy=${work}/lambda_${lambda}
  mkdir -p "${copy}/exp"
  for family in ${families}; do
    model=an4_${family}_seed${seed}
    # hard links: every write of stage 5 replaces a file (rename), so the originals stay as they are
    [[ -d ${copy}/exp/${model} ]] || cp -al "${work}/exp/${model}" "${copy}/exp/${model}.partial"
    [[ -d ${copy}/exp/${model} ]] || mv "${copy}/exp/${model}.partial" "${copy}/exp/${model}"
  done
  log "joint modes at λ ${lambda}"
  bash run.sh "${common[@]}" --dir "${copy}/exp/an4" --families "${families}" --decode_modes joint_ctc_attention \
    --joint_ctc_weight "${lambda}" --stage 5 --stop_stage 5
done

# keep DIR/<set>/<mode>/{text,wer,decode.info} of model dir $1 under $2, each mode dir named <mode>$3
keep() {
  local from=$1 to=$2 suffix=$3 set mode_dir mode f
  for set in dev test; do
    for mode_dir in "${from}/${set}"/*/; do
      mode=$(basename "${mode_dir}")
      [[ -z ${suffix} || ${mode} == joint_ctc_attention* ]] || continue
      mkdir -p "${to}/${set}/${mode}${suffix}"
      for f in text wer decode.info; do
        [[ ! -f ${mode_dir}/${f} ]] || cp "${mode_dir}/${f}" "${to}/${set}/${mode}${suffix}/${f}"
      done
    done
  done
  # the LM weight grids on dev (lm_tune/<dev>[_joint]/<weights>/wer) and what each chose (best)
  if [[ -d ${from}/lm_tune ]]; then
    while IFS= read -r f; do
      mkdir -p "$(dirname "${to}/lm_tune${suffix}/${f#"${from}"/lm_tune/}")"
      cp "${f}" "${to}/lm_tune${suffix}/${f#"${from}"/lm_tune/}"
    done < <(find "${from}/lm_tune" \( -name wer -o -name best \) -type f)
  fi
}
# the references every seed is scored against, kept once (the verdict rescores each kept text against them)
for set in dev test; do
  ref=${out_root}/refs/${set}/text
  if [[ -f ${ref} ]]; then
    cmp -s "${ref}" "${work}/data/${set}/text" \
      || { echo "issue81_seed.sh: ${work}/data/${set}/text differs from the kept ${ref}" >&2; exit 1; }
  else
    mkdir -p "$(dirname "${ref}")" && cp "${work}/data/${set}/text" "${ref}.partial" && mv "${ref}.partial" "${ref}"
  fi
done
for family in ${families}; do
  model=an4_${family}_seed${seed}
  dest=${out_root}/${family}_seed${seed}
  rm -rf "${dest}.partial"
  keep "${work}/exp/${model}" "${dest}.partial" ""
  for lambda in 0.1 0.2 0.5 0.7; do keep "${work}/lambda_${lambda}/exp/${model}" "${dest}.partial" "_lambda${lambda}"; done
  if [[ ${family} == udps ]]; then
    # r = |q|/|k| of every UDPS site (docs/an4.md, "r statistics"): a tool that only reads the model, run from this
    # checkout (the pin predates it), into the seed's folder before it is moved in; from ${here}, as `python -m`
    # puts the working directory (the pin) before PYTHONPATH
    log "r statistics of ${model}"
    (cd "${here}" && PYTHONPATH=${here} python3 -m wenet_udps.bin.norm_ratio --config "${work}/exp/${model}/train.yaml" \
      --checkpoint "${work}/exp/${model}/avg_5.pt" --test_data "${work}/data/test/data.list" \
      --out "${dest}.partial/norm_ratio.json" > "${dest}.partial/norm_ratio.txt")
  fi
  rm -rf "${dest}"
  mv "${dest}.partial" "${dest}"
  log "kept ${dest}"
done
log "done"
