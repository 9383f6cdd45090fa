"""The CuTe DSL driver (tools/kiln/core/cute_dsl_driver.py) without the DSL or a GPU.

Its pure parts: the command line kiln passes (tests/unit/cute_dsl_frontend_test.cpp checks the C++
side of the same argv), the context a kernel script receives (constants typed and in kiln.toml
order, the declared entries, the compile options), kiln.entry()'s checks, the entry rename and
the resource report on a synthetic cubin laid out as the DSL writes one, and main() end to end
with the DSL's version lookups faked and a stand-in kernel script that returns a synthetic cubin.

Run by ctest (label unit) with the project's .venv interpreter when it has one, else python3:
    python3 -B tests/unit/cute_dsl_driver_test.py
"""
import contextlib
import importlib.metadata
import importlib.util
import io
import json
import os
import pathlib
import struct
import sys
import tempfile
import unittest
from unittest import mock

sys.dont_write_bytecode = True  # never a __pycache__ in tools/kiln/core

DRIVER = pathlib.Path(__file__).resolve().parents[2] / "tools" / "kiln" / "core" / "cute_dsl_driver.py"
spec = importlib.util.spec_from_file_location("kiln_cute_dsl_driver", DRIVER)
driver = importlib.util.module_from_spec(spec)
spec.loader.exec_module(driver)

ARGV = [
    "--variant", "gdn_decode_dk128_bf16",
    "--script", "/repo/kernels/gdn/gdn_decode.py",
    "--target", "sm_90a",
    "--sm", "90",
    "--constants", '{"head_dim":128,"dtype":"bf16","fused":false}',
    "--entries", "kiln_gdn_decode",
    "--dsl-version", "4.8.1",
    "--cuda-major", "13",
    "--out", "/stage/cubins/gdn_decode_dk128_bf16.sm_90.cubin",
]


def failure(call, *args):
    """Runs call(*args), which must fail() (exit 1): returns what it wrote to stderr."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            call(*args)
    except SystemExit as exit_:
        assert exit_.code == 1, "exit code {}: {}".format(exit_.code, err.getvalue())
        return err.getvalue()
    raise AssertionError("expected a failure; it returned")


class FakeKernel:
    """Stands in for a @cute.kernel: records set_name_prefix's arguments."""

    def __init__(self):
        self.prefix = None

    def set_name_prefix(self, name, **kwargs):
        self.prefix = (name, kwargs)


# --- a synthetic cubin, laid out as the DSL writes one ----------------------------------------

SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_NOBITS, SHT_CUDA_INFO = 1, 2, 3, 8, 0x70000000


def make_cubin(kernels, helpers=(), shared=None, info=None):
    """A 64-bit little-endian ELF with e_machine 190: per kernel name a global FUNC symbol with
    STO_CUDA_ENTRY and a .text.<name> section, per helper a global FUNC without it; .nv.info holds
    `info` records (attr, symbol name, value), and .nv.shared.<name> is SHT_NOBITS of
    shared[name] bytes."""
    shared = shared or {}
    info = info or []
    names = list(kernels) + list(helpers)
    strtab = b"\0"
    symtab = bytes(24)
    sym_index = {}
    for i, name in enumerate(names, start=1):
        sym_index[name] = i
        other = 0x10 if name in kernels else 0
        symtab += struct.pack("<IBBHQQ", len(strtab), (1 << 4) | 2, other, 0, 0, 0)
        strtab += name.encode() + b"\0"
    records = b""
    for attr, name, value in info:
        records += struct.pack("<BBHII", 4, attr, 8, sym_index[name], value)
    # Section indices: 0 null, 1 .shstrtab, 2 .strtab, 3 .symtab (sh_link 2), 4 .nv.info, ...
    sections = [(".strtab", SHT_STRTAB, strtab, 0, 0), (".symtab", SHT_SYMTAB, symtab, 2, 24),
                (".nv.info", SHT_CUDA_INFO, records, 0, 0)]
    for name in kernels:
        sections.append((".text." + name, SHT_PROGBITS, b"\0" * 16, 0, 0))
    for name, size in shared.items():
        sections.append((".nv.shared." + name, SHT_NOBITS, size, 0, 0))
    shstrtab = b"\0"
    name_offsets = []
    for s in [(".shstrtab",)] + sections:
        name_offsets.append(len(shstrtab))
        shstrtab += s[0].encode() + b"\0"
    sections = [(".shstrtab", SHT_STRTAB, shstrtab, 0, 0)] + sections
    data, headers = b"", []
    for (name, type_, contents, link, entsize), name_at in zip(sections, name_offsets):
        if type_ == SHT_NOBITS:
            headers.append((name_at, type_, 64 + len(data), contents, link, entsize))
            continue
        headers.append((name_at, type_, 64 + len(data), len(contents), link, entsize))
        data += contents
    shoff = 64 + len(data)
    header = b"\x7fELF" + bytes([2, 1, 1, 0x41, 8]) + bytes(7)
    header += struct.pack("<HHIQQQIHHHHHH", 1, 190, 1, 0, 0, shoff, 0x06005a04, 64, 0, 0, 64,
                          len(sections) + 1, 1)
    table = bytes(64)
    for name_at, type_, offset, size, link, entsize in headers:
        table += struct.pack("<IIQQQQIIQQ", name_at, type_, 0, 0, offset, size, link, 0, 0, entsize)
    return header + data + table


EIATTR_FRAME_SIZE, EIATTR_MAX_STACK_SIZE, EIATTR_REGCOUNT = 0x11, 0x23, 0x2f


class ParseArgs(unittest.TestCase):
    def test_reads_what_kiln_passes(self):
        args = driver.parse_args(ARGV)
        self.assertEqual(args.variant, "gdn_decode_dk128_bf16")
        self.assertEqual(args.target, "sm_90a")
        self.assertEqual(args.sm, 90)
        self.assertEqual(args.cuda_major, 13)
        self.assertEqual(args.dsl_version, "4.8.1")
        self.assertEqual(args.out, "/stage/cubins/gdn_decode_dk128_bf16.sm_90.cubin")

    def test_every_argument_is_required(self):
        for i in range(0, len(ARGV), 2):
            argv = ARGV[:i] + ARGV[i + 2:]
            with contextlib.redirect_stderr(io.StringIO()) as err:
                with self.assertRaises(SystemExit) as raised:
                    driver.parse_args(argv)
            self.assertEqual(raised.exception.code, 2)
            self.assertIn(ARGV[i], err.getvalue())


class Context(unittest.TestCase):
    def test_constants_are_typed_and_in_kiln_toml_order(self):
        ctx = driver.Context(driver.parse_args(ARGV), "/tmp/dump")
        self.assertEqual(list(ctx.constants.items()),
                         [("head_dim", 128), ("dtype", "bf16"), ("fused", False)])
        self.assertIs(type(ctx.constants["head_dim"]), int)
        self.assertIs(type(ctx.constants["fused"]), bool)
        self.assertEqual((ctx.sm, ctx.target, ctx.variant), (90, "sm_90a", "gdn_decode_dk128_bf16"))
        self.assertEqual(ctx.options, "--gpu-arch=sm_90a --keep-cubin --dump-dir=/tmp/dump")

    def test_declared_entries_skip_empty_names(self):
        argv = list(ARGV)
        argv[argv.index("--entries") + 1] = "kiln_a,,kiln_b,"
        ctx = driver.Context(driver.parse_args(argv), "/tmp/dump")
        self.assertEqual(ctx.declared, ["kiln_a", "kiln_b"])

    def test_entry_names_the_kernel_as_kiln_toml_does(self):
        ctx = driver.Context(driver.parse_args(ARGV), "/tmp/dump")
        kernel = FakeKernel()
        ctx.entry("kiln_gdn_decode", kernel)
        self.assertEqual(kernel.prefix, ("kiln_gdn_decode",
                                         {"remove_cutlass_symbol": True, "keep_mangled_name": False}))
        self.assertIs(ctx.entries["kiln_gdn_decode"], kernel)

    def test_entry_refuses_an_undeclared_or_repeated_name(self):
        ctx = driver.Context(driver.parse_args(ARGV), "/tmp/dump")
        self.assertIn("kiln-cute-dsl: gdn_decode_dk128_bf16: kiln.entry('other'): not an entry of "
                      "kiln.toml (kiln_gdn_decode)", failure(ctx.entry, "other", FakeKernel()))
        ctx.entry("kiln_gdn_decode", FakeKernel())
        self.assertIn("kiln.entry('kiln_gdn_decode') named twice",
                      failure(ctx.entry, "kiln_gdn_decode", FakeKernel()))


class Cubin(unittest.TestCase):
    def test_rename_cuts_the_trace_counter_everywhere_in_place(self):
        elf = make_cubin(["kiln_a_0", "kiln_b_12"], helpers=["helper_3"],
                         shared={"kiln_a_0": 1024})
        renamed = driver.rename_entries(elf, ["kiln_a", "kiln_b"])
        self.assertEqual(len(renamed), len(elf))  # nothing moved
        secs = driver.sections(renamed)
        self.assertEqual(sorted(n for _, n in driver.entry_symbols(renamed, secs)),
                         ["kiln_a", "kiln_b"])
        labels = [s["label"] for s in secs]
        self.assertIn(".text.kiln_a", labels)
        self.assertIn(".text.kiln_b", labels)
        self.assertIn(".nv.shared.kiln_a", labels)
        self.assertIn(b"helper_3\0", renamed)  # not an entry: left alone

    def test_rename_needs_exactly_one_kernel_per_entry(self):
        elf = make_cubin(["kiln_a_0", "kiln_a_1"])
        self.assertIn("entry 'kiln_a' declared in kiln.toml: the cubin has 2 kernel(s) named "
                      "'kiln_a_<N>' (its entries: kiln_a_0, kiln_a_1)",
                      failure(driver.rename_entries, elf, ["kiln_a"]))
        self.assertIn("the cubin has 0 kernel(s) named 'kiln_b_<N>'",
                      failure(driver.rename_entries, make_cubin(["kiln_a_0"]), ["kiln_b"]))

    def test_rename_refuses_an_entry_kiln_toml_does_not_declare(self):
        elf = make_cubin(["kiln_a_0", "extra_0"])
        self.assertIn("the cubin's entry kernels are [extra_0, kiln_a] but kiln.toml declares "
                      "[kiln_a]", failure(driver.rename_entries, elf, ["kiln_a"]))

    def test_a_file_that_is_not_a_64_bit_elf_is_refused(self):
        self.assertIn("the DSL's cubin is not a 64-bit little-endian ELF file",
                      failure(driver.sections, b"not a cubin at all" * 4))

    def test_resources_come_from_nv_info_and_the_shared_sections(self):
        elf = make_cubin(["kiln_a_0", "kiln_b_1"], shared={"kiln_a_0": 2048},
                         info=[(EIATTR_REGCOUNT, "kiln_a_0", 96), (EIATTR_FRAME_SIZE, "kiln_a_0", 16),
                               (EIATTR_MAX_STACK_SIZE, "kiln_a_0", 32),
                               (EIATTR_REGCOUNT, "kiln_b_1", 40)])
        report = driver.resources(driver.rename_entries(elf, ["kiln_a", "kiln_b"]))
        self.assertEqual(report, {"kiln_a": {"registers": 96, "stack": 32, "shared": 2048},
                                  "kiln_b": {"registers": 40, "stack": 0, "shared": 0}})


def versions(installed):
    """importlib.metadata.version as if exactly `installed` (name -> version) were installed."""
    def version(name):
        if name not in installed:
            raise importlib.metadata.PackageNotFoundError(name)
        return installed[name]
    return version


PINNED = {"nvidia-cutlass-dsl": "4.8.1", "nvidia-cutlass-dsl-libs-cu13": "4.8.1"}

SCRIPT = '''
import os
def kiln_export(kiln):
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "", "the driver hides every GPU"
    assert os.environ["CUTE_DSL_ARCH"] == kiln.target
    class Kernel:
        def set_name_prefix(self, name, **kwargs):
            pass
    for name in kiln.declared:
        kiln.entry(name, Kernel())
    class Compiled:
        __cubin__ = os.environ["KILN_TEST_CUBIN"]
    return Compiled()
'''


class Main(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="kiln-driver-test-")
        self.dir = pathlib.Path(self.tmp.name)
        cubin = self.dir / "dsl.cubin"
        cubin.write_bytes(make_cubin(["kiln_gdn_decode_0"], shared={"kiln_gdn_decode_0": 512},
                                     info=[(EIATTR_REGCOUNT, "kiln_gdn_decode_0", 72)]))
        self.script = self.dir / "kernel.py"
        self.script.write_text(SCRIPT)
        self.out = self.dir / "out.cubin"
        self.argv = list(ARGV)
        self.argv[self.argv.index("--script") + 1] = str(self.script)
        self.argv[self.argv.index("--out") + 1] = str(self.out)
        # The DSL's compiler of the requested CUDA major is loaded for real only with the DSL.
        self.flavors = []
        patches = [mock.patch.dict(os.environ, {"KILN_TEST_CUBIN": str(cubin)}),
                   mock.patch.object(sys, "path", list(sys.path)),
                   mock.patch.object(driver, "select_flavor", self.flavors.append)]
        for p in patches:
            p.start()
            self.addCleanup(p.stop)
        self.addCleanup(self.tmp.cleanup)

    def run_main(self, installed):
        with mock.patch.object(driver.importlib.metadata, "version", versions(installed)):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                driver.main(self.argv)
            return out.getvalue()

    def test_writes_the_renamed_cubin_and_a_ptxas_shaped_report(self):
        report = self.run_main(PINNED)
        elf = self.out.read_bytes()
        self.assertEqual([n for _, n in driver.entry_symbols(elf, driver.sections(elf))],
                         ["kiln_gdn_decode"])
        self.assertFalse(pathlib.Path(str(self.out) + ".tmp").exists())
        self.assertEqual(report.splitlines(), [
            "kiln-cute-dsl: Compiling entry function 'kiln_gdn_decode' for 'sm_90a'",
            "kiln-cute-dsl: Function properties for kiln_gdn_decode",
            "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
            "kiln-cute-dsl: Used 72 registers, 512 bytes smem",
        ])
        self.assertEqual(self.flavors, [13])

    def test_loads_the_dsl_compiler_of_the_requested_cuda_major(self):
        self.argv[self.argv.index("--cuda-major") + 1] = "12"
        self.run_main({"nvidia-cutlass-dsl": "4.8.1", "nvidia-cutlass-dsl-libs-cu12": "4.8.1"})
        self.assertEqual(self.flavors, [12])

    def test_checks_the_pins_before_running_the_script(self):
        self.script.write_text("raise RuntimeError('the script must not run')\n")
        with mock.patch.object(driver.importlib.metadata, "version", versions({})):
            self.assertIn("nvidia-cutlass-dsl is not installed", failure(driver.main, self.argv))
        with mock.patch.object(driver.importlib.metadata, "version",
                               versions({"nvidia-cutlass-dsl": "4.7.0"})):
            self.assertIn("nvidia-cutlass-dsl 4.7.0 is installed", failure(driver.main, self.argv))
            self.assertIn("kiln pins 4.8.1", failure(driver.main, self.argv))
        with mock.patch.object(driver.importlib.metadata, "version",
                               versions({"nvidia-cutlass-dsl": "4.8.1"})):
            self.assertIn("nvidia-cutlass-dsl-libs-cu13 (the DSL's libraries for the toolkit's "
                          "CUDA 13) is not installed", failure(driver.main, self.argv))
        self.assertFalse(self.out.exists())

    def test_a_script_must_define_kiln_export_and_name_every_entry(self):
        self.script.write_text("x = 1\n")
        with mock.patch.object(driver.importlib.metadata, "version", versions(PINNED)):
            self.assertIn("defines no kiln_export(kiln) function", failure(driver.main, self.argv))
        self.script.write_text("def kiln_export(kiln):\n    return None\n")
        with mock.patch.object(driver.importlib.metadata, "version", versions(PINNED)):
            self.assertIn("kiln_export() did not name entry kiln_gdn_decode with kiln.entry()",
                          failure(driver.main, self.argv))
        self.script.write_text(SCRIPT.replace('os.environ["KILN_TEST_CUBIN"]', "None"))
        with mock.patch.object(driver.importlib.metadata, "version", versions(PINNED)):
            self.assertIn("kiln_export() must return what cute.compile(..., options=kiln.options) "
                          "returns; it returned Compiled", failure(driver.main, self.argv))
        self.assertFalse(self.out.exists())


if __name__ == "__main__":
    unittest.main(verbosity=2)
