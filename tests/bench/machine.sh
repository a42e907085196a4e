# Sourced by the benchmark scripts: the lines every result starts with, so figures carry the
# machine, its load and the build they come from. Needs PY (Debian's python3).

# date, host, cpu, memory and load before the run.
bench_machine() {
  echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host:    $(uname -n), kernel $(uname -r)"
  echo "cpu:     $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "memory:  $(free -g | awk '/Mem:/ {print $2 " GB"}')"
  echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min, before the run)"
}

# The meson build options that decide speed, of build directory $1.
build_line() {
  meson introspect --buildoptions "$1" 2>/dev/null | $PY -c '
import json, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
print("buildtype=%s optimization=%s b_lto=%s b_ndebug=%s" % (o["buildtype"], o["optimization"], o["b_lto"], o["b_ndebug"]))' 2>/dev/null || echo '?'
}
