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


def test_a_moved_record_finds_its_files_by_their_sha256_nearest_first(tmp_path):
    """Issue 66, G: ``mv exp exp_moved``: the checkpoint and LM a decode.info names are found at the same place
    relative to the record (``located``), and only with the SHA-256 it records; a file still at its recorded path
    is left there, replaced or not, for ``stale_reason`` to judge."""
    from wenet_udps.utils.source_info import read_record
    old = tmp_path / "exp" / "x"
    (old / "test" / "attention").mkdir(parents=True)
    (old / "avg_5.pt").write_bytes(b"weights")
    (tmp_path / "exp" / "lm").mkdir()
    (tmp_path / "exp" / "lm" / "lm.arpa").write_text("an LM")
    lm = tmp_path / "exp" / "lm" / "lm.arpa"
    source = {**model_source(str(old / "avg_5.pt"), str(old / "train.yaml")), "lm": str(lm),
              "lm_sha256": file_sha256(str(lm))}
    info = old / "test" / "attention" / "decode.info"
    info.write_text("".join(f"{k}: {v}\n" for k, v in source.items()))
    assert read_record(str(info)) == source
    (tmp_path / "exp").rename(tmp_path / "moved")
    moved = tmp_path / "moved" / "x"
    (moved / "test" / "avg_5.pt").write_bytes(b"other weights")   # the same name, looked at first: not it
    found = read_record(str(moved / "test" / "attention" / "decode.info"))
    assert found["checkpoint"] == str(moved / "avg_5.pt") and found["lm"] == str(tmp_path / "moved" / "lm" / "lm.arpa")
    assert stale_reason(found) is None
    (moved / "avg_5.pt").write_bytes(b"retrained")            # replaced after the move: not found, so stale
    assert "no longer exists" in stale_reason(read_record(str(moved / "test" / "attention" / "decode.info")))
