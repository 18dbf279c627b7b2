"""Helpers shared by the dataset tests."""
import json


def read_list(path):
    return [json.loads(line) for line in open(path)]


def plain_conf(**extra):
    """No randomness: no shuffle, sort, dither or augmentation."""
    conf = {"shuffle": False, "sort": False, "fbank_conf": {"num_mel_bins": 40, "dither": 0.0},
            "filter_conf": {"min_length": 0, "max_length": 100000, "max_output_input_ratio": 10},
            "batch_conf": {"batch_type": "static", "batch_size": 3}}
    conf.update(extra)
    return conf
