"""The decoding modes' names (WeNet's, ESPnet's joint CTC/attention search, and their word-LM forms), by family.

Kept apart from the searches themselves (transformer/search.py, joint_search.py) and free of torch, so that what
only checks names and options (run.sh's start-up check through transformer/decode_options.py, argument parsers)
starts without importing torch: run.sh checks its decoding options at every start.
"""
METHODS_WITHOUT_LM = ("ctc_greedy_search", "ctc_prefix_beam_search", "attention", "attention_rescoring",
                      "joint_ctc_attention")
LM_METHODS = ("ctc_prefix_beam_search_lm", "attention_rescoring_lm", "joint_ctc_attention_lm")  # need lm_search
DECODING_METHODS = METHODS_WITHOUT_LM + LM_METHODS
# The joint CTC/attention beam search (transformer/joint_search.py), without and with the word LM.
JOINT_METHODS = ("joint_ctc_attention", "joint_ctc_attention_lm")
