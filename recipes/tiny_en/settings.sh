# Sourced by run.sh: data sets, units and scoring of the synthetic English corpus.
train_set=train
dev_set=dev
test_sets="test"
token_type=char      # whole words (the char tokenizer keeps English words whole): 82 words, too few for BPE
nbpe=0
bpe_mode=unigram
wer_char=0           # score words (WER)
text_case=upper      # the transcripts are upper case already; LM text and hypotheses are upper-cased alike
text_punctuation=refuse  # none in the transcripts: one would be an error naming its lines (text_norm.py)
default_config=conf/tiny_en/train_conformer.yaml
