import threading
import weakref

import torch


def _py(node):
    """The Python object of an autograd node, as PyTorch hands it out (functionToPyObject in
    torch/csrc/autograd/python_cpp_function.cpp): the node caches its wrapper only while that wrapper lives, and
    makes a fresh one at the next access once it died. So `id()` of a node seen earlier can be reused by another
    node's wrapper, which is what the leak keeper's walk met on real torch (the leaky convnet). Each wrapper shares the
    node's state (its __dict__), so what one wrapper sees and does, every wrapper does."""
    if node is None:
        return None
    ref = node.__dict__.get("_pyobj")
    w = ref() if ref is not None else None
    if w is None:
        w = object.__new__(type(node))
        w.__dict__ = node.__dict__
        node.__dict__["_pyobj"] = weakref.ref(w)
    return w


class _Storage:
    """A device allocation: freed when the last tensor (or saved output) that shares it goes, like a StorageImpl."""

    def __init__(self, nbytes, device):
        self.nbytes = nbytes
        self.ptr = None
        if device == "cuda":
            # Like C++ device_lazy_init: looks torch.cuda._lazy_init up at call time.
            torch.cuda._lazy_init()
            self.ptr = torch._C._alloc(nbytes)

    def free(self):
        if self.ptr is not None:
            torch._C._free(self.ptr, self.nbytes)
            self.ptr = None

    def __del__(self):
        self.free()


class Tensor:
    def __init__(self, nbytes, device):
        self.nbytes = nbytes
        self.device = device
        self.grad = None
        self.requires_grad = False
        self._grad_fn = None  # a _Node for results of _fake_op (the leak keeper reads graphs: gpumem/_keeper_search.py)
        self._st = _Storage(nbytes, device)

    @property
    def ptr(self):
        return self._st.ptr

    @property
    def grad_fn(self):
        return _py(self._grad_fn)

    @grad_fn.setter
    def grad_fn(self, node):
        self._grad_fn = node

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
        self._st.free()

    def item(self):
        return float(self.nbytes)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        torch.autograd.backward(self, gradient, retain_graph=retain_graph)
        if self.grad_fn is not None and not retain_graph:  # retain_graph=True keeps every saved tensor, like PyTorch
            self.grad_fn.release()


def empty(nbytes, device="cpu"):
    return Tensor(nbytes, device)


class _Node:
    """An autograd node as the leak keeper sees one: next_functions and `_saved_*` attributes; after backward()
    the saved tensors are freed and reading them raises, like PyTorch's."""

    def __init__(self, inputs, saved):
        self._next = tuple(_AccumulateGrad(t) if t.requires_grad and t._grad_fn is None else t._grad_fn for t in inputs)
        self._saved = list(saved)

    @property
    def next_functions(self):  # fresh wrappers, as PyTorch's (see _py)
        return tuple((_py(n), 0) for n in self._next)

    @property
    def _saved_self(self):
        if self._saved is None:
            raise RuntimeError(_FREED)
        return tuple(self._saved)

    def release(self):
        self._saved = None
        for n in self._next:
            if n is not None:
                n.release()


_FREED = ("Trying to backward through the graph a second time (or directly access saved tensors after they have "
          "already been freed)")


class _SavedTensor:
    """What `_raw_saved_<name>` returns in PyTorch: a handle (register_hooks) with no data pointer."""

    def register_hooks(self, pack, unpack):
        raise RuntimeError("not in the stand-in")


class _NamedNode(_Node):
    """A node shaped like PyTorch's generated ones (torch/csrc/autograd/generated/python_functions.cpp): a class per
    op (ReluBackward0, ConvolutionBackward0, …) whose saved values are properties `_saved_<name>`: a Tensor, a
    tuple of Tensors, or a plain value (`_saved_stride`: ints), plus `_raw_saved_<name>` for each tensor. The
    tensors are freed by backward() without retain_graph; reading them afterwards raises (plain values do not)."""

    def __init__(self, inputs, values):
        _Node.__init__(self, inputs, [])
        self._values = dict(values)

    def release(self):
        self._values = {k: v for k, v in self._values.items() if not _tensors_in(v)}
        self._saved = None
        for n in self._next:
            if n is not None:
                n.release()


def _tensors_in(v):
    return isinstance(v, (Tensor, _SavedOutput)) or (isinstance(v, (tuple, list)) and any(isinstance(x, Tensor) for x in v))


class _SavedOutput:
    """An op's own result saved by its node (relu saves its output), as PyTorch's SavedVariable keeps one: the storage
    and the node, not the Python tensor, which dies with the user's last reference; reading `_saved_result` makes a
    fresh tensor on the same storage whose grad_fn is the node. So the leak keeper's heap scan meets only the tensors
    the program itself still holds, as on real torch."""

    def __init__(self, out):
        self._st, self._nbytes, self._device, self._node = out._st, out.nbytes, out.device, out._grad_fn

    def unpack(self):
        t = Tensor.__new__(Tensor)
        t.nbytes, t.device, t.grad, t.requires_grad = self._nbytes, self._device, None, False
        t._st, t._grad_fn = self._st, self._node
        return t


_NODE_TYPES = {}


def _node_type(name, attrs):
    key = (name, tuple(sorted(attrs)))
    t = _NODE_TYPES.get(key)
    if t is None:
        ns = {}
        for a in attrs:
            def get(self, a=a):
                if a not in self._values:
                    raise RuntimeError(_FREED)
                v = self._values[a]
                return v.unpack() if isinstance(v, _SavedOutput) else v
            ns["_saved_" + a] = property(get)
            ns["_raw_saved_" + a] = property(lambda self: _SavedTensor())
        t = _NODE_TYPES[key] = type(name, (_NamedNode,), ns)
    return t


class _AccumulateGrad:
    """The node of a leaf that requires grad (a parameter): .variable is the leaf."""

    def __init__(self, variable):
        self.variable = variable
        self.next_functions = ()
        self._next = ()

    def release(self):
        pass


def _fake_op(nbytes, *inputs, saved_bytes=0, node=None, saves=None):
    """A differentiable op's result on the device (nbytes), whose node saves a fresh tensor of saved_bytes
    (an activation) and the inputs. With node="ReluBackward0" and saves={"result": "out", "stride": (1, 1),
    "input": tensor}: a node of that class with `_saved_result` (the result itself, as relu saves its output),
    `_saved_stride` (a plain value) and `_saved_input` (a given tensor), like PyTorch's generated nodes."""
    out = Tensor(nbytes, "cuda")
    if node is None:
        saved = list(inputs) + ([Tensor(saved_bytes, "cuda")] if saved_bytes else [])
        out.grad_fn = _Node(inputs, saved)
        return out
    out.grad_fn = _node_type(node, saves or {})(inputs, {})  # the node first: a saved output keeps it
    out._grad_fn._values = {k: (_SavedOutput(out) if v == "out" else v) for k, v in (saves or {}).items()}
    return out


def _autograd_worker(nbytes):
    """Allocate and free on another thread, like the autograd engine's device thread."""
    def work():
        Tensor(nbytes, "cuda").free()
    t = threading.Thread(target=work)
    t.start()
    t.join()


def _fake_matmul(nbytes):
    """A matmul's result (nbytes); the first one of the process also leaves cuBLAS's workspace allocated (see
    torch._C._cuda_clearCublasWorkspaces)."""
    if not torch._C._cublas_workspace:
        torch._C._cublas_workspace.append(Tensor(4 << 20, "cuda"))
    return Tensor(nbytes, "cuda")
