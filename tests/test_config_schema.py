"""Every train.yaml key is checked by the one schema: typos are rejected with the file, key path, valid keys and a
"did you mean"; YAML strings where numbers belong are converted (issue "Nothing silently wrong", item 3)."""
import pytest
import yaml

from wenet_udps.config import load_config
from wenet_udps.utils.schema import ConfigError

CONF = "conf/aishell/train_conformer.yaml"


def _write(tmp_path, edit):
    config = yaml.safe_load(open(CONF))
    edit(config)
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


@pytest.mark.parametrize("edit, key, hint", [
    (lambda c: c.update(att_udp=True), "att_udp", "att_udps"),
    (lambda c: c.update(max_epochs=3), "max_epochs", "max_epoch"),
    (lambda c: c["dataset_conf"]["sort_conf"].update(sort_sise=3), "dataset_conf.sort_conf.sort_sise", "sort_size"),
    (lambda c: c["dataset_conf"]["batch_conf"].update(batch_sise=3), "dataset_conf.batch_conf.batch_sise",
     "batch_size"),
    (lambda c: c["dataset_conf"]["fbank_conf"].update(num_mel_bin=3), "dataset_conf.fbank_conf.num_mel_bin",
     "num_mel_bins"),
    (lambda c: c["dataset_conf"].update(spec_agu=True), "dataset_conf.spec_agu", "spec_aug"),
    (lambda c: c["encoder_conf"].update(num_block=3), "encoder_conf.num_block", "num_blocks"),
    (lambda c: c["optim_conf"].update(weight_decy=0.1), "optim_conf.weight_decy", "weight_decay"),
    (lambda c: c["scheduler_conf"].update(warmup_step=1), "scheduler_conf.warmup_step", "warmup_steps"),
    (lambda c: c["tokenizer_conf"].update(split_with_spaces=1), "tokenizer_conf.split_with_spaces",
     "split_with_space"),
    (lambda c: c["cmvn_conf"].update(cmvn_fil="x"), "cmvn_conf.cmvn_fil", "cmvn_file"),
    (lambda c: c["udps_conf"].update(alpha_int=3), "udps_conf.alpha_int", "alpha_init"),
])
def test_typo_names_file_key_valid_keys_and_suggestion(tmp_path, edit, key, hint):
    path = _write(tmp_path, edit)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: {key}: unknown key (did you mean '{hint}'?); valid keys: "), msg
    assert hint in msg.split("valid keys: ")[1]


def test_strings_where_numbers_belong_are_converted(tmp_path):
    path = tmp_path / "train.yaml"
    text = open(CONF).read().replace("lr: 0.002", "lr: 2e-3").replace("num_blocks: 12", 'num_blocks: "1"')
    path.write_text(text)
    assert yaml.safe_load(text)["optim_conf"]["lr"] == "2e-3"  # what PyYAML 1.1 gives
    config = load_config(str(path))
    assert config["optim_conf"]["lr"] == 0.002 and config["encoder_conf"]["num_blocks"] == 1
    assert config["grad_clip"] == 5.0 and isinstance(config["grad_clip"], float)


def test_values_that_do_not_convert_name_key_and_type(tmp_path):
    path = _write(tmp_path, lambda c: c["encoder_conf"].update(num_blocks="two"))
    with pytest.raises(ConfigError, match=r"train.yaml: encoder_conf.num_blocks: expected int, got 'two'"):
        load_config(path)
    path = _write(tmp_path, lambda c: c.update(att_udps="yes please"))
    with pytest.raises(ConfigError, match=r"att_udps: 'yes please': unknown site 'yes please'; valid: true, false"):
        load_config(path)
    path = _write(tmp_path, lambda c: c.update(att_udps=3))
    with pytest.raises(ConfigError, match=r"att_udps: expected bool or str or NoneType, got 3"):
        load_config(path)


def test_overrides_are_checked_the_same_way():
    with pytest.raises(ConfigError, match=r"^--override dataset_conf.sort_conf.sort_sise=3: "
                                          r"dataset_conf.sort_conf.sort_sise: unknown key \(did you mean 'sort_size'"):
        load_config(CONF, ["dataset_conf.sort_conf.sort_sise=3"])
    config = load_config(CONF, ["optim_conf.lr=1e-4", "dataset_conf.batch_conf.batch_size=3", "att_udps=true"])
    assert config["optim_conf"]["lr"] == 1e-4 and config["dataset_conf"]["batch_conf"]["batch_size"] == 3
    with pytest.raises(ConfigError, match="batch_size: must be >= 1, got -2"):
        load_config(CONF, ["dataset_conf.batch_conf.batch_size=-2"])
    with pytest.raises(ConfigError, match="unknown encoder 'conformr'; valid choices"):
        load_config(CONF, ["encoder=conformr"])


@pytest.mark.parametrize("conf", ["conf/aishell/train_transformer.yaml", "conf/librispeech/train_conformer.yaml",
                                  "conf/tiny_zh/train_conformer.yaml", "conf/fsdd/train_conformer.yaml"])
def test_shipped_confs_pass(conf):
    assert load_config(conf)["encoder_conf"]


def test_duplicate_key_is_an_error_naming_both_lines(tmp_path):
    """Issue 29: `att_udps: true` then `att_udps: false` trained scaled-dot; two `lr` lines used the second."""
    text = open(CONF).read()
    path = tmp_path / "dup.yaml"
    path.write_text("att_udps: true\n" + text)  # the conf's own `att_udps: false` is on its line 7
    with pytest.raises(ConfigError, match=r"dup.yaml:8: att_udps: given twice, on lines 1 and 8"):
        load_config(str(path))
    nested = tmp_path / "lr.yaml"
    nested.write_text(text.replace("  lr: ", "  lr: 200\n  lr: ", 1))
    with pytest.raises(ConfigError, match=r"lr.yaml:\d+: lr: given twice"):
        load_config(str(nested))


@pytest.mark.parametrize("override, message", [
    ("optim_conf.lr=-0.001", "optim_conf.lr: must be > 0, got -0.001"),
    ("optim_conf.lr=.nan", "optim_conf.lr: must be a finite number, got nan"),
    ("accum_grad=0", "accum_grad: must be >= 1, got 0"),
    ("grad_clip=0", "grad_clip: must be > 0, got 0"),
    ("grad_clip=.nan", "grad_clip: must be a finite number"),
    ("model_conf.ctc_weight=2", r"model_conf.ctc_weight: must be in \[0, 1\], got 2"),
    ("encoder_conf.dropout_rate=2", r"encoder_conf.dropout_rate: must be in \[0, 1\], got 2"),
    ("encoder_conf.attention_heads=0", "encoder_conf.attention_heads: must be >= 1, got 0"),
    ("dataset_conf.max_bad_fraction=.nan", "dataset_conf.max_bad_fraction: must be a finite number"),
    ("dataset_conf.fbank_conf.frame_shift=0", "dataset_conf.fbank_conf.frame_shift: must be > 0, got 0"),
    ("max_epoch=0", "max_epoch: must be >= 1, got 0"),
    ("scheduler_conf.warmup_steps=-1", "scheduler_conf.warmup_steps: must be >= 0, got -1"),
    # were torch's ValueError / an unpacking error from Adam, as a traceback (issue 36)
    ("optim_conf.betas=[0.9, 1.5]", r"optim_conf.betas\[1\]: must be in \[0, 1\), got 1.5"),
    ("optim_conf.betas=[0.9, 1]", r"optim_conf.betas\[1\]: must be in \[0, 1\), got 1"),
    ("optim_conf.betas=[0.9]", r"optim_conf.betas: expected a list of 2 values, got 1: \[0.9\]"),
    ("optim_conf.betas=[0.9, 0.98, 0.5]", "optim_conf.betas: expected a list of 2 values, got 3"),
])
def test_values_out_of_range_are_errors_naming_the_key(override, message):
    with pytest.raises(ConfigError, match=rf"^--override {override.split('=')[0]}=.*: {message}"):
        load_config(CONF, [override])


@pytest.mark.parametrize("override, message", [
    # issue 80, I: an allocator's RuntimeError traceback in describe, train and recognize
    ("encoder_conf.output_size=100000000000", r"encoder_conf.output_size: must be <= 65536, got 100000000000 \(a "
                                              r"model's weights are allocated at once"),
    ("decoder_conf.linear_units=100000000", "decoder_conf.linear_units: must be <= 65536"),
    ("encoder_conf.num_blocks=5000", "encoder_conf.num_blocks: must be <= 1024"),
    ("encoder_conf.cnn_module_kernel=100001", "encoder_conf.cnn_module_kernel: must be <= 1024"),
    # each key within its ceiling, the whole model not: the parameter count computed from the conf
    ("encoder_conf.output_size=16384", r"encoder_conf: output_size 16384, linear_units 2048, num_blocks 12, "
                                       r"attention_heads 4 make a model of about 3.\d+e\+10 parameters \(\d+ GiB of "
                                       r"float32 weights\), above the ceiling of 2e\+09"),
])
def test_model_sizes_have_a_ceiling_before_anything_is_allocated(override, message):
    with pytest.raises(ConfigError, match=rf"^--override {override.split('=')[0]}=.*: {message}"):
        load_config(CONF, [override])


def test_the_parameter_estimate_is_near_the_built_models_count():
    """The ceiling's estimate (model_builder.parameter_estimate) is within 15 % of the real count of shipped
    models, so that the ceiling means what it says."""
    from wenet_udps.model_builder import build_model, parameter_estimate, resolve_model_config
    for conf in (CONF, "conf/tiny_en/train_conformer.yaml"):
        config = load_config(conf) | {"input_dim": 80, "output_dim": 500}
        config.pop("cmvn_conf", None)
        config.pop("cmvn", None)
        estimate = sum(parameter_estimate(resolve_model_config(config)).values())
        real = sum(p.numel() for p in build_model(config).parameters())
        assert abs(estimate / real - 1) < 0.15, (conf, estimate, real)


@pytest.mark.parametrize("program", ["describe", "recognize", "train"])
def test_a_huge_model_is_one_line_in_every_program_that_builds_one(tmp_path, program):
    import os
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    for name in ("x.pt", "data.list"):
        (tmp_path / name).write_text("{}\n")
    args = {"describe": ["--config", CONF],
            "recognize": ["--config", CONF, "--checkpoint", str(tmp_path / "x.pt"), "--test_data",
                          str(tmp_path / "data.list"), "--result_dir", str(tmp_path / "out"), "--modes", "attention"],
            "train": ["--config", CONF, "--train_data", str(tmp_path / "data.list"), "--cv_data",
                      str(tmp_path / "data.list"), "--model_dir", str(tmp_path / "exp")]}[program]
    proc = subprocess.run([sys.executable, "-m", f"wenet_udps.bin.{program}", *args, "--override",
                           "encoder_conf.output_size=100000000000"], capture_output=True, text=True, cwd=root,
                          env=dict(os.environ, PYTHONPATH=str(root)), timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].endswith("encoder_conf.output_size: must be <= 65536, got "
                                                         "100000000000 (a model's weights are allocated at once; this "
                                                         "is far above any speech model's)")
    assert "Traceback" not in proc.stderr


def test_features_of_another_dimension_than_the_model_takes_are_one_line(tmp_path):
    """Issue 80, I: ``recognize --override dataset_conf.fbank_conf.num_mel_bins=80`` on a model of 40-dim features
    (and 40-dim CMVN stats) stopped with a ValueError traceback inside the model; now one line naming both."""
    config = yaml.safe_load(open(CONF))
    config.update(input_dim=80, output_dim=10, cmvn="global_cmvn", cmvn_conf={"cmvn_file": "/exp/global_cmvn"})
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config))
    assert load_config(str(path))["input_dim"] == 80
    with pytest.raises(ConfigError, match=r"^--override dataset_conf.fbank_conf.num_mel_bins=40: "
                                          r"dataset_conf.fbank_conf.num_mel_bins: makes 40-dim features, but the model "
                                          r"takes 80 \(input_dim\), and its CMVN stats /exp/global_cmvn are of 80"):
        load_config(str(path), ["dataset_conf.fbank_conf.num_mel_bins=40"])


# Integer constructor keys of the encoders and decoders that need no ceiling, and why.
UNBOUNDED_MODEL_KEYS = {
    "input_size": "given by the code (the feature dimension), never by a conf",
    "vocab_size": "given by the code (the units file)",
    "encoder_output_size": "given by the code (the encoder's output_size)",
    "static_chunk_size": "a chunk wider than the utterance is the whole utterance: it allocates nothing",
}


def test_every_size_of_every_encoder_and_decoder_has_a_ceiling():
    """The guard of the model-size ceiling: every integer key an encoder or decoder of the registries takes from a
    conf is refused at 10**12 by the schema's RANGES (found from their constructors, so a new part's size key is
    swept the day it is added; shown to fail: positionwise_conv_kernel_size had none)."""
    from wenet_udps.transformer.decoder import DECODER_CLASSES
    from wenet_udps.transformer.encoder import ENCODER_CLASSES
    from wenet_udps.utils.schema import check_range, params_of
    unbounded = []
    for registry in (ENCODER_CLASSES, DECODER_CLASSES):
        for name, cls in registry.items():
            for key, param in params_of(cls).items():
                if param.annotation is not int or key in UNBOUNDED_MODEL_KEYS:
                    continue
                try:
                    check_range(key, 10 ** 12, key)
                    unbounded.append(f"{name}.{key}")
                except ConfigError:
                    pass
    assert unbounded == []


@pytest.mark.parametrize("override, message", [
    # issue 80 round 7, I: accepted (max_epoch), or a ValueError / MemoryError traceback in features.py
    ("max_epoch=1000000000000", r"max_epoch: must be <= 100000, got 1000000000000 \(an epoch is a pass"),
    ("dataset_conf.fbank_conf.frame_length=1000000000000", r"dataset_conf.fbank_conf.frame_length: must be <= 1000, "
                                                           r"got 1000000000000"),
    ("dataset_conf.resample_conf.resample_rate=1000000000000", r"dataset_conf.resample_conf.resample_rate: must be "
                                                               r"<= 192000, got 1000000000000 \(Hz"),
    ("dataset_conf.fbank_conf.frame_length=0.001", r"dataset_conf.fbank_conf: num_mel_bins 80, frame_length 0.001 ms "
                                                   r"and frame_shift 10 ms do not fit audio at 16000 Hz"),
    ("dataset_conf.resample_conf.resample_rate=100", r"dataset_conf.fbank_conf: num_mel_bins 80, frame_length 25 ms "
                                                     r"and frame_shift 10 ms do not fit audio at 100 Hz \(dataset_conf."
                                                     r"resample_conf.resample_rate\): Kaldi's fbank says 'You may have "
                                                     r"set num_mel_bins too large"),
])
def test_data_and_loop_sizes_have_a_ceiling_and_features_fit_the_rate(override, message):
    with pytest.raises(ConfigError, match=rf"^--override {override.split('=')[0]}=.*: {message}"):
        load_config(CONF, [override])


@pytest.mark.parametrize("override", ["seed=4294967296", "seed=2147483648", "seed=-1",
                                      "dataset_conf.seed=10000000000000"])
def test_a_seed_numpy_and_torch_cannot_take_is_refused_naming_its_key(override):
    """Issue 80 round 7, F7: seed 2**32 passed every check, and training died in np.random.seed (a ValueError
    traceback; -1 alike). Every rank seeds with seed + rank, so the ceiling leaves room below 2**32."""
    key, value = override.split("=")
    words = (r"must be <= 2147483647, got \d+ \(numpy's seeds are 32-bit" if not value.startswith("-")
             else r"must be >= 0, got -1")
    with pytest.raises(ConfigError, match=rf"^--override {override}: {key}: {words}"):
        load_config(CONF, [override])
    load_config(CONF, [f"{key}=2147483647"])


@pytest.mark.parametrize("override", ["cosine_conf.eps=-1", "cosine_conf.eps=0", "udps_conf.eps=0",
                                      "udps_conf.eps=-0.5", "encoder_conf.attention_conf.eps=0"])
def test_a_norm_floor_eps_must_be_positive(override):
    """Issue 81 attack F2: cosine_conf.eps -1 passed every check and training died at the first batch with a
    traceback (math.sqrt(eps)); eps 0 gave NaN for a zero query or key row (UDPS the same). One line naming the key."""
    key, value = override.split("=")
    with pytest.raises(ConfigError, match=rf"^--override {override}: {key}: must be > 0, got {float(value)}$"):
        load_config(CONF, ["att_family=cosine" if "cosine" in key else "att_family=udps", override])
