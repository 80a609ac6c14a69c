import threading

import torch


class Tensor:
    def __init__(self, nbytes, device):
        self.nbytes = nbytes
        self.device = device
        self.ptr = None
        self.grad = None
        if device == "cuda":
            # Like C++ device_lazy_init: looks torch.cuda._lazy_init up at call time.
            torch.cuda._lazy_init()
            self.ptr = torch._C._alloc(nbytes)

    # The surface the bootstrap's optimizer walk reads (gpumem/_tags.py); one element = one byte.
    def data_ptr(self):
        return self.ptr or 0

    def get_device(self):
        return 0 if self.device == "cuda" else -1

    def numel(self):
        return self.nbytes

    def element_size(self):
        return 1

    def free(self):
        if self.ptr is not None:
            torch._C._free(self.ptr, self.nbytes)
            self.ptr = None

    def __del__(self):
        self.free()

    def backward(self, gradient=None):
        torch.autograd.backward(self, gradient)


def empty(nbytes, device="cpu"):
    return Tensor(nbytes, device)


def _autograd_worker(nbytes):
    """Allocate and free on another thread, like the autograd engine's device thread."""
    def work():
        Tensor(nbytes, "cuda").free()
    t = threading.Thread(target=work)
    t.start()
    t.join()
