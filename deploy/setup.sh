#!/usr/bin/env bash
# Installs every Debian (bookworm) package spand needs to build, test and run. Idempotent: the one
# place this list lives. Usage (as root): bash deploy/setup.sh
set -euo pipefail
packages=(
  # build
  build-essential meson ninja-build pkg-config clang clang-format git ca-certificates help2man
  libclang-rt-14-dev   # libFuzzer and clang's sanitizer runtimes (tests/fuzz, -Dfuzz=true)
  # gateway data plane and files
  dpdk dpdk-dev libpcap-dev
  # control plane: config, CLI, logs, JSON, Redis, gRPC, metrics
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libhiredis-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler prometheus-cpp-dev
  # agent: BPF and rtnetlink
  libbpf-dev bpftool libmnl-dev linux-libc-dev iproute2 ethtool
  # tests and benchmarks: real servers, reference tools, packet tools
  libgtest-dev redis-server redis-tools prometheus tcptrace tshark tcpdump
  python3 python3-pytest python3-scapy python3-grpcio python3-protobuf
  python3-matplotlib   # tests/lab/benefit/analyze.py's plots
  procps               # sysctl, free
  # packaging and installation: the Debian package, units, man pages, completion (deploy/)
  debhelper systemd man-db bash-completion curl
  # dashboards as code (deploy/grafana/check.sh): a Python venv for grafana-foundation-sdk
  python3-venv
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y "${missing[@]}"
fi
# npm for the dashboards' type check: Debian's nodejs and npm, unless a Node.js with its own npm
# is already installed (installing Debian's npm over it would conflict).
if ! command -v npm > /dev/null; then
  apt-get install -y nodejs npm
fi
echo "setup: all ${#packages[@]} packages present, npm $(npm --version 2> /dev/null)"
