"""The leak keeper's notice: one sentence for people, then `gpumem-keeper {json}` for the reader (Note [Leak keeper
search] in _keeper.py; the reader: src/core/base/model/keeperNotice.ts)."""
import json
import os

PREFIX = "gpumem-keeper "
# The capture cuts a notice at 1 MiB (Note [Long notices] in native/allocator/src/stack_capture.h): a keeper notice
# longer than that would lose its JSON's end, and the reader the whole keeper. Addresses are dropped from the end of
# the list until the notice fits (notice_text). Every held storage is listed, so the reader counts each saved tensor
# of a kept graph by its address, on whatever line made it (Note [Categories] in native/addon/src/categories.cpp):
# when only the first 4000 bytes fitted, a MobileNetV3 loop keeping twelve graphs had 98 % of its peak as "other".
NOTICE_MAX = 1000000


def format_bytes(n):
    """Note [Byte formatting] (src/core/base/units/bytes.ts): three significant digits, binary units."""
    v = float(abs(n))
    if v < 1024:
        return "%d B" % round(v)
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    u = 0
    while v >= 1024 and u < len(units) - 1:
        v /= 1024.0
        u += 1
    text = "%.0f" % v if v >= 100 else ("%.1f" % v if v >= 10 else "%.2f" % v)
    if float(text) >= 1024 and u < len(units) - 1:
        u += 1
        text = "%.2f" % (v / 1024)
    return ("-" if n < 0 else "") + text + " " + units[u]


def notice_text(found):
    """The notice: the sentence, then `gpumem-keeper {json}`, at most NOTICE_MAX bytes. The addresses are listed one
    kept graph's first (Note [Keeper graph walk]), so what a cut drops is the other steps' copies of the same lines;
    "addrs_all" says whether every held storage is listed."""
    found.setdefault("addrs_all", True)
    while True:
        text = sentence(found) + "\n" + PREFIX + json.dumps(found, sort_keys=True)
        over = len(text.encode("utf-8")) - NOTICE_MAX
        if over <= 0 or not found["addrs"]:
            return text
        found["addrs"] = found["addrs"][:-max(1, over // 8)]  # an address and its ", " take 8 to 22 bytes
        if "own" in found:
            listed = set(found["addrs"])
            found["own"] = [a for a in found["own"] if a in listed]
        found["addrs_all"] = False


def sentence(k):
    where = ("%s:%d" % (os.path.basename(k["file"]), k["line"])) if k.get("line") else "an unknown line"
    what = "stores them" if k.get("how") == "stores" else "assigns it"
    return ("gpumem: %s (a %s) keeps %d tensor%s with autograd graphs alive across steps (%s %s); %s at %s%s" % (
        k.get("container") or "a container", k["container_type"], k["tensors"], "" if k["tensors"] == 1 else "s",
        format_bytes(k["bytes"]), measured_at(k), what, where, (": " + k["code"]) if k.get("code") else ""))


def measured_at(k):
    """When a keeper's figures were read: "at step 5", or "at the end, after step 30" (Note [Keeper at the end])."""
    return ("at the end, after step %d" if k.get("at") == "end" else "at step %d") % k.get("step", 0)
