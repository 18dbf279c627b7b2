# Sourced by run.sh: mini LibriSpeech (OpenSLR 31), 2 h of read English for a CPU. Train, dev and test are
# speaker-disjoint (recipes/mini_librispeech/prepare.sh): test scores voices the models never heard.
train_set=train
dev_set=dev
test_sets="dev test"  # dev: where settings are chosen; test: the answer (never used to choose anything)
token_type=bpe
nbpe=256
bpe_mode=unigram
wer_char=0           # score words (WER); stage 5 also writes CER
default_config=conf/mini_librispeech/train_conformer.yaml
