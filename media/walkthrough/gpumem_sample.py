"""GPU Memory Lens's sample: a few training steps of a small MLP with named phases, an evaluation
pass on a larger batch and an explicit empty_cache. Run it with "GPU Memory: Run Python File with
Memory Tracking" and each line that allocates shows its bytes at the peak."""
import torch


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(512, 2048)
        self.down = torch.nn.Linear(2048, 512)

    def forward(self, x):
        hidden = torch.nn.functional.gelu(self.up(x))
        return self.down(hidden)


def train_step(model, opt, batch):
    with torch.profiler.record_function("forward"):
        loss = model(batch).pow(2).mean()
    with torch.profiler.record_function("backward"):
        loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def main():
    torch.manual_seed(0)
    model = MLP().cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(6):
        batch = torch.randn(256, 512, device="cuda")  # input batch
        train_step(model, opt, batch)
    with torch.no_grad():
        big_eval = torch.randn(2048, 512, device="cuda")  # a large evaluation batch
        model(big_eval)
    del big_eval
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    print("peak", torch.cuda.max_memory_allocated())


if __name__ == "__main__":
    main()
