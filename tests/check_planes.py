#!/usr/bin/env python3
"""The gateway's planes, lowest first: dataplane, capture, estimates, service, control. A file may
include headers of its own plane or of a lower one, never of a higher one; the data plane includes
only itself and the C++/C standard library (no DPDK, no libpcap, no gRPC). Inside the data plane, the
layers in DATAPLANE_LAYERS hold over the whole include graph: the tracker never reaches the worker
that drives it, even through another header. Exit 1 with one line per broken include, 0 when the
rules hold. Usage: check_planes.py [SOURCE_ROOT]"""
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
# Inside the data plane: files whose name starts with the first string must not include, directly
# or through other data-plane headers, the second (a lower layer reaching up to a higher one).
DATAPLANE_LAYERS = [("tracker", "dataplane/worker.hpp")]
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def plane_of_path(rel):
    parts = rel.parts
    return parts[1] if len(parts) > 2 and parts[0] == "gateway" and parts[1] in PLANES else None


def local_includes(root, rel):
    """The project headers (as written, e.g. "dataplane/flow.hpp") that gateway file `rel`
    includes directly."""
    return [inc for kind, inc in INCLUDE.findall((root / rel).read_text()) if kind == '"']


def layer_errors(root):
    """Breaks of DATAPLANE_LAYERS, each with the include chain that reaches the forbidden
    header."""
    errors = []
    dp = root / "gateway" / "dataplane"
    for path in sorted(dp.glob("*")):
        if path.suffix not in (".cpp", ".hpp", ".h"):
            continue
        for prefix, forbidden in DATAPLANE_LAYERS:
            if not path.name.startswith(prefix):
                continue
            # Breadth first over "dataplane/..." includes; `via` keeps the chain for the message.
            start = "dataplane/" + path.name
            via, queue = {start: None}, [start]
            while queue:
                cur = queue.pop(0)
                target = root / "gateway" / cur
                if not target.is_file():
                    continue
                for inc in local_includes(root, target.relative_to(root)):
                    if inc.startswith("dataplane/") and inc not in via:
                        via[inc] = cur
                        queue.append(inc)
            if forbidden in via:
                chain, cur = [], forbidden
                while cur is not None:
                    chain.append(cur)
                    cur = via[cur]
                errors.append(f"gateway/{start}: reaches '{forbidden}' "
                              f"({' -> '.join(reversed(chain))}); {prefix}* sits below it")
    return errors


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
    errors += layer_errors(root)
    for e in errors:
        print(e)
    print(f"check_planes: {checked} files, {len(errors)} broken includes")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
