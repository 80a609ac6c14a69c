"""IPython extension: GPU memory per notebook cell (`%load_ext gpumem`; gpumem/__init__.py forwards to load()).

    %load_ext gpumem      starts tracking (unless the kernel runs under `gpumem run` or the VS Code kernel), then
                          after each cell that changed GPU memory prints one line: its peak allocated above what was
                          live at its start, and what it added to allocated and reserved
    %%gpumem              the same for one cell, with the top lines at the cell's peak (cell [N] line L)
    %gpumem off|on        stops/starts the per-cell line;  %gpumem  prints the last cell's figures again

Note [Cell figures]: a cell is a piece (Note [Piece figures] in _meter.py): its peak is its own, what it allocated
above what was live at its start (earlier cells' tensors not counted, so a cell run again shows the same peak), and
its line says so, with what was live at its start; its top lines are its own allocations live at that peak.
"added" is allocated (reserved) after the cell minus before it. A line belongs to a cell when its file is one
IPython compiled a cell to (`shell.compile._filename_map`: `<ipython-input-N-…>` in a terminal, a temp file in
ipykernel), shown as `cell [N] line L`; other user files show as paths. Where CUDA is already initialised when the
extension loads, the lens allocator can no longer be swapped in: PyTorch's allocator is observed from then on, and
the load line says so (Note [Tracking from inside] in _meter.py). Every figure of every cell is kept in CELLS, for
the VS Code kernel and for tests. Nothing here may break a cell: a failure of ours is one line, the cell's own
result stays.
"""
import os
import sys

from . import _meter
from ._where import _internal_dirs, is_user_file, warn

CELLS = []        # {"cell": execution count, figures…} per measured cell
_EXT = None


class Extension:
    def __init__(self, shell):
        self.shell = shell
        self.meter = _meter.Meter()
        self.auto = True
        self.piece = None
        self.depth = 0      # >0 while %%gpumem runs its cell (the inner run is measured by the magic)
        self.magic_cell = False

    # ---- lines --------------------------------------------------------------------------------------------
    def _cells(self):
        return getattr(getattr(self.shell, "compile", None), "_filename_map", {}) or {}

    def is_line(self):
        cells, internal = self._cells(), _internal_dirs()
        return lambda f: f in cells or f.startswith("<ipython-input-") or is_user_file(f, internal)

    def show(self, file_, line):
        n = self._cells().get(file_)
        if n is None and file_.startswith("<ipython-input-"):
            try:
                n = int(file_.split("-")[2])
            except (IndexError, ValueError):
                n = None
        if n is not None:
            return "cell [%s] line %d" % (n, line)
        try:
            rel = os.path.relpath(file_)
            return "%s:%d" % (file_ if rel.startswith("..") else rel, line)
        except ValueError:
            return "%s:%d" % (file_, line)

    # ---- figures ------------------------------------------------------------------------------------------
    def _measure_end(self, piece, cell):
        fig = self.meter.end(piece, is_line=self.is_line())
        row = dict(fig)
        row["cell"] = cell
        row["lines"] = [(self.show(f, ln), fn, b) for f, ln, fn, b in fig.lines]
        row["line_files"] = [(f, ln) for f, ln, _fn, _b in fig.lines]
        CELLS.append(row)
        return row

    @staticmethod
    def one_line(row):
        top = row["lines"][0] if row["lines"] else None
        return "gpumem [%s]: peak allocated %s above the %s live at its start · allocated %s%s · reserved %s%s%s" % (
            row["cell"], _meter.fmt(row["peak_allocated"]), _meter.fmt(row["allocated_before"]),
            "+" if row["added_allocated"] >= 0 else "",
            _meter.fmt(row["added_allocated"]), "+" if row["added_reserved"] >= 0 else "", _meter.fmt(row["added_reserved"]),
            " · top: %s (%s)" % (top[0], _meter.fmt(top[2])) if top else "")

    @staticmethod
    def details(row):
        out = [Extension.one_line(row).split(" · top:")[0]]
        if row["lines"]:
            out.append("top lines at the cell's peak (its own allocations):")
            out += ["  %s  %s%s" % (_meter.fmt(b).rjust(10), where, " in %s" % fn if fn and fn != "<module>" else "")
                    for where, fn, b in row["lines"]]
        if row.get("capture"):
            out.append("capture: %s" % row["capture"])
        return "\n".join(out)

    # ---- IPython events -----------------------------------------------------------------------------------
    def pre_run_cell(self, info=None):
        if self.depth:
            return
        try:
            raw = getattr(info, "raw_cell", "") or ""
            self.magic_cell = raw.lstrip().startswith("%%gpumem")
            self.piece = self.meter.begin("cell [%s]" % self.shell.execution_count)
        except Exception as exc:
            warn("no figures for this cell: %s: %s" % (type(exc).__name__, exc))
            self.piece = None

    def post_run_cell(self, result=None):
        if self.depth or self.piece is None:
            return
        piece, self.piece = self.piece, None
        try:
            cell = getattr(result, "execution_count", None) or piece["label"][6:-1]
            row = self._measure_end(piece, cell)
            changed = row["peak_allocated"] or row["added_allocated"] or row["added_reserved"]
            if self.auto and changed and not self.magic_cell:
                print(self.one_line(row))
        except Exception as exc:
            warn("no figures for this cell: %s: %s" % (type(exc).__name__, exc))

    # ---- magics -------------------------------------------------------------------------------------------
    def cell_magic(self, line, cell):
        piece = self.meter.begin("%%%%gpumem [%s]" % self.shell.execution_count)
        self.depth += 1
        try:
            self.shell.run_cell(cell, store_history=False)
        finally:
            self.depth -= 1
            try:
                row = self._measure_end(piece, self.shell.execution_count)
                row["magic"] = True
                print(self.details(row))
            except Exception as exc:
                warn("no figures for this cell: %s: %s" % (type(exc).__name__, exc))

    def line_magic(self, line):
        word = line.strip()
        if word in ("off", "on"):
            self.auto = word == "on"
            print("gpumem: per-cell figures %s" % word)
        elif CELLS:
            print(self.details(CELLS[-1]))
        else:
            print("gpumem: no cell measured yet")


def load(shell):
    global _EXT
    if _EXT is not None:
        return
    from ._state import STATE

    line = _meter.start_tracking(os.path.join(os.getcwd(), ".gpumem"), "notebook")
    if line:
        print(line)
    elif STATE.settings is not None:
        print("gpumem: tracking this kernel in %s" % STATE.settings.session_dir)
    _EXT = ext = Extension(shell)
    shell.events.register("pre_run_cell", ext.pre_run_cell)
    shell.events.register("post_run_cell", ext.post_run_cell)
    shell.register_magic_function(ext.cell_magic, magic_kind="cell", magic_name="gpumem")
    shell.register_magic_function(ext.line_magic, magic_kind="line", magic_name="gpumem")


def unload(shell):
    global _EXT
    ext, _EXT = _EXT, None
    if ext is None:
        return
    for name, fn in (("pre_run_cell", ext.pre_run_cell), ("post_run_cell", ext.post_run_cell)):
        try:
            shell.events.unregister(name, fn)
        except ValueError:
            pass


def extension():
    return _EXT


if __name__ == "__main__":  # pragma: no cover
    sys.exit("load it in IPython: %load_ext gpumem")
