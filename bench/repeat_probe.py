"""How well a model's attention decoder predicts a token that repeats the one before it (妈妈, FOUR FOUR).

    python bench/repeat_probe.py --exp_dirs exp/tiny_zh/train_conformer_scaled_dot exp/tiny_zh/train_conformer_udps \
        --test_data data/tiny_zh/test/data.list

The decoder is fed each reference (teacher forcing, as in training) and scored on its next-token prediction at
three kinds of position: the token equals the previous one ("repeat"), the end of the sentence ("eos"), any other
("other"). Printed per model and kind: positions, argmax accuracy and the mean probability of the reference
token. A decoder that cannot count gives a repeat about half the probability, and `attention` decoding then
drops the second token (docs/small_confs.md).
"""
from collections import defaultdict
from typing import Dict, List

import torch
from torch.utils.data import DataLoader

from _harness import probe_parser
from wenet_udps.bin.recognize import eval_dataset, load_experiment
from wenet_udps.text import init_tokenizer

KINDS = ("repeat", "other", "eos")


def position_kinds(tokens: List[int]) -> List[str]:
    """The kind of each next-token position of ``tokens`` + eos."""
    kinds = ["repeat" if i > 0 and tokens[i] == tokens[i - 1] else "other" for i in range(len(tokens))]
    return kinds + ["eos"]


@torch.no_grad()
def probe(exp: str, checkpoint: str, test_data: str) -> Dict[str, List[float]]:
    """kind -> [positions, correct, sum of reference-token probabilities] over ``test_data``."""
    config, model = load_experiment(exp, checkpoint)
    dataset = eval_dataset(config, init_tokenizer(config), test_data, 16)
    totals: Dict[str, List[float]] = defaultdict(lambda: [0, 0, 0.0])
    for batch in DataLoader(dataset, batch_size=None, num_workers=0):
        memory, memory_mask = model.encoder(batch["feats"], batch["feats_lengths"])
        refs = [t[:int(n)].tolist() for t, n in zip(batch["target"], batch["target_lengths"])]
        ys_in = torch.full((len(refs), max(map(len, refs)) + 1), model.eos, dtype=torch.long)
        for i, ref in enumerate(refs):
            ys_in[i, :len(ref) + 1] = torch.tensor([model.sos] + ref)
        logits = model.decoder(memory, memory_mask, ys_in, torch.tensor([len(r) + 1 for r in refs]))[0]
        probs = logits.softmax(-1)
        for i, ref in enumerate(refs):
            for pos, (token, kind) in enumerate(zip(ref + [model.eos], position_kinds(ref))):
                totals[kind][0] += 1
                totals[kind][1] += int(probs[i, pos].argmax()) == token
                totals[kind][2] += float(probs[i, pos, token])
    return totals


def main() -> None:
    args = probe_parser(__doc__, checkpoint="avg_5.pt").parse_args()
    torch.set_num_threads(1)
    for exp in args.exp_dirs:
        totals = probe(exp, args.checkpoint, args.test_data)
        for kind in KINDS:
            n, correct, prob = totals[kind]
            if n:
                print(f"{exp} {kind}: positions {n} accuracy {100 * correct / n:.1f} % "
                      f"mean p(reference) {prob / n:.3f}")


if __name__ == "__main__":
    main()
