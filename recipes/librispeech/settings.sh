# Sourced by run.sh: LibriSpeech (OpenSLR 12). prepare.sh writes train_960 (all 960 h) and/or train_100
# (train-clean-100), whichever was downloaded; "--train_set train_100" selects the 100 h subset.
train_set=train_960
dev_set=dev          # dev_clean + dev_other, as in WeNet's recipe
test_sets="test_clean test_other"
token_type=bpe
nbpe=5000
bpe_mode=unigram
wer_char=0           # score words (WER)
default_config=conf/librispeech/train_conformer.yaml
