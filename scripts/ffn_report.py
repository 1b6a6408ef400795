"""Per-variant table of FFN/total parameters, FLOPs, activation evaluations and measured FFN time.

    python scripts/ffn_report.py model=bert_base
    python scripts/ffn_report.py model=mini --seq-len 128 --no-time

Same as ``python -m ffn_zoo.report``; see ffn_zoo/report.py.
"""

from ffn_zoo.report import main

if __name__ == "__main__":
    main()
