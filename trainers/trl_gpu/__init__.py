"""LoRA fine-tuning of Gemma causal LMs with TRL, PEFT and accelerate (GPU image)."""
