#!/usr/bin/env python3
"""cubin_code_cmp.py OLD_DIR NEW_DIR: whether two builds' cubins hold the same machine code.

For each cubin in OLD_DIR (an artifact's cubins/), compares the sha256 of every section of the
same-named cubin in NEW_DIR, and reports the code (.text.*) as the same or not and which other
sections differ. Line tables and debug sections are left out: a change that moves source lines
(formatting, comments) changes them and nothing the GPU runs. Exit status 1 if any cubin's code
differs or is missing. Used to show that a source change without a code change (scripts/format.sh)
keeps earlier GPU evidence valid for the code (evidence/README.md).
"""
import hashlib
import os
import struct
import sys


def sections(path):
    """{section name: sha256 of its bytes} of a 64-bit little-endian ELF (a cubin), without
    debug / line-info sections and NOBITS ones."""
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError(f"{path}: not a 64-bit ELF")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]

    def name(offset):
        start = names_at + offset
        return data[start:data.index(b"\0", start)].decode()

    result = {}
    for sh_name, sh_type, _flags, _addr, offset, size, *_ in headers:
        n = name(sh_name)
        if sh_type == 8 or n.startswith((".debug", ".nv_debug")) or "line" in n:
            continue
        result[n] = hashlib.sha256(data[offset:offset + size]).hexdigest()
    return result


def main(old_dir, new_dir):
    same = differ = 0
    for f in sorted(os.listdir(old_dir)):
        if not f.endswith(".cubin"):
            continue
        new_path = os.path.join(new_dir, f)
        if not os.path.exists(new_path):
            print(f"MISSING {f}")
            differ += 1
            continue
        a, b = sections(os.path.join(old_dir, f)), sections(new_path)
        code_a = {k: v for k, v in a.items() if k.startswith(".text")}
        code_b = {k: v for k, v in b.items() if k.startswith(".text")}
        others = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k) and k not in code_a)
        ok = code_a == code_b
        same += ok
        differ += not ok
        print(f"{'same' if ok else 'DIFF'} {f}: {len(code_a)} code sections"
              + (f"; other sections differ: {', '.join(others)}" if others else ""))
    print(f"{same} cubins with the same code, {differ} different or missing")
    return 0 if differ == 0 else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
