# Sourced by run.sh: LibriSpeech (OpenSLR 12). prepare.sh writes train_960 (all 960 h) and/or train_100
# (train-clean-100), whichever was downloaded; "--train_set train_100" selects the 100 h subset, and run.sh takes
# it by itself when only train-clean-100 was downloaded (train_set_fallback).
train_set=train_960
train_set_fallback=train_100
dev_set=dev          # dev_clean + dev_other, as in WeNet's recipe
test_sets="dev_clean dev_other test_clean test_other"   # as WeNet's recipe decodes
token_type=bpe
nbpe=5000
bpe_mode=unigram
wer_char=0           # score words (WER)
text_case=upper      # the transcripts are upper case already; LM text and hypotheses are upper-cased alike
text_punctuation=refuse  # none in the transcripts: one would be an error naming its lines (text_norm.py)
default_config=conf/librispeech/train_conformer.yaml
# run.sh --lm true: the word n-gram LMs OpenSLR 11 publishes with LibriSpeech (download_lm.sh), built by the corpus'
# authors from its LM book corpus; the pruned 3-gram is the usual first-pass LM (WeNet's and Kaldi's recipes).
lm_names="3-gram.pruned.1e-7 3-gram.pruned.3e-7 3-gram 4-gram"
lm_name_default=3-gram.pruned.1e-7
