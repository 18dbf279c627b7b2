#!/usr/bin/env bash
# Issue 56's GPU report in one command, from a bare GPU machine with this working tree and .device/ (made here by
# bench/gpu_carry.sh: the wheels the GPU image lacks and AN4 as FLAC). docs/gpu_report.md gives the device call.
#
#   bash bench/gpu_report.sh OUT_DIR                                  # a GPU machine: at most 8 minutes
#   bash bench/gpu_report.sh --dry_run true --an4 DIR OUT_DIR         # the same parts at toy sizes on the CPU
#
# Parts, in order of value, each in its own time box (a part that overruns is killed and the next one starts):
#   a  the native kernel tests, pytest -m gpu (fp32/fp16/bf16 against the reference, masks, determinism)
#   b  AN4 from audio on the GPU, both attentions, run.sh stages -1..5 on test (bench/gpu_an4.sh)
#   c  attention fwd and fwd+bwd against flash SDPA (UDPS's kernel and cosine attention), T 256..4096, bf16 and
#      fp16, peak memory (attention_gpu.py)
#   d  training step UDPS / scaled-dot and cosine / scaled-dot, AISHELL Conformer and Transformer, bf16
#      (train_step.py)
#   e  data pipeline throughput per worker on AN4's recordings (data_pipeline.py)
#   f  (only when named: --parts f) the kernel's block configurations, each checked against the reference, then
#      timed (attention_gpu.py --tune): the evidence a faster setting needs before it becomes the default
# OUT_DIR gets report.md and report.json (rewritten after every part, so a run cut short still leaves what it
# measured), logs.tar.gz (every part's log) and nothing else; the data and models stay in --work.
set -euo pipefail
_root=$(cd "$(dirname "$0")/.." && pwd)
. "${_root}/tools/log.sh"

dry_run=false          # true: toy sizes on the CPU, Triton in its interpreter (tests/test_bench_gpu_report.py)
an4=                   # holds an4/: the FLAC copy (tools/an4_to_flac.py) or CMU's SPHERE tree; empty: .device/an4_flac
wheels=                # installed (pip --target WORK/site) when soundfile, soxr or kaldi-native-fbank is missing;
                       # empty: .device/whl (bench/gpu_carry.sh downloads them)
work=                  # scratch dir (data, models, logs); empty: a new temporary dir
parts="a b c d e"      # the parts to run, in this order (f: only when named)
boxes=                 # time boxes in seconds, e.g. "a:90 b:250"; empty: the GPU's (or the dry run's) below
declare -r help_message="Usage: bash bench/gpu_report.sh [options] OUT_DIR"
. "${_root}/tools/parse_options.sh"
[[ $# -eq 1 ]] || die "expected OUT_DIR, got $# arguments (bash bench/gpu_report.sh --help)"
# Paths given are the caller's; then everything runs from the repository root.
out=$(realpath -m -- "$1")
an4=$(realpath -m -- "${an4:-${_root}/.device/an4_flac}")
wheels=$(realpath -m -- "${wheels:-${_root}/.device/whl}")
work=$(realpath -m -- "${work:-$(mktemp -d)}")
for name in ${parts}; do [[ ${name} =~ ^[a-f]$ ]] || die "--parts: unknown part '${name}' (valid: a b c d e f)"; done
for b in ${boxes}; do [[ ${b} =~ ^[a-f]:[0-9]+$ ]] || die "--boxes: '${b}' is not PART:SECONDS (parts a-f)"; done
cd "${_root}"
mkdir -p "${out}" "${work}/logs"
[[ -d ${an4}/an4 || -d ${an4}/etc ]] || die "--an4 ${an4}: no AN4 tree there (make it with bash bench/gpu_carry.sh)"
export PYTHONUNBUFFERED=1

# Python packages: this checkout first; the carried wheels where the image lacks them.
site=
if ! python3 -c "import soundfile, soxr, kaldi_native_fbank" 2> /dev/null; then
  compgen -G "${wheels}/*.whl" > /dev/null || die "soundfile/soxr/kaldi-native-fbank missing and no wheels in ${wheels}"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "${work}/site" \
    "${wheels}"/*.whl
  site=${work}/site
fi
export PYTHONPATH=${PWD}${site:+:${site}}${PYTHONPATH:+:${PYTHONPATH}}

# Sizes and time boxes (seconds; the GPU's of a-e add up to 450 s, so that the whole run stays within 8 minutes).
# The dry run passes the GPU's options too, its toy ones after them (the later value wins), so that a misspelt GPU
# option fails on the CPU, not on the one GPU run.
declare -A box=([a]=90 [b]=250 [c]=45 [d]=45 [e]=20 [f]=150)
b_opts=(--gpus 0 --train_dtype bf16 --skip_gpu_check true --num_workers 6)
c_opts=(--T 256 512 1024 2048 4096 --dtypes bfloat16 float16 --skip-reference-above 1024)
d_opts=(--device cuda --dtype bf16 --confs conformer transformer --batches 20x500 8x1500 --repeats 3 --profile
        --families scaled_dot udps cosine)
e_opts=(--num_files 300 --num_long 10)
f_opts=(--T 1024 4096 --dtypes bfloat16)
if [[ ${dry_run} == true ]]; then
  export TRITON_INTERPRET=1 WENET_UDPS_COMPILE=0
  box=([a]=120 [b]=400 [c]=120 [d]=120 [e]=60 [f]=120)
  tiny="max_epoch=2 encoder_conf.num_blocks=1 decoder_conf.num_blocks=1 encoder_conf.linear_units=32"
  tiny+=" decoder_conf.linear_units=32 encoder_conf.output_size=32 dataset_conf.batch_conf.batch_size=2"
  # the toy tree is a partial AN4 by design (the GPU's FLAC copy is whole, and held to the published counts)
  b_opts+=(--gpus "" --train_dtype fp32 --num_workers 0 --train_override "${tiny}"
           --prepare_opts "--num_dev 4 --allow_partial true" --cpu_jobs 1 --beam_size 2)
  c_opts+=(--device cpu --T 16 --dtypes float16 --batch 1 --heads 2 --d-k 16)
  d_opts+=(--device cpu --dtype fp32 --confs transformer --batches 1x100 --repeats 1)
  e_opts+=(--num_files 4 --num_long 1)
  f_opts+=(--device cpu --T 16 --dtypes float16 --batch 1 --heads 2 --d-k 16)
fi
for b in ${boxes}; do box[${b%%:*}]=${b#*:}; done
a_cmd=(python3 -m pytest -m gpu -q -p no:cacheprovider --junitxml "${work}/a_pytest.xml"
       tests/kernels/test_triton_udps.py tests/train/test_gpu_smoke.py)
# Triton compiles on the CPU: four processes compile four tests' kernels at once.
[[ ${dry_run} == true ]] || ! python3 -c "import xdist" 2> /dev/null || a_cmd+=(-n 4)

part_command() {  # part_command NAME: the command of part NAME, in the array cmd
  case $1 in
    a) cmd=("${a_cmd[@]}") ;;
    b) cmd=(bash bench/gpu_an4.sh "${work}/an4" "${an4}" "${b_opts[@]}") ;;
    c) cmd=(python3 -m bench.attention_gpu --no-flex "${c_opts[@]}" --out "${work}/c_attention.md") ;;
    d) cmd=(python3 -m bench.train_step --no-decode "${d_opts[@]}" --out "${work}/d_train_step.md") ;;
    e) cmd=(python3 -m bench.data_pipeline --audio_dir "${an4}" --config conf/an4/train_conformer_gpu.yaml
            "${e_opts[@]}" --json "${work}/e_data_pipeline.json") ;;
    f) cmd=(python3 -m bench.attention_gpu --tune "${f_opts[@]}" --out "${work}/f_tune.md") ;;
  esac
}

report() {  # the report from what WORK holds so far; then the logs, packed. Never stops the run: the parts left
  # are worth more than a report written now.
  python3 -m bench.gpu_report write --work "${work}" --out "${out}" --dry_run "${dry_run}" \
    || log "the report writer failed (above); the next part runs, and the logs are packed"
  tar -czf "${out}/logs.tar.gz" -C "${work}" logs parts.tsv env.json 2> /dev/null || true
}

if ! python3 -m bench.gpu_report env > "${work}/env.json"; then
  log "reading the versions failed (above)"
  echo '{}' > "${work}/env.json"
fi
: > "${work}/parts.tsv"
for name in ${parts}; do
  part_command "${name}"
  log "part ${name} (at most ${box[${name}]} s): ${cmd[*]}"
  start=${EPOCHREALTIME}
  rc=0
  # timeout signals its whole process group: the trainings and DataLoader workers the part started too.
  timeout --kill-after=10 "${box[${name}]}" "${cmd[@]}" > "${work}/logs/${name}.log" 2>&1 || rc=$?
  seconds=$(awk -v a="${start}" -v b="${EPOCHREALTIME}" 'BEGIN { printf "%.1f", b - a }')
  printf '%s\t%s\t%s\t%s\n' "${name}" "${rc}" "${seconds}" "${box[${name}]}" >> "${work}/parts.tsv"
  log "part ${name}: exit ${rc} after ${seconds} s$([[ ${rc} -eq 0 ]] || echo "; the end of its log:")"
  [[ ${rc} -eq 0 ]] || tail -n 15 "${work}/logs/${name}.log" >&2
  report
done
log "report: ${out}/report.md (work dir ${work})"
