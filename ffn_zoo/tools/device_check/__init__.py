"""The GPU device check: one command that measures ffn-zoo's GPU path in minutes and writes one report.

    ffn-zoo-device-check --out OUT [--data DIR] [--wheels DIR]   # on a CUDA machine: ~8 min
    ffn-zoo-device-check --dry-run --out OUT                     # every part on the CPU at tiny sizes (the tests)

(or ``python -m ffn_zoo.tools.device_check``). Five parts, each in its own process group with a hard time budget
(``cli.py``), so a crash, an OOM or a hang in one is recorded in the report and the others still run:

  env    (env.py)    GPU, memory, SMs, driver, CUDA, cuDNN, torch and library versions, bf16, the SDPA backends
  gemm   (gemm.py)   dense bf16, TF32 and fp32 matmul probes: the measured peak next to the nominal figure
  step   (step.py)   our training step at BERT-base shape at the largest batch that fits: tokens/s, MFU, memory,
                     host syncs; TF32 vs bf16, eager vs compile; HF GPT-2 of the same shape; GEGLU, SwiGLU vs GELU
  train  (train.py)  the training entry point end to end on the GPU: trains, checkpoints, is SIGKILLed, resumes
  glu    (glu.py)    BERT-base itself: gelu vs swiglu under clm and mlm, one WSD ladder each (the CPU map's recipe
                     at seq 512, bf16), budgets sized from part step; the ladder comparison, and a tarball of it

``sizes.py`` holds what differs between the GPU check and the dry run, ``part.py`` a part's typed, saved result,
``procs.py`` the child processes, ``report.py`` report.json's dataclass and its Markdown.
"""
