"""Where the leak keeper's container is named and filled in the user's code (Note [Leak keeper search] in
_keeper.py): the variable or attribute that names it in the user's frames, and the line that stores tensors in it,
found in the source by its AST."""
import ast
import linecache
import os
import sys
import types

from ._keeper_search import dict_of, is_type, tensor_type

MUTATORS = ("append", "extend", "insert", "add", "update", "setdefault", "appendleft", "extendleft", "put")
_OURS = os.path.dirname(os.path.abspath(__file__))


def _scope_lines(code):
    lines = [l for _, _, l in code.co_lines() if l is not None] if hasattr(code, "co_lines") else []
    return (min(lines), max(lines)) if lines else (code.co_firstlineno, 1 << 30)


def _user_frames(frame):
    f = frame
    while f is not None:
        fn = f.f_code.co_filename
        if not os.path.abspath(fn).startswith(_OURS):
            yield f
        f = f.f_back


def holder_name(container, frame, budget):
    """{"container": "history", "file", "line", "code", "how", "scope"} from the stack at the step end, or from
    the module globals, or the container's type alone."""
    if is_type(container, types.FrameType):  # a frame variable keeps a tensor itself (prev = loss)
        T = tensor_type()
        names = [n for n, v in list(container.f_locals.items())
                 if T is not None and is_type(v, T) and getattr(v, "grad_fn", None) is not None]
        return _site(container, names[0] if names else "", container.f_globals is container.f_locals)
    for f in _user_frames(frame):
        local = f.f_locals
        module_level = f.f_globals is local
        for name, v in list(local.items()):
            if v is container:
                return _site(f, name, module_level)
            d = None if is_type(v, (types.ModuleType, type)) else dict_of(v)
            if is_type(d, dict):
                for attr, av in list(d.items()):
                    if av is container:
                        return _site(f, "%s.%s" % (name, attr), module_level)
        if not module_level:
            for name, v in list(f.f_globals.items()):
                if v is container:
                    return _site(f, name, True)
        if budget.over():
            break
    for mod in list(sys.modules.values()):
        d = getattr(mod, "__dict__", None)
        if not is_type(d, dict):
            continue
        for name, v in list(d.items()):
            if v is container:
                path = getattr(mod, "__file__", None) or ""
                out = {"container": name, "file": path, "line": 0, "how": "", "code": "", "scope": mod.__name__}
                out.update(find_site(path, None, name) or {})
                return out
    return {"container": "", "file": "", "line": 0, "how": "", "code": "", "scope": ""}


def _site(frame, name, module_level):
    code = frame.f_code
    path = code.co_filename
    out = {"container": name, "file": path, "line": 0, "how": "", "code": "",
           "scope": "<module>" if module_level else code.co_name}
    site = find_site(path, None if module_level else _scope_lines(code), name, frame.f_lineno)
    if site is None and not module_level:
        site = find_site(path, None, name)  # e.g. self.history.append in another method of the class
    if site:
        out.update(site)
    return out


def _expr(node):
    if is_type(node, ast.Name):
        return node.id
    if is_type(node, ast.Attribute):
        inner = _expr(node.value)
        return inner + "." + node.attr if inner else None
    return None


def _matches(node, name):
    e = _expr(node)
    if e is None or not name:
        return False
    if e == name:
        return True
    # self.history named from the loop as trainer.history: the attribute path's last part decides
    return "." in name and "." in e and e.split(".", 1)[1] == name.split(".", 1)[1]


def find_site(path, span, name, current=None):
    """The line in `path` (within span=(first, last) lines when given) that stores into `name`: a mutator call,
    `name += …`, `name[k] = …`; else a plain `name = …`. Of several, one inside the innermost loop running the
    frame's `current` line (the training loop), else the first."""
    lines = linecache.getlines(path)
    if not lines or not name:
        return None
    source = "".join(lines)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    stores, assigns, loops = [], [], []
    for node in ast.walk(tree):
        if current and is_type(node, (ast.For, ast.While, ast.AsyncFor)) and \
                node.lineno <= current <= getattr(node, "end_lineno", node.lineno):
            loops.append((node.end_lineno - node.lineno, node.lineno, node.end_lineno))
        ln = getattr(node, "lineno", None)
        if ln is None or (span and not span[0] <= ln <= span[1]):
            continue
        if is_type(node, ast.Call) and is_type(node.func, ast.Attribute) and node.func.attr in MUTATORS \
                and _matches(node.func.value, name):
            stores.append((ln, node))
        elif is_type(node, ast.AugAssign) and _matches(node.target, name):
            stores.append((ln, node))
        elif is_type(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if is_type(node, ast.Assign) else [node.target]
            for t in targets:
                if is_type(t, ast.Subscript) and _matches(t.value, name):
                    stores.append((ln, node))
                elif _matches(t, name):
                    assigns.append((ln, node))
    found, how = (stores, "stores") if stores else (assigns, "assigns")
    if not found:
        return None
    if loops:
        _, first, last = min(loops)
        found = [f for f in found if first <= f[0] <= last] or found
    line, node = min(found, key=lambda x: (x[0], getattr(x[1], "col_offset", 0)))
    # the statement's own text (no comment), its first line, at most 160 characters
    code = (ast.get_source_segment(source, node) or lines[line - 1]).strip().splitlines()[0][:160]
    return {"line": line, "how": how, "code": code}
