"""The embedded toy corpus: a random hidden Markov model with Zipf-distributed emissions.

Why an HMM: its generating process is known, so the Bayes-optimal next-token loss of the
validation split is computable exactly with the forward algorithm. A model can get to it
only by inferring the hidden state from the context, which takes attention *and* FFN capacity.

Generator (all from one seed, no download, no file):
- ``n_states`` hidden states; each row of the transition matrix is Dirichlet(``concentration``)
  (small -> each state has a few likely successors).
- Each state emits from its own random subset of ``support`` tokens of the vocabulary, with
  Zipf(``zipf_exponent``) probabilities over a random ranking of that subset.
- A sample is one chain of ``seq_len + 1`` tokens started from the stationary distribution,
  so every position (and every block the model sees) has the same prior over states.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping

import numpy as np

from ffn_zoo.data.extra_val import build_extra_val
from ffn_zoo.data.types import Corpus
from ffn_zoo.errors import ConfigError, require_positive


@dataclass(frozen=True)
class ToyHMM:
    vocab_size: int = 2048
    n_states: int = 64
    support: int = 128
    zipf_exponent: float = 1.2
    concentration: float = 0.05
    seed: int = 1234  # the corpus seed: fixed across variants and training seeds

    def __post_init__(self) -> None:
        require_positive(**{"data.vocab_size": self.vocab_size, "data.n_states": self.n_states,
                            "data.support": self.support, "data.concentration": self.concentration})
        if self.support > self.vocab_size:
            raise ConfigError(f"data.support={self.support} must be <= data.vocab_size={self.vocab_size}")

    @cached_property
    def params(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(transition (S,S), emission (S,V), stationary (S,), per-state token ranking (S, support))."""
        rng = np.random.default_rng(self.seed)
        S, V, K = self.n_states, self.vocab_size, self.support
        trans = rng.dirichlet(np.full(S, self.concentration), size=S)  # (S, S)
        trans = 0.999 * trans + 0.001 / S  # keep the chain ergodic so the stationary distribution is unique
        zipf = 1.0 / np.arange(1, K + 1) ** self.zipf_exponent
        zipf /= zipf.sum()  # (K,)
        ranking = np.stack([rng.choice(V, size=K, replace=False) for _ in range(S)])  # (S, K)
        emit = np.zeros((S, V))
        np.put_along_axis(emit, ranking, np.broadcast_to(zipf, (S, K)), axis=1)  # (S, V)
        evals, evecs = np.linalg.eig(trans.T)
        pi = np.real(evecs[:, np.argmin(np.abs(evals - 1))])
        pi = np.abs(pi) / np.abs(pi).sum()  # (S,)
        return trans, emit, pi, ranking

    def sample(self, n: int, length: int, seed: int) -> np.ndarray:
        """``n`` independent chains of ``length`` tokens, int32 (n, length). Vectorised over chains."""
        trans, _, pi, ranking = self.params
        zipf_cdf = np.cumsum(1.0 / np.arange(1, self.support + 1) ** self.zipf_exponent)
        zipf_cdf /= zipf_cdf[-1]
        trans_cdf = np.cumsum(trans, axis=1)
        trans_cdf[:, -1] = 1.0
        rng = np.random.default_rng(seed)
        state = rng.choice(self.n_states, size=n, p=pi)  # (n,)
        out = np.empty((n, length), dtype=np.int32)
        for t in range(length):
            rank = np.minimum(np.searchsorted(zipf_cdf, rng.random(n)), self.support - 1)  # (n,)
            out[:, t] = ranking[state, rank]
            u = rng.random(n)[:, None]
            state = np.minimum((u > trans_cdf[state]).sum(axis=1), self.n_states - 1)
        return out

    def optimal_nll(self, tokens: np.ndarray) -> tuple[float, int]:
        """Exact Bayes-optimal NLL (nats, summed) of tokens[:, 1:] given their in-chain prefix, and the count.

        Forward algorithm from the stationary prior, normalised at each step:
        -log p(x_t | x_<t) = -log Σ_s α_t(s) e(s, x_t), α the filtered state posterior predicted one step.
        """
        trans, emit, pi, _ = self.params
        n, length = tokens.shape
        belief = np.broadcast_to(pi, (n, self.n_states)).copy()  # p(state_0) (n, S)
        total = 0.0
        for t in range(length):
            lik = emit[:, tokens[:, t]].T  # (n, S): p(x_t | state)
            joint = belief * lik
            p = joint.sum(axis=1)  # p(x_t | x_<t)  (n,)
            if t > 0:
                total -= float(np.log(p).sum())
            belief = (joint / p[:, None]) @ trans  # predict the next state
        return total, n * (length - 1)


def toy_splits(hmm: ToyHMM, seq_len: int, train_tokens: int, val_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """Fixed train and validation blocks of ``seq_len + 1`` tokens (input + next-token target)."""
    require_positive(**{"data.seq_len": seq_len, "data.train_tokens": train_tokens, "data.val_tokens": val_tokens})
    n_train = max(1, train_tokens // seq_len)
    n_val = max(1, val_tokens // seq_len)
    # distinct generator seeds per split; both derive from the corpus seed only, never the training seed
    return hmm.sample(n_train, seq_len + 1, seed=hmm.seed + 1), hmm.sample(n_val, seq_len + 1, seed=hmm.seed + 2)


def build_toy(cfg: Mapping[str, Any]) -> Corpus:
    """``data=toy``: the HMM's splits, with the exact optimal validation loss as the floor."""
    hmm = ToyHMM(
        vocab_size=cfg["vocab_size"], n_states=cfg["n_states"], support=cfg["support"],
        zipf_exponent=cfg["zipf_exponent"], concentration=cfg["concentration"], seed=cfg["corpus_seed"],
    )
    train, val = toy_splits(hmm, cfg["seq_len"], cfg["train_tokens"], cfg["val_tokens"])
    nll, count = hmm.optimal_nll(val)
    return Corpus(
        name="toy", vocab_size=hmm.vocab_size, train=train, val=val, optimal_val_loss=nll / count,
        description=f"toy HMM ({hmm.n_states} states, vocab {hmm.vocab_size}, Zipf {hmm.zipf_exponent}), "
        f"{train.size:,} train / {val[:, 1:].size:,} val tokens",
        extra_val=build_extra_val(cfg, None),  # no tokenizer: {} when none is asked for, else one line saying why not
    )
