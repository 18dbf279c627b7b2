# Sourced by run.sh: connected digits built from FSDD.
train_set=train
dev_set=dev
test_sets="test"
token_type=char
nbpe=0
bpe_mode=unigram
wer_char=0           # score digit words
default_config=conf/fsdd/train_conformer.yaml
