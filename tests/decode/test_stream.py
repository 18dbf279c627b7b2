"""The chunk-by-chunk state gives recognize --simulate_streaming's text, piece by piece of audio."""
import numpy as np
import pytest
import soundfile as sf

import wenet_udps
from tests.decode.decode_helpers import read_hyps, write_clips, write_list
from tests.train.train_helpers import make_model_dir
from wenet_udps.bin import recognize
from wenet_udps.utils.cli import UserError

MODES = ["ctc_greedy_search", "ctc_prefix_beam_search", "attention", "attention_rescoring"]


@pytest.mark.parametrize("encoder, chunk, left", [("transformer", 4, -1), ("conformer", 2, 1)])
def test_stream_gives_the_simulate_streaming_text(tmp_path, encoder, chunk, left):
    conf, ckpt = make_model_dir(tmp_path, encoder=encoder, chunks={"use_dynamic_chunk": True, "causal": True}
                                if encoder == "conformer" else {"use_dynamic_chunk": True})
    clips = write_clips(tmp_path, 3)
    recognize.main(["--config", str(conf), "--checkpoint", str(ckpt), "--test_data",
                    str(write_list(clips, tmp_path / "test.list")), "--result_dir", str(tmp_path / "res"),
                    "--modes", *MODES, "--beam_size", "4", "--ctc_weight", "0.5", "--batch_size", "1",
                    "--simulate_streaming", "--decoding_chunk_size", str(chunk),
                    "--num_decoding_left_chunks", str(left)])
    model = wenet_udps.load_model(str(tmp_path), checkpoint="avg.pt")
    rng = np.random.default_rng(1)
    for mode in MODES:
        want = read_hyps(tmp_path / "res" / mode / "text")
        weight = {"ctc_weight": 0.5} if mode == "attention_rescoring" else {}
        for clip in clips:
            wav, sr = sf.read(str(clip), dtype="float32")
            stream = model.stream(chunk_size=chunk, left_chunks=left, mode=mode, beam_size=4, **weight)
            start, partials = 0, []
            while start < len(wav):  # pieces of uneven size, as a microphone delivers them
                size = int(rng.integers(50, 1500))
                stream.accept_waveform(wav[start:start + size], sr)
                partials.append(stream.partial())
                start += size
            assert stream.finish() == want[clip.stem], (mode, clip.name)
            assert len(stream.outputs) > 2 and any(partials)  # it did run chunk by chunk, with partial texts


def test_stream_mistakes_are_user_errors(tmp_path):
    make_model_dir(tmp_path, chunks={"use_dynamic_chunk": True})
    model = wenet_udps.load_model(str(tmp_path), checkpoint="avg.pt")
    stream = model.stream(chunk_size=4)
    stream.accept_waveform(np.zeros(800, dtype=np.float32), 8000)
    with pytest.raises(UserError, match="sample rate 16000 Hz differs from the stream's 8000 Hz"):
        stream.accept_waveform(np.zeros(800, dtype=np.float32), 16000)
    with pytest.raises(UserError, match="too short to decode"):
        model.stream(chunk_size=4).finish()
    with pytest.raises(UserError, match="chunk"):
        model.stream(chunk_size=0)
