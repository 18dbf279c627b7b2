# Sourced by run.sh: mini LibriSpeech (OpenSLR 31), 2 h of read English for a CPU. Train, dev and test are
# speaker-disjoint (recipes/mini_librispeech/prepare.sh): test scores voices the models never heard.
train_set=train
dev_set=dev
test_sets="dev test"  # dev: where settings are chosen; test: the answer (never used to choose anything)
token_type=bpe
nbpe=256
bpe_mode=unigram
wer_char=0           # score words (WER); stage 5 also writes CER
text_case=upper      # the transcripts are upper case already; LM text and hypotheses are upper-cased alike
text_punctuation=refuse  # none in the transcripts: one would be an error naming its lines (text_norm.py)
default_config=conf/mini_librispeech/train_conformer.yaml
