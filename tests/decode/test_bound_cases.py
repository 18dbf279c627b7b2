"""Issue 66, case 6 and F: a beam of a billion is one refusal, not 18 GB or a MemoryError; a beam wider than the
vocabulary decodes. (The walk of every entry point through the ceilings: test_bound_entry_points.py.)"""
import resource
import subprocess
import sys
import textwrap

import torch

from tests.decode.test_option_entry_points import exp  # noqa: F401 (fixture)
from tests.train.train_helpers import ROOT
from wenet_udps.transformer.search import attention_beam_search


def test_attention_takes_a_beam_wider_than_the_vocabulary(exp):  # noqa: F811
    """Its search took topk(beam) of each hypothesis's vocabulary: a RuntimeError above the vocabulary size."""
    model = exp["model"].model
    memory, mask = model.encoder(torch.randn(1, 120, 20), torch.tensor([120]))
    wide = attention_beam_search(model.decoder, memory, mask, model.vocab_size + 5, model.sos, model.eos)[0]
    narrow = attention_beam_search(model.decoder, memory, mask, model.vocab_size, model.sos, model.eos)[0]
    assert wide.score >= narrow.score - 1e-4


def _limited(code: str, gib: int = 4) -> subprocess.CompletedProcess:
    """``code`` in a fresh Python under an address-space limit of ``gib`` GiB, as the issue ran it."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (gib << 30, gib << 30))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, preexec_fn=limit)


def test_case6_recognize_with_a_beam_of_a_billion_is_one_usage_error(exp):  # noqa: F811
    proc = _limited(f"""
        from wenet_udps.bin import recognize
        from wenet_udps.utils.cli import run_cli
        import sys
        sys.argv = ["recognize", "--config", "{exp['conf']}", "--checkpoint", "{exp['ckpt']}", "--test_data",
                    "{exp['list']}", "--result_dir", "{exp['dir'] / 'res_billion'}", "--modes",
                    "ctc_prefix_beam_search", "--beam_size", "1000000000"]
        run_cli(recognize.main, "wenet_udps.bin.recognize")""")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "--beam_size: must be in 1..1000, got 1000000000 (hypotheses kept per frame" in lines[0], lines[0]


def test_case6_the_api_with_a_beam_of_a_billion_is_a_user_error(exp):  # noqa: F811
    proc = _limited(f"""
        import wenet_udps
        from wenet_udps.utils.cli import UserError
        model = wenet_udps.load_model("{exp['dir']}", checkpoint="avg.pt")
        try:
            model.transcribe("{exp['clips'][0]}", mode="ctc_prefix_beam_search", beam_size=10**9)
        except UserError as e:
            print("refused:", e)""")
    assert proc.returncode == 0 and "refused: beam_size=1000000000: must be in 1..1000" in proc.stdout, \
        proc.stderr[-2000:]
