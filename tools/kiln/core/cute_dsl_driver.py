# kiln's CuTe DSL driver: tools/kiln/core/cute_dsl_driver.py, embedded byte for byte into the kiln
# binary at build time (tools/kiln/CMakeLists.txt), which writes it next to the build's objects and
# runs it once per (variant, SM) in the project's venv (core/cute_dsl_frontend.cpp). Runs one
# kernel script for one SM, GPU-free, and writes the cubin with kiln's entry names. The contract a
# script follows is in docs/cute-dsl.md. Its bytes are part of every DSL variant's fingerprint.
# Tested without the DSL or a GPU by tests/unit/cute_dsl_driver_test.py.
import argparse, importlib.metadata, importlib.util, json, os, re, struct, sys, tempfile


def fail(message):
    sys.stderr.write("kiln-cute-dsl: " + message + "\n")
    sys.exit(1)


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="kiln-cute-dsl")
    p.add_argument("--script", required=True)
    p.add_argument("--target", required=True)       # sm_90 | sm_90a
    p.add_argument("--sm", type=int, required=True)
    p.add_argument("--constants", required=True)    # JSON object, kiln.toml order
    p.add_argument("--entries", required=True)      # comma list of kiln entry names
    p.add_argument("--dsl-version", required=True)  # the pin
    p.add_argument("--cuda-major", type=int, required=True)
    p.add_argument("--variant", required=True)
    p.add_argument("--out", required=True)
    return p.parse_args(argv)


class Context:
    """What a kernel script's kiln_export(kiln) receives."""

    def __init__(self, args, dump_dir):
        self.variant = args.variant
        self.constants = json.loads(args.constants)
        self.sm = args.sm
        self.target = args.target
        self.declared = [e for e in args.entries.split(",") if e]
        self.entries = {}
        # Options of cute.compile: the target, and the cubin kept in memory (dumped to a private
        # directory that the driver deletes).
        self.options = "--gpu-arch={} --keep-cubin --dump-dir={}".format(args.target, dump_dir)

    def entry(self, name, kernel):
        if name not in self.declared:
            fail("{}: kiln.entry('{}'): not an entry of kiln.toml ({})".format(
                self.variant, name, ", ".join(self.declared)))
        if name in self.entries:
            fail("{}: kiln.entry('{}') named twice".format(self.variant, name))
        kernel.set_name_prefix(name, remove_cutlass_symbol=True, keep_mangled_name=False)
        self.entries[name] = kernel


SHT_SYMTAB, SHT_STRTAB, STO_CUDA_ENTRY = 2, 3, 0x10


def sections(elf):
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        fail("the DSL's cubin is not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3a)
    out = []
    for i in range(shnum):
        name, type_, _, _, offset, size, link, _, _, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", elf, shoff + i * shentsize)
        out.append(dict(name=name, type=type_, offset=offset, size=size, link=link, entsize=entsize))
    names = out[shstrndx]
    for s in out:
        end = elf.index(b"\0", names["offset"] + s["name"])
        s["label"] = elf[names["offset"] + s["name"]:end].decode()
    return out


def entry_symbols(elf, secs):
    """(symbol index, name) of every entry kernel: global FUNC symbols with STO_CUDA_ENTRY."""
    found = []
    for s in secs:
        if s["type"] != SHT_SYMTAB:
            continue
        strtab = secs[s["link"]]
        for i in range(s["size"] // 24):
            name, info, other, _, _, _ = struct.unpack_from("<IBBHQQ", elf, s["offset"] + i * 24)
            if (info & 0xf) == 2 and (info >> 4) == 1 and other & STO_CUDA_ENTRY:
                end = elf.index(b"\0", strtab["offset"] + name)
                found.append((i, elf[strtab["offset"] + name:end].decode()))
    return found


def rename_entries(elf, declared):
    """The DSL names a kernel '<prefix>_<trace counter>'; kiln's name is the prefix. Every string
    table entry that ends in '<entry>_<N>' (the symbol and the .text/.nv.info/.nv.constant0/
    .nv.shared section names) is cut to '<entry>' in place: a shorter name fits where the old one
    was, no offset moves, and strings sharing the tail are cut alike."""
    elf = bytearray(elf)
    secs = sections(bytes(elf))
    names = [n for _, n in entry_symbols(bytes(elf), secs)]
    for entry in declared:
        ours = [n for n in names if re.fullmatch(re.escape(entry) + r"_[0-9]+", n)]
        if len(ours) != 1:
            fail("entry '{}' declared in kiln.toml: the cubin has {} kernel(s) named '{}_<N>' "
                 "(its entries: {}); give kiln.entry() every kernel the script launches".format(
                     entry, len(ours), entry, ", ".join(names) or "none"))
        old, new = ours[0].encode() + b"\0", entry.encode() + b"\0"
        for s in secs:
            if s["type"] != SHT_STRTAB:
                continue
            lo, hi = s["offset"], s["offset"] + s["size"]
            at = elf.find(old, lo, hi)
            while at >= 0:
                elf[at:at + len(old)] = new + b"\0" * (len(old) - len(new))
                at = elf.find(old, at + len(old), hi)
    renamed = sorted(n for _, n in entry_symbols(bytes(elf), sections(bytes(elf))))
    if renamed != sorted(declared):
        fail("the cubin's entry kernels are [{}] but kiln.toml declares [{}]".format(
            ", ".join(renamed), ", ".join(sorted(declared))))
    return bytes(elf)


# .nv.info attribute ids (the same records core/cubin_abi.h reads): per-kernel register count,
# stack sizes; static shared memory is the size of the entry's .nv.shared.<entry> section.
EIATTR_FRAME_SIZE, EIATTR_MAX_STACK_SIZE, EIATTR_REGCOUNT = 0x11, 0x23, 0x2f


def resources(elf):
    secs = sections(elf)
    by_index = dict(entry_symbols(elf, secs))
    report = {name: dict(registers=0, stack=0, shared=0) for name in by_index.values()}
    for s in secs:
        if s["label"] == ".nv.info":
            info, at = elf[s["offset"]:s["offset"] + s["size"]], 0
            while at + 4 <= len(info):
                fmt_, attr, value = info[at], info[at + 1], struct.unpack_from("<H", info, at + 2)[0]
                at += 4
                if fmt_ != 4:
                    continue
                if value >= 8 and attr in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE, EIATTR_MAX_STACK_SIZE):
                    sym, number = struct.unpack_from("<II", info, at)
                    name = by_index.get(sym)
                    if name is not None:
                        if attr == EIATTR_REGCOUNT:
                            report[name]["registers"] = number
                        else:
                            report[name]["stack"] = max(report[name]["stack"], number)
                at += value
        elif s["label"].startswith(".nv.shared.") and s["label"][11:] in report:
            report[s["label"][11:]]["shared"] = s["size"]
    return report


def select_flavor(cuda_major):
    """Loads the DSL's compiler of CUDA `cuda_major` before the DSL is imported. The DSL ships one
    per CUDA major (nvidia-cutlass-dsl-libs-cu12, -cu13, side by side) and picks one at import
    from the driver it finds, or the newest when there is none; kiln picks by the toolkit the
    build asked for instead (the DSL leaves an already loaded module alone)."""
    name = "cutlass._mlir._mlir_libs._cutlass_ir"
    spec = importlib.util.find_spec("cutlass")
    if spec is None or not spec.submodule_search_locations:
        fail("the DSL's cutlass package is not importable from {}".format(sys.prefix))
    libs = os.path.join(list(spec.submodule_search_locations)[0], "_mlir", "_mlir_libs")
    found = sorted(f for f in os.listdir(libs)
                   if f.startswith("_cutlass_ir.cu{}.".format(cuda_major)) and f.endswith(".so"))
    if not found:
        fail("the DSL has no CUDA {} compiler (_cutlass_ir.cu{}.*.so) in {}".format(
            cuda_major, cuda_major, libs))
    flavor = importlib.util.spec_from_file_location(name, os.path.join(libs, found[0]))
    module = importlib.util.module_from_spec(flavor)
    sys.modules[name] = module
    flavor.loader.exec_module(module)


def main(argv=None):
    args = parse_args(argv)
    # GPU-free by construction: the target comes from kiln, never from a device query, and even
    # on a machine with a GPU the driver API sees none.
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.environ["CUTE_DSL_ARCH"] = args.target
    os.environ["CUTE_DSL_DISABLE_FILE_CACHING"] = "1"
    os.environ.pop("CUTE_DSL_KEEP", None)
    try:
        have = importlib.metadata.version("nvidia-cutlass-dsl")
    except importlib.metadata.PackageNotFoundError:
        fail("nvidia-cutlass-dsl is not installed in {} (run scripts/setup.sh)".format(sys.prefix))
    if have != args.dsl_version:
        fail("nvidia-cutlass-dsl {} is installed in {}; kiln pins {} (run scripts/setup.sh)".format(
            have, sys.prefix, args.dsl_version))
    libs = "nvidia-cutlass-dsl-libs-cu{}".format(args.cuda_major)
    try:
        importlib.metadata.version(libs)
    except importlib.metadata.PackageNotFoundError:
        fail("{} (the DSL's libraries for the toolkit's CUDA {}) is not installed in {}".format(
            libs, args.cuda_major, sys.prefix))
    select_flavor(args.cuda_major)
    script = os.path.abspath(args.script)
    sys.path.insert(0, os.path.dirname(script))
    spec = importlib.util.spec_from_file_location("kiln_cute_dsl_kernel", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "kiln_export"):
        fail("{} defines no kiln_export(kiln) function (docs/cute-dsl.md)".format(script))
    with tempfile.TemporaryDirectory(prefix="kiln-cute-dsl-") as dump_dir:
        ctx = Context(args, dump_dir)
        compiled = module.kiln_export(ctx)
        missing = [e for e in ctx.declared if e not in ctx.entries]
        if missing:
            fail("{}: kiln_export() did not name entr{} {} with kiln.entry()".format(
                args.variant, "y" if len(missing) == 1 else "ies", ", ".join(missing)))
        cubin = getattr(compiled, "__cubin__", None)
        if isinstance(cubin, str) and os.path.isfile(cubin):
            with open(cubin, "rb") as f:
                cubin = f.read()
        if not isinstance(cubin, (bytes, bytearray)) or not cubin:
            fail("{}: kiln_export() must return what cute.compile(..., options=kiln.options) "
                 "returns; it returned {}".format(args.variant, type(compiled).__name__))
    cubin = rename_entries(bytes(cubin), ctx.declared)
    tmp = args.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(cubin)
    os.replace(tmp, args.out)
    # The resource report in ptxas -v's shape (core/ptxas.h parses it), read from the cubin.
    for name, r in sorted(resources(cubin).items()):
        print("kiln-cute-dsl: Compiling entry function '{}' for '{}'".format(name, args.target))
        print("kiln-cute-dsl: Function properties for {}".format(name))
        print("    {} bytes stack frame, 0 bytes spill stores, 0 bytes spill loads".format(r["stack"]))
        print("kiln-cute-dsl: Used {} registers, {} bytes smem".format(r["registers"], r["shared"]))


if __name__ == "__main__":
    main()
