"""A small Lightning training with DeviceStatsMonitor (it logs torch.cuda.memory_stats() at every batch)
and a CSV logger, knowing nothing of GPU Memory Lens. Writes the logged metrics to OUT_CSV's folder and prints
RESULT {...}: the memory-stat keys it logged and torch.cuda.max_memory_allocated().

    python3 lightning_stats.py OUT_DIR
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "150")), exit=True)  # a stall comes back as a stack
import csv
import glob
import json
import sys
import warnings

import torch

warnings.filterwarnings("ignore")
try:
    import lightning as L
    from lightning.pytorch.callbacks import DeviceStatsMonitor
    from lightning.pytorch.loggers import CSVLogger
except ImportError:
    import pytorch_lightning as L
    from pytorch_lightning.callbacks import DeviceStatsMonitor
    from pytorch_lightning.loggers import CSVLogger


class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 10))

    def training_step(self, batch, _):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(2048, 512), torch.randint(0, 10, (2048,)))
    loader = torch.utils.data.DataLoader(data, batch_size=128)
    trainer = L.Trainer(max_epochs=1, accelerator="gpu", devices=1, callbacks=[DeviceStatsMonitor()],
                        logger=CSVLogger(out, name="run"), log_every_n_steps=1, enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=False)
    trainer.fit(Net(), loader)
    rows = []
    for path in glob.glob(os.path.join(out, "run", "*", "metrics.csv")):
        with open(path) as f:
            rows += list(csv.DictReader(f))
    keys = sorted({k for r in rows for k, v in r.items() if v not in ("", None) and "DeviceStatsMonitor" in k})
    last = {}
    for r in rows:
        for k in keys:
            if r.get(k) not in ("", None):
                last[k] = float(r[k])
    print("RESULT " + json.dumps({"keys": keys, "rows": len(rows), "last": last,
                                  "max_allocated": torch.cuda.max_memory_allocated()}), flush=True)


if __name__ == "__main__":
    main()
