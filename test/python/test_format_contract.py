"""The generated Python format module (native/python/gpumem/_format.py) against its one source,
native/format/gpumem_format.h (Note [Generated format module] in native/format/gen_python.py):

- regenerating it from the header gives the committed file, byte for byte;
- the C++ compiler's sizeof/offsetof of every struct and field equal the module's sizes and offsets;
- the header's static_asserts hold in Python too, and every static_assert names a struct the module has.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import support

sys.path.insert(0, str(support.PY_DIR))
from gpumem import _format as F  # noqa: E402

FORMAT_DIR = support.ROOT / "native" / "format"
GEN = FORMAT_DIR / "gen_python.py"
HEADER = FORMAT_DIR / "gpumem_format.h"


def load_generator():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_python", GEN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Generated(unittest.TestCase):
    def test_regenerating_gives_the_committed_bytes(self):
        out = subprocess.run([sys.executable, str(GEN), "--stdout"], capture_output=True, check=True).stdout
        committed = (support.PY_DIR / "gpumem" / "_format.py").read_bytes()
        self.assertEqual(out, committed, "native/python/gpumem/_format.py is out of date with gpumem_format.h: "
                                         "run python3 native/format/gen_python.py and commit the result")

    def test_check_mode_names_the_fix_when_stale(self):
        gen = load_generator()
        header = HEADER.read_text()
        changed = header.replace("uint32_t thread;", "uint32_t thread;\n  uint64_t extra;", 1)
        self.assertNotEqual(changed, header, "BlockEvent.thread is where this test adds a field")
        new = gen.generate(changed)
        self.assertIn("BlockEvent = Layout('BlockEvent', '<QQQQQIIQ'", new)
        self.assertNotEqual(new, gen.generate(header))

    def test_an_unknown_construct_in_the_header_is_a_loud_error(self):
        gen = load_generator()
        bad = HEADER.read_text().replace("struct LostRec {", "struct LostRec {\n  float ratio;", 1)
        with self.assertRaises(gen.HeaderError) as e:
            gen.generate(bad)
        self.assertRegex(str(e.exception), r"gpumem_format\.h:\d+: struct field 'float ratio;'")

    def test_a_record_type_without_its_payload_struct_is_an_error(self):
        gen = load_generator()
        # Whitespace-blind (clang-format realigns the comments): drop the comment's "LostRec" naming.
        text = HEADER.read_text()
        bad, n = re.subn(r"REC_LOST = 50,\s*// LostRec:", "REC_LOST = 50,  // events dropped:", text, count=1)
        self.assertEqual(n, 1, "the header's REC_LOST line names LostRec in its comment")
        with self.assertRaises(gen.HeaderError) as e:
            gen.generate(bad)
        self.assertIn("REC_LOST", str(e.exception))


class AgainstTheCompiler(unittest.TestCase):
    """sizeof/offsetof from the compiler that builds the writer and the reader."""

    @classmethod
    def setUpClass(cls):
        cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
        if cxx is None:
            raise AssertionError("no C++ compiler for the format contract test: apt-get install g++")
        lines = ['#include <cstddef>', '#include <cstdio>', '#include "gpumem_format.h"', 'using namespace gpumem::fmt;',
                 'int main() {']
        for name, lay in F.LAYOUTS.items():
            lines.append(f'  std::printf("{name} %zu\\n", sizeof({name}));')
            for field in lay.fields:
                lines.append(f'  std::printf("{name}.{field} %zu %zu\\n", offsetof({name}, {field}), sizeof((({name}*)0)->{field}));')
        for name, value in vars(F).items():
            if re.fullmatch(r"(REC|MARK|BLOCK|TAG|END)_[A-Z_]+|k(Major|Minor|MaxPayload|MaxHeaderJson|StackBackward|Pool\w+|Seg\w+)", name):
                lines.append(f'  std::printf("{name} %llu\\n", (unsigned long long)({name}));')
        lines.append('  std::printf("kMagic");')
        lines.append('  for (char c : kMagic) std::printf(" %d", c);')
        lines.append('  std::printf("\\n");')
        lines.append("}")
        tmp = tempfile.mkdtemp(prefix="gpumem-format-")
        cls.addClassCleanup(shutil.rmtree, tmp, True)
        src, exe = os.path.join(tmp, "sizes.cc"), os.path.join(tmp, "sizes")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        subprocess.run([cxx, "-std=c++17", "-Wno-invalid-offsetof", f"-I{FORMAT_DIR}", "-o", exe, src], check=True)
        cls.facts = {}
        for line in subprocess.run([exe], capture_output=True, text=True, check=True).stdout.splitlines():
            key, *vals = line.split(" ")
            cls.facts[key] = vals

    def test_every_struct_has_the_compilers_size(self):
        for name, lay in F.LAYOUTS.items():
            self.assertEqual(lay.size, int(self.facts[name][0]), f"{name}: Python {lay.size} bytes, C++ {self.facts[name][0]}")

    def test_every_field_has_the_compilers_offset_and_width(self):
        for name, lay in F.LAYOUTS.items():
            for i, field in enumerate(lay.fields):
                off, width = map(int, self.facts[f"{name}.{field}"])
                self.assertEqual(lay.offsets[field], off, f"{name}.{field} offset")
                one = F.Layout("one", "<" + re.findall(r"\d*[a-wyzA-Z]", lay.format[1:])[i], ("v",), (0,))
                self.assertEqual(one.size, width, f"{name}.{field} width")

    def test_constants_and_enums_equal_the_compilers(self):
        checked = 0
        for name, value in vars(F).items():
            if name in self.facts and name != "kMagic" and "." not in name and isinstance(value, int):
                self.assertEqual(value, int(self.facts[name][0]), name)
                checked += 1
        self.assertGreaterEqual(checked, len(F.RecordType) + len(F.MarkerKind) + 4)
        self.assertEqual(F.kMagic, bytes(int(c) for c in self.facts["kMagic"]))

    def test_the_headers_static_asserts_hold_in_python(self):
        asserts = dict(re.findall(r"static_assert\(sizeof\((\w+)\)\s*==\s*(\d+)", HEADER.read_text()))
        self.assertGreaterEqual(len(asserts), 8)
        self.assertEqual({k: int(v) for k, v in asserts.items()}, F.STATIC_ASSERTS)
        for name, size in F.STATIC_ASSERTS.items():
            self.assertEqual(F.LAYOUTS[name].size, size, f"{name}: static_assert says {size} bytes")


class Layouts(unittest.TestCase):
    def test_old_end_record_is_a_prefix(self):
        old = F.EndRec.prefix("reason")
        self.assertEqual((old.format, old.size, old.fields), ("<QiI", 16, ("t_ns", "exit_code", "reason")))
        self.assertEqual(old.pack(5, -9, 0), F.EndRec.pack(5, -9, 0, 0, 0)[:16])

    def test_pads_pack_as_zero_bytes(self):
        b = F.StateBlock.pack(1, 2, 3, 4, 1)
        self.assertEqual((len(b), b[-3:]), (32, b"\0\0\0"))
        self.assertEqual(F.StateBlock.unpack_dict(b), dict(addr=1, size=2, requested=3, stack=4, state=1))

    def test_user_metadata_record_is_minor_7_and_documented_so(self):
        # Note [User metadata]: REC_USER_METADATA (51) came with minor 7 (older readers skip it as a newer minor's);
        # FORMAT.md gives the version and the same layout, field by field.
        self.assertEqual((F.REC_USER_METADATA, F.kMajor), (51, 1))
        self.assertIs(F.PAYLOAD[F.REC_USER_METADATA], F.UserMetadataRec)
        L = F.UserMetadataRec
        self.assertEqual((L.format, L.size, L.fields), ("<QII", 16, ("t_ns", "text", "thread")))
        doc = (support.ROOT / "native" / "format" / "FORMAT.md").read_text()
        self.assertIn("# The gpumem capture format (version %d.%d)" % (F.kMajor, F.kMinor), doc)
        self.assertIn("| 10 | u16 | minor | %d |" % F.kMinor, doc)
        self.assertIn("**REC_USER_METADATA = 51** (minor 7) — `UserMetadataRec` (16): `0 u64 t_ns · 8 u32 text", doc)
        self.assertIn("· 12 u32 thread`", doc)
        self.assertIn("1.7 — memory labels", doc)

    def test_events_off_marker_is_minor_8_and_documented_so(self):
        # Note [Recorded steps]: marker kind 8 came with minor 8; FORMAT.md gives the kind, its version and its reading.
        self.assertEqual((F.MARK_EVENTS_OFF, F.kMajor), (8, 1))
        doc = (support.ROOT / "native" / "format" / "FORMAT.md").read_text()
        self.assertIn("8 events off (minor 8): name = why", doc)

    def test_buffer_tags_are_minor_9_and_documented_so(self):
        # Tag category 4 (a module's buffer) came with minor 9; FORMAT.md names it, and what older readers do with it.
        self.assertEqual((F.TAG_BUFFER, F.kMajor), (4, 1))
        self.assertGreaterEqual(F.kMinor, 9)
        doc = (support.ROOT / "native" / "format" / "FORMAT.md").read_text()
        self.assertIn("| 10 | u16 | minor | %d |" % F.kMinor, doc)
        self.assertIn("4 buffer from minor 9", doc)
        self.assertIn("Readers of 1.8 skip tags of category 4", doc)
        self.assertIn("1.8 — marker kind 8 (events off", doc)

    def test_linked_stacks_are_minor_10_and_documented_so(self):
        # Note [Backward on the forward line]: two stack flags came with minor 10; FORMAT.md names them, their
        # pseudo-frames, and what older readers do with such a stack.
        self.assertEqual((F.kStackBackward, F.kStackLinked, F.kStackRecomputed, F.kMinor), (1, 2, 4, 10))
        doc = (support.ROOT / "native" / "format" / "FORMAT.md").read_text()
        self.assertIn("`kStackLinked = 2` (minor 10", doc)
        self.assertIn("`kStackRecomputed = 4` (minor 10)", doc)
        self.assertIn("1.10 — backward on the forward line", doc)

    def test_every_record_type_has_its_payload_layout(self):
        self.assertEqual(set(F.PAYLOAD), set(F.RecordType))
        self.assertIs(F.PAYLOAD[F.REC_ALLOC], F.BlockEvent)
        self.assertIs(F.PAYLOAD[F.REC_DEVICE], F.DeviceRec)


if __name__ == "__main__":
    unittest.main()


class DecoderConsumesEveryRecordType(unittest.TestCase):
    """Note [Record types] in native/addon/src/capture_decoder.cpp: each record type of the header is consumed
    by a `case f::REC_…:` of CaptureDecoder::record or listed there as ignored, with why."""

    DECODER = support.ROOT / "native" / "addon" / "src" / "capture_decoder.cpp"

    def decoder_sets(self):
        src = self.DECODER.read_text()
        body = src[src.index("bool CaptureDecoder::record("):]
        note = src[src.index("// Note [Record types]"):src.index("bool CaptureDecoder::record(")]
        ignored = set(re.findall(r"//\s+(?:Ignored:\s+)?(REC_\w+) —", note))
        # A case that only returns true is the ignored list's, not a consumer.
        consumed = set(re.findall(r"case f::(REC_\w+):(?!\s*return true;)", body))
        return consumed, ignored

    def test_every_type_is_consumed_or_ignored_with_a_reason(self):
        consumed, ignored = self.decoder_sets()
        self.assertGreaterEqual(len(consumed), 15)
        declared = set(F.RecordType.values())
        missing = declared - consumed - ignored
        self.assertEqual(missing, set(), "record types neither consumed by capture_decoder.cpp nor listed as ignored "
                                         "in its Note [Record types] (with why)")
        self.assertEqual(consumed & ignored, set(), "a type is both consumed and listed as ignored")
        self.assertEqual((consumed | ignored) - declared, set(), "the decoder names types the header does not declare")

    def test_the_check_fails_for_a_new_type(self):
        consumed, ignored = self.decoder_sets()
        declared = set(F.RecordType.values()) | {"REC_NEW_THING"}
        self.assertEqual(declared - consumed - ignored, {"REC_NEW_THING"})
