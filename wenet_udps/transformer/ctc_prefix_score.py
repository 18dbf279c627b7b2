"""The CTC prefix score of the joint CTC/attention search (Watanabe et al. 2017, Algorithm 2), vectorised over
hypotheses x candidate tokens x frames.

For a prefix g the state is two forward variables over the frames t of its utterance: r_n[t], the log-probability
that frames 0..t emit g ending in its last label, and r_b[t], ending in blank. The prefix probability of h = g + c
sums every alignment of the whole utterance whose labels start with h:

    phi[t] = r_b[t] if c is g's last label (a repeat needs a blank between) else log(e^r_n[t] + e^r_b[t])
    psi(h) = log sum_t exp(phi[t - 1] + x[t, c])            (phi[-1] = 0 for the empty g, else -inf)
    r_n(h)[t] = log(e^r_n(h)[t - 1] + e^phi[t - 1]) + x[t, c]
    r_b(h)[t] = log(e^r_b(h)[t - 1] + e^r_n(h)[t - 1]) + x[t, blank]

and the end-of-sentence score of g is the full CTC probability of g, log(e^r_n[T - 1] + e^r_b[T - 1]); blank is
never a label (-inf). ESPnet's ``CTCPrefixScoreTH`` runs the recursions frame by frame, T small steps per decoding
step. Here each recursion is unrolled into cumulative sums: with C[t] = x[0, c] + ... + x[t, c],

    r_n(h)[t] = C[t] + logcumsumexp_s(phi[s - 1] + x[s, c] - C[s])[t]

(and r_b alike with the blank's sums): no Python loop over frames. A decoding step needs psi of every candidate
(:meth:`CtcPrefixScorer.scores`: one ``logsumexp`` over (hypotheses, candidates, frames)), but the forward variables
only of the beam_size extensions that survive (:meth:`CtcPrefixScorer.extend`: two scans over (hypotheses,
frames)), so a step costs about frames x candidates, and the scans, the slow part, frames x beam. In float64: the
sums reach -1e4 and more on long utterances, and the differences of two such sums must keep the probabilities'
precision. The scans run along the frames one after another (torch's CPU kernels do), so a prefix's forward
variables do not depend on the batch, its padding or the thread count (tests/transformer/test_ctc_prefix_score.py).
"""
from typing import Tuple

import torch

# Log-probabilities below this are raised to it: a frame that gives a token e^-10000 rules out every alignment
# through it as well as -inf does, and keeps the cumulative sums finite (an -inf in C would make C - C a NaN).
LOG_FLOOR = -1.0e4
NEG_INF = float("-inf")


class CtcPrefixScorer:
    """The CTC log-probabilities of U utterances and the prefix scores of their hypotheses' extensions.

    Args:
        logp: (U, T, V) CTC log-probabilities; lengths: (U,) valid frames T_u (>= 1); blank, eos: token ids.
    """

    def __init__(self, logp: torch.Tensor, lengths: torch.Tensor, blank: int, eos: int):
        if bool((lengths < 1).any()):
            raise ValueError(f"every utterance needs at least one encoder frame, got lengths {lengths.tolist()}")
        self.blank, self.eos = blank, eos
        self.lengths = lengths.to(logp.device, torch.long)
        frames = int(self.lengths.max())
        # (U, V, T): each token's frames contiguous, so a candidate's row is one gather.
        self.x = logp[:, :frames].to(torch.float64).clamp_min(LOG_FLOOR).transpose(1, 2).contiguous()
        self.blank_sum = self.x[:, blank].cumsum(-1)  # (U, T)

    @property
    def vocab(self) -> int:
        return self.x.size(1)

    def initial(self, rows_per_utt: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """(r_n, r_b) of the empty prefix, (U * rows_per_utt, T): no label yet, blanks only."""
        r_b = self.blank_sum.repeat_interleave(rows_per_utt, 0)
        return torch.full_like(r_b, NEG_INF), r_b

    def select(self, utts: torch.Tensor) -> None:
        """Keep the utterances ``utts`` (indices, in order), and only the frames the longest of them has."""
        self.lengths = self.lengths.index_select(0, utts)
        frames = int(self.lengths.max())
        self.x = self.x.index_select(0, utts)[..., :frames]
        self.blank_sum = self.blank_sum.index_select(0, utts)[:, :frames]

    def _emit(self, r_n: torch.Tensor, r_b: torch.Tensor, utt: torch.Tensor, last: torch.Tensor,
              empty: torch.Tensor, cand: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """(emit, x), (N, K, T'): x[t] = log p(c at frame t); emit[t] = phi[t - 1] + x[t], the log-probability that
        g is emitted by frame t - 1 and c starts at frame t (phi[-1] = 0 for the empty prefix, else -inf)."""
        n, k = cand.shape
        frames = self.x.size(-1)
        x = self.x.view(-1, frames).index_select(0, (utt.unsqueeze(1) * self.vocab + cand).view(-1)).view(n, k, -1)
        phi = torch.where((cand == last.unsqueeze(1)).unsqueeze(-1), r_b.unsqueeze(1),
                          torch.logaddexp(r_n, r_b).unsqueeze(1))
        start = torch.where(empty, 0.0, NEG_INF).to(phi.dtype).view(n, 1, 1).expand(n, k, 1)
        return torch.cat([start, phi[..., :-1]], dim=-1) + x, x

    def scores(self, r_n: torch.Tensor, r_b: torch.Tensor, utt: torch.Tensor, last: torch.Tensor,
               empty: torch.Tensor, cand: torch.Tensor) -> torch.Tensor:
        """The prefix scores of extending each of N prefixes g by each of its K candidate tokens.

        Args:
            r_n, r_b: (N, T') the prefixes' forward variables (T' the frames kept, see :meth:`select`).
            utt: (N,) each prefix's utterance (index into the kept ones); last: (N,) g's last label (any value for
                the empty prefix); empty: (N,) bool, g is the empty prefix; cand: (N, K) token ids.
        Returns:
            psi (N, K): log prefix probability of g + c, the sum over the utterance's frames of ``emit`` (the full
            CTC probability of g for c = eos, -inf for blank).
        """
        emit, _ = self._emit(r_n, r_b, utt, last, empty, cand)
        lengths = self.lengths.index_select(0, utt)
        valid = torch.arange(emit.size(-1), device=emit.device) < lengths.unsqueeze(1)   # (N, T')
        psi = torch.logsumexp(emit.masked_fill(~valid.unsqueeze(1), NEG_INF), dim=-1)
        full = torch.logaddexp(r_n, r_b).gather(1, lengths.unsqueeze(1) - 1)  # (N, 1): P_ctc(g) itself
        psi = torch.where(cand == self.eos, full, psi)
        return psi.masked_fill(cand == self.blank, NEG_INF)

    def extend(self, r_n: torch.Tensor, r_b: torch.Tensor, utt: torch.Tensor, last: torch.Tensor,
               empty: torch.Tensor, token: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """The forward variables (N, T') of each prefix extended by its one ``token`` (N,) (the arguments as
        :meth:`scores`'s): run for the survivors of a step only, not for every candidate."""
        emit, x = self._emit(r_n, r_b, utt, last, empty, token.unsqueeze(1))
        emit, x = emit.squeeze(1), x.squeeze(1)
        csum = x.cumsum(-1)
        new_n = csum + torch.logcumsumexp(emit - csum, dim=-1)
        # r_b(h)[t] = B[t] + logcumsumexp_s(r_n(h)[s - 1] - B[s - 1])[t], nothing at s = 0.
        blank_sum = self.blank_sum.index_select(0, utt)
        enter = torch.cat([torch.full_like(new_n[:, :1], NEG_INF), (new_n - blank_sum)[:, :-1]], dim=-1)
        return new_n, blank_sum + torch.logcumsumexp(enter, dim=-1)
