"""TorchScript/ONNX export of ASR models (see wenet_udps.bin.export)."""
