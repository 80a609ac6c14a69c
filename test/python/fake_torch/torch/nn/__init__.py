"""Stand-in torch.nn: a Module with PyTorch's calling shape (__call__ → _call_impl → forward(self, …)), its
registered children (_modules, attribute access, named_modules() in PyTorch's order and naming)."""


class Module:
    def __init__(self):
        object.__setattr__(self, "_modules", {})

    def __setattr__(self, name, value):
        if isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

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
