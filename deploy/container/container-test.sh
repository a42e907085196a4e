#!/usr/bin/env bash
# Builds the container image from the Debian package and checks it: every program answers
# --version inside, and the replica (the image's default program) serves /metrics against a
# redis-server on the host, as user nobody. No registry is needed: the base image
# (debian:bookworm-slim) is made with debootstrap from the Debian mirror and imported, unless
# podman already has it. Usage (as root, bookworm, podman and debootstrap installed):
#   bash deploy/container/container-test.sh SPAND_DEB [WORKDIR]
# CONTAINER_RUNTIME=runc picks podman's OCI runtime (on a host whose cgroups are in hybrid mode
# crun refuses to run containers). Exit status: 0 the image works, 1 a check failed, 2 usage.
set -euo pipefail
deb=${1:-}
[[ -f "$deb" ]] || { echo "usage: $0 SPAND_DEB [WORKDIR]" >&2; exit 2; }
top=$(cd "$(dirname "$0")/../.." && pwd)
work=$(realpath -m "${2:-$top/build-container}")
base=docker.io/library/debian:bookworm-slim
mkdir -p "$work"
if ! podman image exists "$base"; then
  echo "container: making $base with debootstrap (minbase)"
  rm -rf "$work/rootfs"
  debootstrap --variant=minbase bookworm "$work/rootfs" http://deb.debian.org/debian > "$work/debootstrap.log"
  rm -f "$work"/rootfs/var/cache/apt/archives/*.deb
  tar -C "$work/rootfs" -c . | podman import - "$base" > /dev/null
  rm -rf "$work/rootfs"
fi
# Explicit limits: podman's defaults are above what some hosts allow a container (setrlimit EPERM).
run=(podman ${CONTAINER_RUNTIME:+--runtime "$CONTAINER_RUNTIME"} run --ulimit nofile=1024:1024
  --ulimit nproc=1024:1024)
cp "$deb" "$work/"
podman build --pull=never --isolation=chroot -q -f "$top/deploy/container/Containerfile" \
  --build-arg DEB="$(basename "$deb")" -t spand-test "$work" > /dev/null
echo "container: image built ($(podman image inspect spand-test --format '{{.Size}}') bytes)"
for p in spand-gateway spand-estimates spandctl; do
  "${run[@]}" --rm spand-test "$p" --version | head -1
done
# The default command is the replica: against a redis-server on the host, on ports of its own.
port=$((20000 + RANDOM % 20000))
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "$work/redis.pid" > /dev/null
name=spand-test-$$
cleanup() {
  podman rm -f "$name" > /dev/null 2>&1 || true
  kill "$(cat "$work/redis.pid")" 2> /dev/null || true
}
trap cleanup EXIT
"${run[@]}" -d --name "$name" --network host spand-test spand-estimates \
  --config /etc/spand/estimates.toml --redis "redis://127.0.0.1:$port" --client-key-file public \
  --grpc-listen "127.0.0.1:$((port + 1))" --metrics-listen "127.0.0.1:$((port + 2))" > /dev/null
for _ in $(seq 50); do
  curl -fsS "http://127.0.0.1:$((port + 2))/metrics" > "$work/metrics.txt" 2> /dev/null && break
  sleep 0.2
done
grep -q '^spand_build_info' "$work/metrics.txt" || {
  echo "container: FAILED: no spand_build_info from the replica's /metrics" >&2
  podman logs "$name" >&2
  exit 1
}
echo "container: the replica serves /metrics ($(grep -c '^spand_' "$work/metrics.txt") spand_ series)"
# The replica runs as nobody (USER 65534): check it.
uid=$(podman top "$name" user | tail -1 | tr -d ' ')
[[ "$uid" == "nobody" || "$uid" == "65534" ]] || { echo "container: FAILED: runs as $uid" >&2; exit 1; }
echo "container: the replica runs as $uid; ok"
