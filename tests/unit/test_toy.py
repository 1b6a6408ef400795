"""The toy HMM corpus: determinism, and an exact Bayes-optimal loss checked by brute force."""

import itertools

import numpy as np
import pytest

from ffn_zoo.data import build_corpus
from ffn_zoo.data.blocks import StepSampler
from ffn_zoo.data.toy import ToyHMM, toy_splits


def test_deterministic_and_split_disjoint() -> None:
    hmm = ToyHMM(vocab_size=64, n_states=8, support=16)
    a = toy_splits(hmm, 16, 4096, 512)
    b = toy_splits(ToyHMM(vocab_size=64, n_states=8, support=16), 16, 4096, 512)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0][: len(a[1])], a[1])
    c = toy_splits(ToyHMM(vocab_size=64, n_states=8, support=16, seed=7), 16, 4096, 512)
    assert not np.array_equal(a[0], c[0])


def test_optimal_nll_matches_brute_force() -> None:
    """Sum over every hidden path of a short chain: p(x_1..x_n | x_0) by enumeration == forward algorithm."""
    hmm = ToyHMM(vocab_size=12, n_states=3, support=5, concentration=0.5, seed=3)
    trans, emit, pi, _ = hmm.params
    tokens = hmm.sample(4, 5, seed=11)
    nll, count = hmm.optimal_nll(tokens)

    def joint(seq: np.ndarray) -> float:
        total = 0.0
        for path in itertools.product(range(3), repeat=len(seq)):
            p = pi[path[0]] * emit[path[0], seq[0]]
            for t in range(1, len(seq)):
                p *= trans[path[t - 1], path[t]] * emit[path[t], seq[t]]
            total += p
        return total

    brute = -sum(np.log(joint(row)) - np.log(joint(row[:1])) for row in tokens)
    assert count == 4 * 4
    assert nll == pytest.approx(brute, rel=1e-10)


def test_default_corpus_size_and_floor() -> None:
    corpus = build_corpus({
        "name": "toy", "seq_len": 128, "train_tokens": 8388608, "val_tokens": 65536, "vocab_size": 2048,
        "n_states": 64, "support": 128, "zipf_exponent": 1.2, "concentration": 0.05, "corpus_seed": 1234,
    })
    assert corpus.train.size >= 5_000_000
    assert corpus.val.shape == (512, 129)
    # the floor is well below the unigram perplexity: context matters
    counts = np.bincount(corpus.train.ravel(), minlength=2048) + 1
    unigram = -np.log(counts / counts.sum())[corpus.val[:, 1:]].mean()
    assert corpus.optimal_val_loss < unigram - 1.0


def test_step_sampler_is_a_function_of_seed_and_step() -> None:
    s = StepSampler(n=10, batch_size=4, seed=0)
    batches = list(itertools.islice(iter(s), 6))
    seen = [i for b in batches[:5] for i in b][:10]
    assert sorted(seen) == list(range(10))  # the first epoch is a permutation
    resumed = StepSampler(n=10, batch_size=4, seed=0)
    resumed.start_step = 3
    assert next(iter(resumed)) == batches[3]
    ranks = [next(iter(StepSampler(10, 4, 0, rank=r, world_size=2))) for r in range(2)]
    assert ranks[0] + ranks[1] == batches[0]  # two devices split the same global batch
