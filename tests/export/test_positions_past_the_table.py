"""The exported streaming step graphs encode positions past the saved table (issue 80 B, found by the guard's
author): the traced graph gathered the (1,) offset's rows from the table as a constant of ``max_len`` rows, and
onnxruntime refused the Gather at position 5000, so a deployed stream (WeNet runtime's encoder_chunk.onnx, sherpa-onnx's
model-streaming.onnx) failed after about 200 s. Here the table is cut to 64 rows and the graphs run to 4x that."""
import numpy as np
import pytest
import torch

import wenet_udps
from wenet_udps.export.exporter import export_model
from wenet_udps.export.sherpa import SherpaStreaming, export_sherpa
from wenet_udps.export.wrappers import ChunkEncoder, chunk_mask, initial_caches
from tests.train.train_helpers import make_model_dir

CHUNK, LEFT, TABLE = 4, 2, 64


@pytest.mark.parametrize("graph", ["encoder_chunk", "model-streaming"])
def test_a_stream_past_the_saved_positions_matches_eager(tmp_path, graph):
    import onnxruntime as ort
    make_model_dir(tmp_path, encoder="conformer", chunks={"use_dynamic_chunk": True, "causal": True})
    loaded = wenet_udps.load_model(str(tmp_path), checkpoint="avg.pt")
    model, feat_dim = loaded.model.eval(), loaded.processor.feat_dim
    pos = model.encoder.embed.pos_enc
    full = pos.pe.clone()
    pos.max_len, pos.pe = TABLE, pos.pe[:, :TABLE]
    embed = model.encoder.embed
    window = (CHUNK - 1) * embed.subsampling_rate + embed.right_context + 1
    att, cnn = initial_caches(model, CHUNK, LEFT)
    size = CHUNK * LEFT
    sherpa = graph == "model-streaming"
    step = SherpaStreaming(model, CHUNK, LEFT) if sherpa else ChunkEncoder(model, CHUNK, LEFT)
    # exported as users export them (bin/export: wenet_udps.export.exporter, wenet_udps.export.sherpa)
    if sherpa:
        export_sherpa(model, feat_dim, str(tmp_path / "units.txt"), str(tmp_path / "out"), chunk_size=CHUNK,
                      left_chunks=LEFT)
    else:
        export_model(model, feat_dim, str(tmp_path / "out"), chunk_size=CHUNK, left_chunks=LEFT)
    path = str(tmp_path / "out" / f"{graph}.onnx")
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    produced, eager_att, eager_cnn, onnx_att, onnx_cnn = 0, att, cnn, att.numpy(), cnn.numpy()
    g = torch.Generator().manual_seed(0)
    while produced < 4 * TABLE:
        x = torch.randn(1, window, feat_dim, generator=g)
        mask = chunk_mask(size, min(produced, size), CHUNK)
        offset = torch.tensor([size + produced if sherpa else produced])
        with torch.no_grad():
            if sherpa:
                want, eager_att, eager_cnn = step(x, offset, torch.tensor([size]), eager_att, eager_cnn, mask)
                got, onnx_att, onnx_cnn = session.run(None, {
                    "x": x.numpy(), "offset": offset.numpy(), "required_cache_size": np.array([size]),
                    "attn_cache": onnx_att, "conv_cache": onnx_cnn, "attn_mask": mask.numpy()})
            else:
                want, _, eager_att, eager_cnn = step(x, offset, eager_att, eager_cnn, mask)
                got, _, onnx_att, onnx_cnn = session.run(None, {
                    "chunk": x.numpy(), "offset": offset.numpy(), "att_cache": onnx_att, "cnn_cache": onnx_cnn,
                    "att_mask": mask.numpy()})
        assert np.abs(want.numpy() - got).max() < 1e-4, produced
        produced += want.size(1)
    # and the eager positions past the cut table are the full table's: the formula, row for row
    rows = pos.position_encoding(torch.tensor([TABLE - 2]), 8, apply_dropout=False)
    assert torch.allclose(rows[0], full[0, TABLE - 2:TABLE + 6], atol=1e-6)
