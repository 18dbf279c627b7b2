# Sourced by run.sh: data sets, units and scoring of the synthetic Mandarin corpus.
train_set=train
dev_set=dev
test_sets="test"
token_type=char
nbpe=0
bpe_mode=unigram
wer_char=1           # score characters (CER), as for AISHELL
text_case=keep       # Mandarin characters have no case
text_punctuation=refuse  # none in the transcripts: one would be an error naming its lines (text_norm.py)
default_config=conf/tiny_zh/train_conformer.yaml
