"""The sherpa-onnx runtime needs no torch (a deployment installs sherpa-onnx, not PyTorch), and an export's int8
step logs no per-tensor onnxruntime notes. On a tiny model exported here and a clip written here."""
import json
import logging
import subprocess
import sys

import pytest
import yaml

from tests.decode.decode_helpers import write_clips
from tests.train.train_helpers import ROOT, make_model_dir

pytest.importorskip("sherpa_onnx")
pytest.importorskip("onnxruntime")

NO_TORCH = '''
import sys


class NoTorch:
    """Any import of torch fails, as in an environment without it."""
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("No module named 'torch' (blocked by the test)")
        return None


sys.meta_path.insert(0, NoTorch())
'''
DECODE = '''
import json
import yaml
from wenet_udps.export import sherpa_runtime as rt
from wenet_udps.dataset.audio import load_audio
config = yaml.safe_load(open(sys.argv[1]))
rec = rt.offline_recognizer(sys.argv[2], config)
wav, sr = load_audio(sys.argv[3])
print(json.dumps(rt.transcribe_offline(rec, [wav], sr)))
print("torch loaded:", "torch" in sys.modules)
'''


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from wenet_udps.config import load_config
    from wenet_udps.decode.data_list import model_from_checkpoint
    from wenet_udps.export.sherpa import export_sherpa
    tmp = tmp_path_factory.mktemp("sherpa_runtime")
    conf, ckpt = make_model_dir(tmp, att_udps=False)
    config = load_config(str(conf))
    export_sherpa(model_from_checkpoint(config, str(ckpt)), config["input_dim"],
                  config["tokenizer_conf"]["symbol_table_path"], str(tmp / "export"))
    return tmp, conf, write_clips(tmp, 1)[0]


def test_the_runtime_decodes_without_torch(exported):
    from wenet_udps.dataset.audio import load_audio
    from wenet_udps.export.sherpa_runtime import offline_recognizer, transcribe_offline
    tmp, conf, clip = exported
    proc = subprocess.run([sys.executable, "-c", NO_TORCH + DECODE, str(conf), str(tmp / "export"), str(clip)],
                          cwd=tmp, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    texts, loaded = proc.stdout.splitlines()[-2:]
    wav, sr = load_audio(str(clip))
    want = transcribe_offline(offline_recognizer(str(tmp / "export"), yaml.safe_load(conf.read_text())), [wav], sr)
    assert json.loads(texts) == want and loaded == "torch loaded: False"


def test_the_block_is_real(exported):
    """The same guard makes an import of torch fail: the test above would catch a torch import."""
    proc = subprocess.run([sys.executable, "-c", NO_TORCH + "import wenet_udps.dataset.dataset"],
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0 and "blocked by the test" in proc.stderr


def test_int8_quantization_logs_no_per_tensor_notes(exported, tmp_path, caplog):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from wenet_udps.export.sherpa import quantize_int8
    tmp, _, _ = exported
    caplog.set_level(logging.DEBUG)
    quantize_dynamic(model_input=str(tmp / "export" / "model.onnx"), model_output=str(tmp_path / "raw.onnx"),
                     op_types_to_quantize=["MatMul"], weight_type=QuantType.QInt8)
    notes = [r for r in caplog.records if "not specified" in r.getMessage()]
    assert len(notes) > 5  # onnxruntime's own call logs them
    # issue 57: and its pre-processing advice and "Ignore MatMul" notes, which the export logged too
    assert any("pre-processing before quantization" in r.getMessage() for r in caplog.records)
    assert any(r.getMessage().startswith("Ignore MatMul") for r in caplog.records)
    caplog.clear()
    quantize_int8(str(tmp / "export" / "model.onnx"), str(tmp_path / "int8.onnx"))
    assert (tmp_path / "int8.onnx").stat().st_size > 0
    assert not [r for r in caplog.records if "onnxruntime" in r.pathname], [r.getMessage() for r in caplog.records]
    logging.info("Quantization parameters for tensor:\"x\" not specified")  # the filter is gone after the call
    assert len(caplog.records) >= 1 and caplog.records[-1].getMessage().endswith("not specified")


def test_quantizer_warnings_other_than_its_advice_are_kept():
    """The filter drops the quantizer's notes and its pre-processing advice only: another warning it logs, and
    anything logged from elsewhere, passes."""
    import os

    from wenet_udps.export.sherpa import QuantizerNotes

    def record(level, message, path):
        return logging.LogRecord("root", level, path, 1, message, None, None)

    quantizer = os.path.join("site-packages", "onnxruntime", "quantization", "quantize.py")
    keep = QuantizerNotes().filter
    assert not keep(record(logging.INFO, "Ignore MatMul due to non float inputs /x/MatMul]", quantizer))
    assert not keep(record(logging.WARNING, "Please consider to run pre-processing before quantization.", quantizer))
    assert keep(record(logging.WARNING, "Model has an op the quantizer cannot handle", quantizer))
    assert keep(record(logging.INFO, "Ignore MatMul", os.path.join("wenet_udps", "export", "sherpa.py")))
