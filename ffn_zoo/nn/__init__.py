"""Pure torch: the activation table, the FFN zoo, the Transformer, FLOP counts. Imports no Hydra, Lightning
or OmegaConf (a test enforces it), so the network can be used without the training stack."""
