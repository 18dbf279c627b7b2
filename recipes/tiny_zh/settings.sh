# Sourced by run.sh: data sets, units and scoring of the synthetic Mandarin corpus.
train_set=train
dev_set=dev
test_sets="test"
token_type=char
nbpe=0
bpe_mode=unigram
wer_char=1           # score characters (CER), as for AISHELL
default_config=conf/tiny_zh/train_conformer.yaml
