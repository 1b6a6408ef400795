"""Train one FFN variant (or sweep with -m). See README.md; configs live in configs/.

    python train.py ffn=geglu model=mini
    python train.py -m ffn=relu,gelu,geglu,swiglu seed=0,1,2
"""

from ffn_zoo.train import main

if __name__ == "__main__":
    main()
