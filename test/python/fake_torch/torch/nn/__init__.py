"""Stand-in torch.nn: a Module with PyTorch's calling shape (__call__ → _call_impl → forward(self, …)), its
registered children (_modules, attribute access, named_modules() in PyTorch's order and naming), and its
parameters and buffers (register_parameter / register_buffer, parameters() and buffers() over the tree, each
tensor once, as PyTorch's)."""


class Module:
    def __init__(self):
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})

    def __setattr__(self, name, value):
        if isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def register_parameter(self, name, tensor):
        self._parameters[name] = tensor
        object.__setattr__(self, name, tensor)

    def register_buffer(self, name, tensor):
        self._buffers[name] = tensor
        object.__setattr__(self, name, tensor)

    def _tensors(self, kind):
        seen = set()
        for _, m in self.named_modules():
            for t in getattr(m, kind, {}).values():
                if t is not None and id(t) not in seen:
                    seen.add(id(t))
                    yield t

    def parameters(self):
        return self._tensors("_parameters")

    def buffers(self):
        return self._tensors("_buffers")

    def named_modules(self, memo=None, prefix=""):
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name)

    def _call_impl(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        return self._call_impl(*args, **kwargs)


class ModuleList(Module):
    def __init__(self, modules=()):
        super().__init__()
        for i, m in enumerate(modules):
            self._modules[str(i)] = m

    def __iter__(self):
        return iter(self._modules.values())
