"""The engine: load a model onto the GPU and run its decode and prefill loops."""
