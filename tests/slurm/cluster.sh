#!/usr/bin/env bash
# Start or stop a one-node SLURM cluster on this machine (root; Debian's slurmctld, slurmd, munge).
#   tests/slurm/cluster.sh start   |   tests/slurm/cluster.sh stop
set -euo pipefail
STATE=/var/tmp/selfheal-slurm
HERE="$(cd "$(dirname "$0")" && pwd)"
case "$1" in
start)
    mkdir -p "$STATE/slurmctld" "$STATE/slurmd" /etc/slurm /run/munge
    chown munge:munge /run/munge
    host="$(hostname -s)"
    mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
    sed -e "s|@HOST@|$host|g" -e "s|@STATE@|$STATE|g" -e "s|@CPUS@|$(nproc)|g" -e "s|@MEM@|$mem|g" \
        "$HERE/slurm.conf.in" > /etc/slurm/slurm.conf
    pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged
    pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld -i
    pgrep -x slurmd >/dev/null || /usr/sbin/slurmd
    for _ in $(seq 60); do
        if sinfo -h -o %T 2>/dev/null | grep -qE "idle|mixed|alloc"; then exit 0; fi
        sleep 1
    done
    echo "SLURM did not come up: $(sinfo 2>&1)" >&2
    exit 1
    ;;
stop)
    pkill -x slurmd || true
    pkill -x slurmctld || true
    pkill -x munged || true
    ;;
esac
