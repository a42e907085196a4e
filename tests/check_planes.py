#!/usr/bin/env python3
"""The gateway's planes, lowest first: dataplane, capture, estimates, service, control. A file may
include headers of its own plane or of a lower one, never of a higher one; the data plane includes
only itself and the C++/C standard library (no DPDK, no libpcap, no gRPC). Exit 1 with one line per
broken include, 0 when the rule holds. Usage: check_planes.py [SOURCE_ROOT]"""
import pathlib
import re
import sys

PLANES = ["dataplane", "capture", "estimates", "service", "control"]
# Standard headers the data plane may use: no I/O, threads or clocks among them.
DATAPLANE_SYSTEM_OK = re.compile(
    r"^(algorithm|array|atomic|bit|cassert|cinttypes|climits|cmath|cstddef|cstdint|cstring|"
    r"limits|new|optional|span|string|string_view|type_traits|utility|vector|cstdlib|"
    r"functional|memory|unordered_map|tuple|initializer_list)$")
# The data plane's two files that call the kernel, both outside the packet path: table memory
# (mmap/madvise when a table is built and from the control lcore) and text forms of addresses.
DATAPLANE_SYSCALL_FILES = {"gateway/dataplane/table_memory.cpp": "sys/mman.h",
                           "gateway/dataplane/prefix_text.cpp": "arpa/inet.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def plane_of_path(rel):
    parts = rel.parts
    return parts[1] if len(parts) > 2 and parts[0] == "gateway" and parts[1] in PLANES else None


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[1])
    errors, checked = [], 0
    for path in sorted((root / "gateway").rglob("*")):
        if path.suffix not in (".cpp", ".hpp", ".h"):
            continue
        rel = path.relative_to(root)
        plane = plane_of_path(rel)
        if plane is None:
            errors.append(f"{rel}: outside every plane folder ({', '.join(PLANES)})")
            continue
        checked += 1
        level = PLANES.index(plane)
        for m in INCLUDE.finditer(path.read_text()):
            kind, inc = m.groups()
            line = path.read_text()[: m.start()].count("\n") + 1
            if kind == '"':
                head = inc.split("/")[0]
                if head in PLANES:
                    if PLANES.index(head) > level:
                        errors.append(f"{rel}:{line}: {plane} includes higher plane '{inc}'")
                elif plane == "dataplane":
                    errors.append(f"{rel}:{line}: dataplane includes '{inc}' from outside itself")
            elif plane == "dataplane" and not DATAPLANE_SYSTEM_OK.match(inc) and \
                    DATAPLANE_SYSCALL_FILES.get(rel.as_posix()) != inc:
                errors.append(f"{rel}:{line}: dataplane includes <{inc}>, not an allowed "
                              "standard header")
    for e in errors:
        print(e)
    print(f"check_planes: {checked} files, {len(errors)} broken includes")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
