"""Generation (transformers, vLLM) and training (DeepSpeed) engines; heavy imports happen inside."""
