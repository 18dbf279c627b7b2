# Sourced by run.sh: data sets, units and scoring of the synthetic English corpus.
train_set=train
dev_set=dev
test_sets="test"
token_type=char      # letters: the 82-word vocabulary is too small for a BPE model
nbpe=0
bpe_mode=unigram
wer_char=0           # score words (WER)
default_config=conf/tiny_en/train_conformer.yaml
