from wenet_udps.utils.source_info import file_sha256, model_source, stale_reason


def test_a_result_whose_lm_was_rebuilt_or_removed_is_stale(tmp_path):
    ckpt, conf, lm = tmp_path / "avg.pt", tmp_path / "train.yaml", tmp_path / "lm.arpa"
    ckpt.write_bytes(b"weights")
    conf.write_text("x: 1\n")
    lm.write_text("first LM")
    source = {**model_source(str(ckpt), str(conf)), "lm": str(lm), "lm_sha256": file_sha256(str(lm))}
    assert stale_reason(source) is None
    lm.write_text("rebuilt from other text")
    assert "LM" in stale_reason(source) and "replaced" in stale_reason(source)
    lm.unlink()
    assert "no longer exists" in stale_reason(source)
    ckpt.write_bytes(b"retrained")
    assert "checkpoint" in stale_reason(source)  # the checkpoint is checked first


def test_a_result_without_an_lm_ignores_lms(tmp_path):
    ckpt = tmp_path / "avg.pt"
    ckpt.write_bytes(b"weights")
    assert stale_reason(model_source(str(ckpt), str(tmp_path / "c.yaml"))) is None
