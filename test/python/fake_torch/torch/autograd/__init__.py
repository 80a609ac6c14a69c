from . import profiler  # noqa: F401


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    from torch._tensor import _autograd_worker

    _autograd_worker(4096)


def grad(outputs, inputs, grad_outputs=None):
    from torch._tensor import _autograd_worker

    _autograd_worker(2048)
    return (None,)
