"""A small training loop. The live E2E test runs it with "GPU Memory: Run Python File with Memory
Tracking" (through the replay workload, since CI has no GPU) and checks the line annotations here."""
import torch


def main():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(4096, 4096),
        torch.nn.ReLU(),
        torch.nn.Linear(4096, 4096),
    ).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = torch.randn(2048, 4096, device="cuda")
    for step in range(30):
        out = model(data)
        loss = out.square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    print("done, peak", torch.cuda.max_memory_allocated() >> 20, "MiB")


if __name__ == "__main__":
    main()
