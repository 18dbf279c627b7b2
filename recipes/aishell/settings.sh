# Sourced by run.sh: AISHELL-1 (OpenSLR 33), 150 h train, character units and CER as in WeNet.
train_set=train
dev_set=dev
test_sets="dev test"   # decoded and scored in stage 5, as WeNet's recipe does
token_type=char
nbpe=0
bpe_mode=unigram
wer_char=1           # score characters (CER)
text_case=keep       # Mandarin characters have no case
text_punctuation=refuse  # none in the transcripts: one would be an error naming its lines (text_norm.py)
default_config=conf/aishell/train_conformer.yaml
