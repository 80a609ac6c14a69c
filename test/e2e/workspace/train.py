"""A small PyTorch training loop to try GPU Memory Lens on.

Run it with "GPU Memory: Run Python File with Memory Tracking" (the ▷ menu in the editor title) and watch
the live panel; each line that allocated GPU memory gets its bytes at peak at the end of the line.
"""
import torch

device = "cuda"
torch.manual_seed(0)

model = torch.nn.Sequential(
    torch.nn.Linear(4096, 4096),
    torch.nn.GELU(),
    torch.nn.Linear(4096, 4096),
    torch.nn.GELU(),
    torch.nn.Linear(4096, 10),
).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

for step in range(20):
    batch = 256 if step % 4 else 1024  # an occasional big batch makes a visible peak
    x = torch.randn(batch, 4096, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    print(f"step {step:2d}  batch {batch:4d}  loss {loss.item():.3f}")

print(f"peak allocated: {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")
