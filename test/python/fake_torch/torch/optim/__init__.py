"""Stand-in torch.optim: like PyTorch 2.11, `import torch` loads torch.optim.optimizer without binding it here."""
