#!/usr/bin/env bash
# wenet_udps: the stage-by-stage driver for every corpus (WeNet's run.sh, one copy for all recipes).
#
#   bash run.sh                                   # the main job: tiny_zh on CPU, scaled-dot vs UDPS, table at the end
#   bash run.sh --families "scaled_dot udps cosine"   # one model per attention family (docs/udps.md)
#   bash run.sh --corpus aishell --download_dir /data/aishell --gpus 0,1,2,3 --stage -1 --stop_stage 7
#   bash run.sh --corpus librispeech --train_set train_100 --config conf/librispeech/train_conformer.yaml --stage 4
#   bash run.sh --corpus mini_librispeech --download_dir DIR    # CPU, real read English, speaker-disjoint test
#   bash run.sh --corpus an4 --download_dir DIR                 # CPU, CMU AN4 on ESPnet's split (its published WER)
#
# Stages: -1 download (with --lm true also a published LM), 0 prepare wav.scp/text, 1 CMVN stats, 2 units / BPE
#          model (and with --lm true a word n-gram LM), 3 data.list or shards, 4 train, 5 average + decode + score every dev/test set, 6 export, 7 results
#          table and plots.
# Every stage logs with a timestamp and can be rerun on its own (--stage N --stop_stage N). A stage whose output
# exists is skipped only when its stamp file records the same inputs and options; otherwise stages 0-3, 5 and 6
# are redone, and stage 4 stops with a message (a run is never overwritten).
set -euo pipefail
_caller_dir=${PWD}  # relative paths given on the command line are read from here (resolve_user_paths)
cd "$(dirname "$0")"
. tools/log.sh
. tools/run_lib.sh
. tools/run_setup.sh  # the checks before any work
. tools/run_data.sh   # stages -1..3
. tools/run_train.sh  # stage 4
. tools/run_eval.sh   # stages 5..7
. tools/run_lm.sh     # --lm true: the word LM of stages 2 and 5
. tools/run_hotwords.sh  # --hotwords true: the biasing test sets of stages -1, 0, 3, 5 and 7

corpus=tiny_zh          # recipes/<corpus>: tiny_zh tiny_en fsdd aishell librispeech mini_librispeech an4 (times: each recipe's README)
stage=-1                # first stage to run
stop_stage=7            # last stage to run
config=                 # training YAML; empty: the corpus' default_config (recipes/<corpus>/settings.sh)
families=               # attention families, one model each: any of scaled_dot udps cosine (a site set of one: udps:enc_self),
                        # each trained with att_family=<it>, whatever the conf's per-site types say; empty: "scaled_dot
                        # udps", or with --config what the conf itself says (docs/udps.md)
udps_sites=             # site ablation, one model per set: none | all | sites joined by + from enc_self dec_self
                        # dec_cross, e.g. "none enc_self dec_self+dec_cross all" (enc_self = the paper author's fork)
keep_checkpoints=all    # all | averaged: after stage 5 averages, delete epoch_N.pt/step_N.pt (final.pt stays)
dir=                    # experiment dir prefix; empty: exp/<corpus>/<config name>; _<attention> is appended
data=                   # data dir; empty: data/<corpus>
download_dir=           # where stage -1 downloads and stage 0 reads; empty: downloads/<corpus>
fsdd_dir=               # fsdd only: a local copy of FSDD's recordings/ (skips the download)
download_opts=          # extra options for recipes/<corpus>/download.sh, e.g. "--subset 100" (librispeech 100 h)
prepare_opts=           # extra options for recipes/<corpus>/prepare.sh, e.g. "--num_train 100" (tiny_*, fsdd);
                        # "--allow_partial true": use a copy with fewer utterances than the corpus as published
                        # (an4 librispeech mini_librispeech aishell fsdd; refused otherwise; RESULTS.md says so)
train_set=              # corpus settings, empty: recipes/<corpus>/settings.sh's. Training set, e.g. train_100
dev_set=                # cross-validation set of training
test_sets=              # sets decoded and scored in stage 5, e.g. "dev_clean dev_other test_clean test_other"
token_type=             # char | bpe
nbpe=                   # BPE vocabulary size (token_type bpe)
bpe_mode=               # unigram | bpe (sentencepiece model type)
wer_char=               # 1: score characters (CER); 0: words (WER)
text_case=              # keep | upper | lower: the case of the transcripts (stage 0), units, LM text and scoring
                        # (one normaliser, wenet_udps/utils/text_norm.py); empty: recipes/<corpus>/settings.sh's
text_punctuation=       # refuse | keep | remove: punctuation marks in them (refuse: an error naming the lines, as
                        # each would become a unit); empty: settings.sh's, else refuse
data_type=raw           # raw (data.list) | shard (tar shards)
num_utts_per_shard=1000 # shard only
num_nodes=1             # machines taking part in training (stage 4), each with --gpus or --nproc_per_node
node_rank=0             # this machine's rank (0 .. num_nodes-1). Node 0 hosts the rendezvous and alone writes the
                        # exp dirs (checkpoints, stamps, train.log, locks, TensorBoard) and runs stages 5-7; another
                        # node reads nothing there and writes nothing, and runs stages -1..4 only
HOST_NODE_ADDR=localhost:29400  # node 0's host:port, where every node meets (torchrun --rdzv_endpoint, static)
gpus=                   # comma-separated GPU ids, e.g. 0,1,2,3: torchrun, one process per GPU (nccl); empty: CPU
nproc_per_node=         # CPU: train through torchrun with this many processes per node (gloo), as --gpus does on
                        # GPUs; empty: one process per training (--cpu_jobs of them side by side)
dist_timeout=300        # torchrun runs: seconds a collective waits for the slowest rank; after that, or at once when
                        # a rank's process died, every other rank stops, naming the lost rank
skip_gpu_check=false    # with --gpus: true skips the GPU preflight (wenet_udps.bin.gpu_check) before stage 4
num_workers=2           # DataLoader workers per training process
cpu_jobs=2              # CPU only: trainings (variants x seeds) run side by side, each with nproc / cpu_jobs torch
                        # threads (all cores when one model trains) and its log in <exp>/train.log, each epoch's
                        # progress line printed here (1: one at a time, all cores, log to the terminal)
train_dtype=fp32        # fp32 | bf16 (autocast) | fp16 (autocast + GradScaler)
train_override=         # extra overrides for training, e.g. "max_epoch=3 dataset_conf.batch_conf.batch_size=8"
seeds=                  # training seeds, e.g. "1 2 3": one model per variant and seed, in <exp>_seed<N>; empty: one
                        # model with the config's seed (train's default), in <exp>
checkpoint=             # continue training one model from this checkpoint ({seed}: each of --seeds, e.g.
                        # exp/x_udps_seed{seed}/epoch_9.pt); default: its newest valid epoch_N/step_N.pt. A rerun
                        # may change max_epoch (--train_override max_epoch=N trains a finished run on); any other
                        # change of data or conf is refused (bin.train's resume check), --force true trains afresh
enc_init=               # fine-tuning: a new model starts with --enc_init_mods copied from this checkpoint; {attention}
                        # becomes each model's attention (e.g. exp/mini_librispeech/train_conformer_{attention}/avg_5.pt)
enc_init_mods=encoder.  # comma-separated module-name prefixes copied from --enc_init (WeNet's train.py options)
force=false             # true: train afresh where an exp dir holds an earlier run (its checkpoints are deleted)
average_num=5           # checkpoints averaged for decoding (fewer when fewer exist: avg_<number used>.pt)
average_mode=val_best   # val_best (the N best by cv loss) | latest (the last N epochs)
decode_modes="ctc_greedy_search ctc_prefix_beam_search attention attention_rescoring"
                        # (also joint_ctc_attention: ESPnet's joint CTC/attention beam search; with --lm true it
                        # adds joint_ctc_attention_lm, its LM weights tuned on dev apart)
beam_size=10
ctc_weight=0.5          # CTC weight in attention rescoring
joint_ctc_weight=0.3    # CTC weight λ of the joint modes: (1 - λ) decoder + λ CTC prefix score (ESPnet's 0.3)
reverse_weight=0.0      # right-to-left decoder weight (bitransformer)
decoding_chunk_size=-1  # -1: full attention; >0: streaming chunk size (needs a streaming conf, e.g. *_u2pp_*)
num_decoding_left_chunks=-1
decode_batch_size=16
lm=false                # true: stage 2 also builds a word n-gram LM (KenLM's lmplz; tools/install.sh --lm true) from
                        # the training transcripts and --lm_text, refusing --lm_text with a dev/test sentence
                        # (librispeech: stage -1 downloads OpenSLR 11's published LM instead, --lm_name); stage 5
                        # then tunes the LM weight and word score on dev and decodes every test set in the *_lm modes
lm_name=                # librispeech, --lm true: OpenSLR 11's LM to decode with: 3-gram.pruned.1e-7 (empty: this
                        # one, the usual first-pass LM), 3-gram.pruned.3e-7, 3-gram or 4-gram; other corpora have none
lm_mirror=              # librispeech: where stage -1 fetches the LM, e.g. https://openslr.elda.org/resources/11 (EU);
                        # empty: https://www.openslr.org/resources/11
lm_text=                # --lm true: a plain text file (one sentence a line) the LM learns besides the transcripts
lm_order=               # n-gram order of the LM built from text (>= 2); empty: 3
lm_prune=               # lmplz --prune counts per order from the unigrams, e.g. "0 1 1"; empty: none
lm_tag=                 # --lm true: a name for this LM, so that LMs of other text sit beside it: <data>/lm_<tag>,
                        # <exp>/lm_tune_<tag> and the results <exp>/<set>/<mode>_<tag> (RESULTS.md columns);
                        # empty: <data>/lm, <exp>/lm_tune, <exp>/<set>/<mode>
lm_weights="0.3 0.6 1.0"   # LM weights tried on dev (stage 5)
word_scores="0 1 2"     # word scores (bonus per word) tried on dev with each LM weight
hotwords=false          # aishell, librispeech: true = stage -1 also downloads the public biasing test sets (AISHELL-1:
                        # SeACo-Paraformer's hotword subsets and lists; LibriSpeech: Le et al.'s per-utterance lists
                        # of 100-2000 words), stage 0 prepares them, stage 5 decodes them with each list in the modes
                        # that take hotwords and scores B-WER, U-WER and phrase recall/precision/F1 with and without
                        # the list, stage 7 puts them in RESULTS.md (docs/hotwords.md)
context_score=3.0       # --hotwords true: bonus per matched unit of a listed phrase (recognize --context_score)
loso=false              # fsdd: true = leave-one-speaker-out; 5 speakers x 2 variants x 2 seeds: about 4 h on 2 cores
                        # (two folds at a time, 48 min per fold's pair of trainings). A model per held-out speaker,
                        # variant and seed (--seeds, default "1 2"), scored on that speaker; <dir>/RESULTS.md, loso.png
loso_compare=           # with --loso: an earlier LOSO exp dir over the same folds (old conf) for paired tests
declare -r help_message="Usage: bash run.sh [options]   (the main job: bash run.sh)
Stages (--stage N --stop_stage N reruns one):
  -1  download the corpus (recipes/<corpus>/download.sh; tiny_* synthesise it with espeak-ng); with --lm true
      also the corpus' published LM where it has one (librispeech: OpenSLR 11's --lm_name, download_lm.sh); with
      --hotwords true also the biasing lists (recipes/<corpus>/download_hotwords.sh -> <download_dir>/biasing)
   0  prepare wav.scp and text per set (recipes/<corpus>/prepare.sh); with --hotwords true also the biasing sets
      and lists (<data>/<set>/biasing/, wenet_udps/corpora/biasing_sets.py)
   1  global CMVN statistics of the training set (global_cmvn)
   2  units: characters (dict/lang_char.txt) or a sentencepiece BPE model; with --lm true also a word n-gram LM
      (<data>/lm/lm.arpa; <data>/lm_<tag> with --lm_tag) from <data>/<train_set>/text and --lm_text, refusing
      --lm_text holding a dev/test sentence (a character LM where scoring is by character: Mandarin), or the
      published LM decompressed; then its KenLM binary lm.bin and words lm.bin.words, which stage 5 decodes with
   3  data.list (raw) or tar shards per set
   4  train one model per attention family (or site set) and seed: <exp>/epoch_N.pt, final.pt, train.yaml; a rerun
      resumes, and may change max_epoch (--train_override max_epoch=N trains a finished run on); another change of
      data or conf is refused, naming it (bin.train's resume check), unless --force true trains afresh.
      On one CPU process per run, or through torchrun: --gpus (nccl) or --nproc_per_node N (CPU, gloo), and on
      several machines --num_nodes N --node_rank R --HOST_NODE_ADDR node0:port on each (the same command
      otherwise; node 0 writes, a lost node stops the others within --dist_timeout s, rerun to resume)
   5  average checkpoints (avg_N.pt), decode every test set in each mode, score (<exp>/<set>/<mode>/wer); with
      --lm true the LM weight and word score chosen on <dev_set> (<exp>/lm_tune), then the *_lm modes on every set
      (<exp>/<set>/<mode>_<tag> with --lm_tag)
   6  export TorchScript/ONNX (<exp>/export) and sherpa-onnx (<exp>/sherpa), parity checked
      With --hotwords true also each biasing test set decoded with each of its lists (<exp>/<set>/hot_<list>),
      the decodes with and without a list scored on the list (B-WER, U-WER, recall, precision, F1)
   7  sherpa-onnx CER and RTF, RESULTS.md (one row per model; with --seeds also mean ± std and paired tests of
      each family - scaled-dot and UDPS - cosine over utterances and seeds) and plots"
args_given=("$@")
. tools/parse_options.sh
[[ $# -eq 0 ]] || die "unexpected argument '$1': options are --name value (bash run.sh --help lists them)"

resolve_user_paths
check_options
check_hotword_options
check_nodes
load_corpus_settings
pick_variants
[[ ${loso} == false ]] || run_loso
data=${data:-data/${corpus}}
download_dir=${download_dir:-downloads/${corpus}}
exp_prefix=${dir:-exp/${corpus}/$(basename "${config}" .yaml)}
read -r -a overrides_given <<< "${train_override}"
check_install
[[ ${lm} == false ]] || { check_lm_options; check_lm_install; }
tmp=   # a scratch dir for stages 4-7
trap 'rm -rf "${tmp}"; [[ ${#training_pids[@]} -eq 0 ]] || kill "${training_pids[@]}" 2> /dev/null' EXIT
declare -A exp_of=()   # variant -> exp dir
check_seeds; check_checkpoint   # before describe_variants reads the first seed's checkpoint
if runs_stage 4 7; then tmp=$(mktemp -d); describe_variants; fi
plan_runs
cpu_threads=$(train_threads)

if runs_stage -1; then
  stage_download
  [[ ${lm} == false ]] || stage_lm_download
  [[ ${hotwords} == false ]] || stage_hotwords_download
fi
if runs_stage 0; then stage_prepare; [[ ${hotwords} == false ]] || stage_hotwords_prepare; fi
pick_units
if runs_stage 1; then stage_cmvn; fi
if runs_stage 2; then stage_units; [[ ${lm} == false ]] || stage_lm; fi
if runs_stage 3; then stage_lists; fi
if runs_stage 4; then stage_train; fi
if runs_stage 5; then stage_decode; fi
if runs_stage 6; then stage_export; fi
if runs_stage 7; then stage_results; fi
log "done (stages ${stage}..${stop_stage})"
