"""Everything that differs between the GPU check and its CPU dry run, in one frozen dataclass."""

from __future__ import annotations

from dataclasses import dataclass, field

PARTS = ("env", "gemm", "step", "train", "glu")
CPU_RECIPE_TOKENS = 983_040  # tokens per run of experiment=glu_variants_cpu (240 x 32 x 128), the CPU table


@dataclass(frozen=True)
class Sizes:
    """The shapes, step counts and time budgets of one check."""

    dry_run: bool
    model: str = "bert_base"
    seq: int = 512
    vocab: int = 8192  # our BPE vocabulary; HF's peer gets the same
    batch_start: int = 8
    batch_max: int = 512
    warmup: int = 2  # untimed steps (compile happens in the first)
    steps: int = 5  # timed steps per repeat
    repeats: int = 2
    gemm_n: int = 8192
    gemm_s: float = 1.0  # seconds of matmuls per probe
    compile: bool = True  # dry run: off (inductor on a CPU takes minutes; tests/smoke/test_compile.py covers it)
    train_steps: int = 40  # part train: killed after steps/2, resumed to steps (at part step's batch)
    glu_model: str = "mini"
    glu_batch: int = 32  # the CPU recipe's 32 x 128
    glu_ffns: tuple[str, ...] = ("gelu", "relu", "geglu", "swiglu")
    glu_seeds: tuple[int, ...] = (0, 1)
    glu_tokens_floor: int = 10 * CPU_RECIPE_TOKENS  # 10-50x the CPU table
    glu_tokens_cap: int = 50 * CPU_RECIPE_TOKENS
    glu_concurrency: int = 8  # train processes at once on the one GPU
    glu_gain: float = 1.5  # assumed aggregate speed-up of that many processes over one (a guess; see report)
    glu_shards: int = 5  # Wikipedia train shards (~2.5 M BPE tokens each; a run draws its own permutation)
    glu_train_docs: int | None = None  # read at most this many documents (dry run: a few)
    glu_tokenizer_docs: int = 1000  # BPE trained on the first N documents
    glu_tokenizer_vocab: int = 8192
    glu_val_tokens: int = 65536
    budgets: dict[str, float] = field(default_factory=lambda: {
        "env": 20, "gemm": 25, "step": 165, "train": 140, "glu": 120})  # 470 s: the check stays under 8 min

    @property
    def device(self) -> str:
        return "cpu" if self.dry_run else "cuda"

    @property
    def glu_seq(self) -> int:
        """Part glu's context: the CPU recipe's 128 (the dry run's tiny seq)."""
        return self.seq if self.dry_run else 128


GPU = Sizes(dry_run=False)
DRY = Sizes(
    dry_run=True, model="tiny", seq=32, vocab=256, batch_start=2, batch_max=4, warmup=1, steps=2, repeats=1,
    gemm_n=256, gemm_s=0.05, compile=False, train_steps=8, glu_model="tiny", glu_batch=8,
    glu_ffns=("gelu", "swiglu"),
    glu_tokens_floor=0, glu_tokens_cap=8 * 8 * 32, glu_concurrency=2, glu_gain=1.0, glu_shards=1,
    glu_train_docs=20, glu_tokenizer_docs=20, glu_tokenizer_vocab=512, glu_val_tokens=1024,
    budgets={"env": 60, "gemm": 60, "step": 90, "train": 90, "glu": 120},
)
