"""Everything that differs between the GPU check and its CPU dry run, in one frozen dataclass."""

from __future__ import annotations

from dataclasses import dataclass, field

PARTS = ("env", "gemm", "step", "train", "glu")


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
    # part glu: BERT-base's SwiGLU - GELU under both objectives, one WSD ladder per (objective, ffn), all at once
    glu_model: str = "bert_base"
    glu_batch: int = 32  # 32 x 512 = 16,384 tokens per step: the smallest rung (glu_min_steps) is 1 Mi tokens
    glu_ffns: tuple[str, ...] = ("gelu", "swiglu")
    glu_objectives: tuple[str, ...] = ("clm", "mlm")
    glu_seed: int = 0
    glu_min_steps: int = 64  # the smallest rung (the CPU ladder's 0.25 Mi = 64 steps, past its 48-step warm-up)
    glu_max_rungs: int = 5  # budgets min_steps x 1, 2, 4, ...: as many doublings as the window holds, at most this
    glu_warmup: int | None = None  # optim.warmup override (None: the ladder preset's 48 steps)
    glu_safety: float = 0.6  # plan at this fraction of part step's measured tokens/s, so no ladder is cut off
    glu_gain: float = 1.0  # aggregate speed of the ladders together over one process alone (one BERT-base fills it)
    glu_threads: int = 4  # CPU threads per training process (16 cores, 4 processes)
    glu_train_docs: int | None = None  # read at most this many documents (dry run: a few)
    glu_tokenizer_docs: int = 50000  # BPE trained on (at most) this many documents: every carried shard's
    glu_tokenizer_vocab: int = 8192
    glu_val_tokens: int = 131072  # the CPU ladders' validation prefix
    budgets: dict[str, float] = field(default_factory=lambda: {
        "env": 20, "gemm": 25, "step": 150, "train": 100, "glu": 185})  # 480 s: the check stays under 8.5 min

    @property
    def device(self) -> str:
        return "cpu" if self.dry_run else "cuda"

    @property
    def glu_seq(self) -> int:
        """Part glu's context: part step's (BERT-base's 512), so part step's row sizes it."""
        return self.seq


GPU = Sizes(dry_run=False)
DRY = Sizes(
    dry_run=True, model="tiny", seq=32, vocab=256, batch_start=2, batch_max=4, warmup=1, steps=2, repeats=1,
    gemm_n=256, gemm_s=0.05, compile=False, train_steps=8, glu_model="tiny", glu_batch=8, glu_min_steps=8,
    glu_max_rungs=2, glu_warmup=4, glu_threads=1, glu_train_docs=20, glu_tokenizer_docs=20, glu_tokenizer_vocab=512,
    glu_val_tokens=1024, budgets={"env": 60, "gemm": 60, "step": 90, "train": 90, "glu": 150},
)
