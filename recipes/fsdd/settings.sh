# Sourced by run.sh: connected digits built from FSDD.
train_set=train
dev_set=dev
test_sets="test test_unseen"  # test_unseen: a speaker held out of training (prepare.sh --unseen_speaker);
                              # with --prepare_opts "--unseen_speaker none" pass --test_sets test too
token_type=char
nbpe=0
bpe_mode=unigram
wer_char=0           # score digit words
text_case=upper      # the transcripts are upper case already; LM text and hypotheses are upper-cased alike
text_punctuation=refuse  # none in the transcripts: one would be an error naming its lines (text_norm.py)
default_config=conf/fsdd/train_conformer.yaml
