"""--enc_init / --enc_init_mods: a new run starts from another model's modules (fine-tuning to a new vocabulary),
copying exactly the named ones and refusing any mismatch before training."""
import pytest
import torch

from wenet_udps.model_builder import build_model
from wenet_udps.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from wenet_udps.train.init_modules import init_modules, parse_prefixes

from tests.train.train_helpers import make_experiment, run_train, tiny_config, write_units


def _model(units, vocab: int, att_udps: bool = False, seed: int = 0):
    config = tiny_config(units, att_udps=att_udps, encoder="conformer")
    config.update(input_dim=20, output_dim=vocab, cmvn=None)
    torch.manual_seed(seed)
    return build_model(config)


def _save(tmp_path, model) -> str:
    return save_checkpoint(str(tmp_path), "donor", {"model": model.state_dict()}, {"epoch": 0})


@pytest.fixture
def units(tmp_path):
    path = tmp_path / "units.txt"
    write_units(path)
    return path


def test_copies_the_named_modules_and_keeps_the_rest_fresh(tmp_path, units):
    donor, new = _model(units, vocab=40, seed=1), _model(units, vocab=13, seed=2)
    fresh = {k: v.clone() for k, v in new.state_dict().items()}
    n = init_modules(new, _save(tmp_path, donor), parse_prefixes("encoder"))
    got, theirs = new.state_dict(), donor.state_dict()
    enc = [k for k in got if k.startswith("encoder.")]
    assert n == len(enc) > 0
    assert all(torch.equal(got[k], theirs[k]) for k in enc)
    # The vocabulary-sized layers and the decoder are the new model's own.
    assert all(torch.equal(got[k], fresh[k]) for k in got if not k.startswith("encoder."))
    assert got["ctc.ctc_lo.weight"].shape[0] == 13


def test_several_prefixes(tmp_path, units):
    donor, new = _model(units, vocab=40, seed=1), _model(units, vocab=13, seed=2)
    init_modules(new, _save(tmp_path, donor), parse_prefixes("encoder., decoder.decoders."))
    assert torch.equal(new.state_dict()["decoder.decoders.0.self_attn.linear_q.weight"],
                       donor.state_dict()["decoder.decoders.0.self_attn.linear_q.weight"])


@pytest.mark.parametrize("prefixes,donor_udps,message", [
    ("nothing.", False, "holds nothing under 'nothing.'; its modules: ctc., decoder., encoder."),
    ("ctc.", False, "ctc.ctc_lo.weight has shape (40, 32), this model's (13, 32)"),
    ("encoder.", True, "other attention type"),
])
def test_mismatches_are_refused_and_copy_nothing(tmp_path, units, prefixes, donor_udps, message):
    donor, new = _model(units, vocab=40, att_udps=donor_udps, seed=1), _model(units, vocab=13, seed=2)
    before = {k: v.clone() for k, v in new.state_dict().items()}
    with pytest.raises(CheckpointError, match="donor.pt") as e:
        init_modules(new, _save(tmp_path, donor), parse_prefixes(prefixes))
    assert message in str(e.value)
    assert all(torch.equal(v, before[k]) for k, v in new.state_dict().items())


def test_a_model_lacking_parameters_of_the_new_one_is_refused(tmp_path, units):
    """A scaled-dot donor for a UDPS model: the UDPS encoder's alpha/beta have no source."""
    donor, new = _model(units, vocab=40, seed=1), _model(units, vocab=13, att_udps=True, seed=2)
    with pytest.raises(CheckpointError, match="attention"):
        init_modules(new, _save(tmp_path, donor), ["encoder."])


def test_prefix_parsing():
    assert parse_prefixes("encoder") == ["encoder."]
    assert parse_prefixes("encoder.,decoder.decoders.0") == ["encoder.", "decoder.decoders.0."]
    with pytest.raises(ValueError, match="comma-separated"):
        parse_prefixes(" , ")


def test_train_starts_from_the_encoder_and_a_resume_ignores_it(tmp_path, fsdd_dir):
    exp = make_experiment(tmp_path / "a", fsdd_dir, att_udps=False, encoder="conformer", max_epoch=1)
    run_train(exp, tmp_path / "donor")
    donor = load_checkpoint(str(tmp_path / "donor" / "final.pt"))["model"]
    exp2 = make_experiment(tmp_path / "b", fsdd_dir, att_udps=False, encoder="conformer", max_epoch=1)
    proc = run_train(exp2, tmp_path / "new", "--enc_init", str(tmp_path / "donor" / "final.pt"), "--override",
                     "optim_conf.lr=1e-12", "--override", "scheduler_conf.warmup_steps=1")
    assert "initialised" in proc.stderr and "encoder." in proc.stderr
    got = load_checkpoint(str(tmp_path / "new" / "final.pt"))["model"]
    # lr 1e-12: the encoder is still the donor's after an epoch (batch-norm statistics aside). Without --enc_init it
    # would be the seed's fresh one, which the donor's epoch at lr 0.002 moved away from.
    same = [k for k in got if k.startswith("encoder.") and "running_" not in k and "num_batches" not in k]
    assert same and all(torch.allclose(got[k], donor[k], atol=1e-8, rtol=0) for k in same)
    resumed = run_train(exp2, tmp_path / "new", "--enc_init", str(tmp_path / "donor" / "final.pt"),
                        "--checkpoint", str(tmp_path / "new" / "epoch_0.pt"), "--override", "max_epoch=2",
                        "--override", "optim_conf.lr=1e-12", "--override", "scheduler_conf.warmup_steps=1")
    assert "is for a new run: not used" in resumed.stderr
