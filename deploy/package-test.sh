#!/usr/bin/env bash
# Builds the Debian package from a copy of the tree (dpkg-buildpackage -b, debian/: debhelper with
# the meson build), installs it with its dependencies (apt-get), and checks the installed files:
# every binary answers --version from its installed path and reads its installed configuration,
# the units pass `systemd-analyze verify` (man pages included) and their security exposure is
# printed; then the deployment guide's commands run against this installation
# (tests/integration/deploy/test_deploy_doc.py). Usage (as root): bash deploy/package-test.sh [OUTDIR]   (default ./build-deb)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:-$top/build-deb}")
rm -rf "$out" && mkdir -p "$out/src"
cd "$top"
# The tracked files as they are in the tree (uncommitted edits included), nothing built.
(git ls-files -z; git ls-files -z --others --exclude-standard) | xargs -0 cp --parents -t "$out/src"
start=$(date +%s)
(cd "$out/src" && dpkg-buildpackage -b -us -uc -j"$(nproc)" > "$out/build.log" 2>&1) ||
  { tail -50 "$out/build.log"; exit 1; }
echo "package: built in $(($(date +%s) - start)) s: $(cd "$out" && ls ./*.deb | tr '\n' ' ')"
deb=$(ls "$out"/spand_*_"$(dpkg --print-architecture)".deb)
# --reinstall: with the same version already installed (a second run on one machine), apt-get
# would otherwise keep the installed files and everything below would test them.
apt-get install -y --allow-downgrades --reinstall "$deb" > "$out/install.log" 2>&1 ||
  { tail -30 "$out/install.log"; exit 1; }
dpkg -L spand > "$out/files.txt"
# The client id key the postinst creates (kept if it was there): 32 hex digits, root only.
grep -Eqx '[0-9a-f]{32}' /etc/spand/client.key && [ "$(stat -c %a:%U /etc/spand/client.key)" = 600:root ] ||
  { echo "package: /etc/spand/client.key missing, malformed or not 0600 root"; exit 1; }
# The installed programs are the ones just built.
dpkg-deb -x "$deb" "$out/unpacked"
for b in usr/bin/spand-gateway usr/bin/spand-estimates usr/bin/spandctl usr/sbin/spand-agent; do
  cmp -s "$out/unpacked/$b" "/$b" || { echo "package: /$b is not the one in $deb"; exit 1; }
done

for b in /usr/bin/spand-gateway /usr/bin/spand-estimates /usr/bin/spandctl /usr/sbin/spand-agent; do
  "$b" --version | head -1
done
/usr/bin/spand-gateway --config /etc/spand/gateway.toml --print-config > /dev/null
/usr/bin/spand-estimates --config /etc/spand/estimates.toml --print-config > /dev/null
/usr/sbin/spand-agent --config /etc/spand/agent.toml --print-config > /dev/null
units=()
for u in spand-gateway spand-estimates spand-agent; do
  units+=("$(grep -E "/systemd/system/$u\.service$" "$out/files.txt")")
done
# verify checks ExecStart, the [Install] targets and Documentation=man:... against the installed
# man pages; any output is a finding.
verify=$(systemd-analyze verify "${units[@]}" 2>&1) || { echo "$verify"; exit 1; }
[ -z "$verify" ] || { echo "systemd-analyze verify: $verify"; exit 1; }
echo "package: systemd-analyze verify clean for ${units[*]}"
for u in "${units[@]}"; do
  systemd-analyze security --offline=true "$u" | tail -1
done
for f in /usr/share/man/man1/spand-gateway.1.gz /usr/share/man/man8/spand-agent.8.gz \
  /usr/share/bash-completion/completions/spandctl /usr/share/doc/spand/deploy.md \
  /usr/share/doc/spand/examples/spand-rules.yml /etc/spand/gateway.toml; do
  [ -e "$f" ] || { echo "package: $f missing"; exit 1; }
done
promtool check config /usr/share/doc/spand/examples/prometheus.yml > /dev/null
echo "package: installed and checked"

# Upgrade and rollback: the same package as a later version (repacked: only the Version field of
# its control file differs), installed over this one, then this one again (a downgrade). An
# operator's edit of a configuration file (a conffile) and the client key (created once by the
# postinst) must survive both; dpkg must not ask (the package's own conffile did not change, so
# the operator's version is kept without a question: stdin is /dev/null, a question would fail).
start=$(date +%s)
up="$out/upgrade" && rm -rf "$up" && mkdir -p "$up"
v=$(dpkg-deb -f "$deb" Version) && v2="$v+upgradetest1"
dpkg-deb -R "$deb" "$up/root"
sed -i "s/^Version: .*/Version: $v2/" "$up/root/DEBIAN/control"
dpkg-deb -b --root-owner-group "$up/root" "$up/spand_${v2}.deb" > /dev/null
cp -a /etc/spand/gateway.toml "$up/gateway.toml.before"
key=$(sha256sum < /etc/spand/client.key)
echo "# an operator's edit $$" >> /etc/spand/gateway.toml
for step in "upgrade:$up/spand_${v2}.deb:$v2" "rollback:$deb:$v"; do
  IFS=: read -r what file want <<< "$step"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --allow-downgrades "$file" \
    < /dev/null > "$up/$what.log" 2>&1 || { tail -30 "$up/$what.log"; exit 1; }
  got=$(dpkg-query -W -f='${Version} ${Status}' spand)
  [ "$got" = "$want install ok installed" ] || { echo "package $what: $got, not $want"; exit 1; }
  grep -q "^# an operator's edit $$\$" /etc/spand/gateway.toml ||
    { echo "package $what: the operator's edit of /etc/spand/gateway.toml is lost"; exit 1; }
  [ "$(sha256sum < /etc/spand/client.key)" = "$key" ] ||
    { echo "package $what: /etc/spand/client.key changed"; exit 1; }
  [ ! -e /etc/spand/gateway.toml.dpkg-new ] && [ ! -e /etc/spand/gateway.toml.dpkg-dist ] ||
    { echo "package $what: dpkg left a .dpkg-new/.dpkg-dist"; exit 1; }
  /usr/bin/spand-gateway --config /etc/spand/gateway.toml --print-config > /dev/null
done
# Units an operator enabled are restarted after an upgrade (dh_installsystemd, compat 13): the
# postinst asks systemd for it when systemd runs (not on a CI runner without systemd: checked as
# written in the script, not run).
grep -q '_dh_action=restart' /var/lib/dpkg/info/spand.postinst ||
  { echo "package: the postinst does not restart units on upgrade"; exit 1; }
for u in spand-gateway spand-estimates spand-agent; do
  grep -q "deb-systemd-invoke.*$u\.service" /var/lib/dpkg/info/spand.postinst ||
    { echo "package: the postinst does not restart $u.service after an upgrade"; exit 1; }
done
cp -a "$up/gateway.toml.before" /etc/spand/gateway.toml
echo "package: upgrade to $v2 and rollback to $v keep the conffiles and the client key" \
  "($(($(date +%s) - start)) s)"

# The deployment guide's commands against this installation, in network namespaces (the lock
# keeps them apart from other users of namespaces on a shared machine).
echo "package: docs/deploy.md"
flock /tmp/spand-netlab.lock pytest-3 -q -rs -p no:cacheprovider \
  "$top/tests/integration/deploy/test_deploy_doc.py"
