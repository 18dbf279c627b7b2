"""Attention kernels: the math of one attention call over heads, (B, H, T, d) tensors in, no parameters.

One module per implementation, and :mod:`~wenet_udps.kernels.dispatch` on top, which the attention modules call:

| module | what |
|---|---|
| ``reference`` | the UDPS similarity and the straightforward UDPS formula (what the others are tested against) |
| ``cpu_fused`` | UDPS on CPU below the tiled size: fewer passes, hand-derived backward, eager (nothing compiles) |
| ``one_query`` | UDPS for one query row (no gradient): the denominators folded into the keys, SDPA |
| ``prefix_pool`` | a beam's decoder self-attention step: an utterance's pooled keys read once for its hypotheses |
| ``cpu_tiled`` | UDPS on CPU: tiles compiled by ``torch.compile``, hand-derived backward |
| ``triton_udps`` | UDPS on CUDA: a FlashAttention-2 style Triton kernel, forward and deterministic backward |
| ``scaled_dot`` | the scaled-dot baseline through torch's SDPA |
| ``dispatch`` | picks the implementation by device, dtype, size and what is being recorded (export) |
| ``selfcheck`` | checks the Triton kernel against the reference once per process and key; falls back on a failure |
| ``preflight`` | the kernel checks of ``python -m wenet_udps.bin.gpu_check``: parity per dtype and mask, speed |
"""
