import threading

import torch


class Tensor:
    def __init__(self, nbytes, device):
        self.nbytes = nbytes
        self.device = device
        self.ptr = None
        self.grad = None
        self.requires_grad = False
        self.grad_fn = None  # a _Node for results of _fake_op (the leak keeper reads graphs: gpumem/_keeper.py)
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

    def item(self):
        return float(self.nbytes)

    def backward(self, gradient=None):
        torch.autograd.backward(self, gradient)
        if self.grad_fn is not None:
            self.grad_fn.release()


def empty(nbytes, device="cpu"):
    return Tensor(nbytes, device)


class _Node:
    """An autograd node as the leak keeper sees one: next_functions and `_saved_*` attributes; after backward()
    the saved tensors are freed and reading them raises, like PyTorch's."""

    def __init__(self, inputs, saved):
        self.next_functions = tuple((_AccumulateGrad(t) if t.requires_grad and t.grad_fn is None else t.grad_fn, 0)
                                    for t in inputs)
        self._saved = list(saved)

    @property
    def _saved_self(self):
        if self._saved is None:
            raise RuntimeError("Trying to backward through the graph a second time (or directly access saved "
                               "tensors after they have already been freed)")
        return tuple(self._saved)

    def release(self):
        self._saved = None
        for n, _ in self.next_functions:
            if n is not None:
                n.release()


class _AccumulateGrad:
    """The node of a leaf that requires grad (a parameter): .variable is the leaf."""

    def __init__(self, variable):
        self.variable = variable
        self.next_functions = ()

    def release(self):
        pass


def _fake_op(nbytes, *inputs, saved_bytes=0):
    """A differentiable op's result on the device (nbytes), whose node saves a fresh tensor of saved_bytes
    (an activation) and the inputs."""
    saved = list(inputs) + ([Tensor(saved_bytes, "cuda")] if saved_bytes else [])
    out = Tensor(nbytes, "cuda")
    out.grad_fn = _Node(inputs, saved)
    return out


def _autograd_worker(nbytes):
    """Allocate and free on another thread, like the autograd engine's device thread."""
    def work():
        Tensor(nbytes, "cuda").free()
    t = threading.Thread(target=work)
    t.start()
    t.join()
