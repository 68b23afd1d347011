#!/usr/bin/env bash
# Run a command while tcpdump watches every non-loopback network interface; fail if any DDS
# (RTPS) packet left the machine while it ran.
#
#   scripts/check_dds_loopback.sh .venv/bin/pytest test/ros
#   scripts/check_dds_loopback.sh make test-fast
#
# Needs tcpdump and the right to capture (root or CAP_NET_RAW): apt-get install -y tcpdump.
# Prints, per interface, the UDP packets seen (DNS/NTP/mDNS excluded) and the RTPS ones among them.
# Exit status: the command's own status if it failed, 3 if RTPS/DDS packets were seen, else 0.
set -euo pipefail

if [[ $# -eq 0 ]]; then
    echo "usage: $0 COMMAND [ARGS...]" >&2
    exit 2
fi
if ! command -v tcpdump >/dev/null; then
    echo "check_dds_loopback: tcpdump not found (apt-get install -y tcpdump)" >&2
    exit 2
fi

capture_dir=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$capture_dir"
}
trap cleanup EXIT

interfaces=()
for path in /sys/class/net/*; do
    name=$(basename "$path")
    [[ "$name" == lo ]] && continue
    [[ "$(cat "$path/operstate" 2>/dev/null)" == down ]] && continue
    interfaces+=("$name")
done
if [[ ${#interfaces[@]} -eq 0 ]]; then
    echo "check_dds_loopback: no non-loopback interface is up; nothing to watch" >&2
fi

# Everything UDP except name/time/mDNS lookups; RTPS is recognised by its magic "RTPS" at the
# start of the UDP payload, or by a destination in the DDS port range (7400 + 250 * domain).
udp_filter='udp and not port 53 and not port 123 and not port 5353'
rtps_filter="($udp_filter) and (udp[8:4] = 0x52545053 or dst portrange 7400-65535)"

for iface in "${interfaces[@]}"; do
    tcpdump -i "$iface" -n -U -w "$capture_dir/$iface.pcap" "$udp_filter" \
        2>"$capture_dir/$iface.log" &
    pids+=($!)
done
# tcpdump says "listening on" once the capture runs.
for iface in "${interfaces[@]}"; do
    for _ in $(seq 50); do
        grep -q "listening on" "$capture_dir/$iface.log" 2>/dev/null && break
        sleep 0.1
    done
done

set +e
"$@"
command_status=$?
set -e

sleep 1  # late packets (participants announcing their departure)
for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
pids=()

leaked=0
for iface in "${interfaces[@]}"; do
    pcap="$capture_dir/$iface.pcap"
    udp_count=$(tcpdump -r "$pcap" -n "$udp_filter" 2>/dev/null | wc -l)
    rtps_count=$(tcpdump -r "$pcap" -n "$rtps_filter" 2>/dev/null | wc -l)
    echo "check_dds_loopback: $iface: $udp_count UDP packets, $rtps_count RTPS/DDS packets"
    if [[ "$rtps_count" -gt 0 ]]; then
        tcpdump -r "$pcap" -n "$rtps_filter" 2>/dev/null | head -5 | sed 's/^/    /'
        leaked=1
    fi
done

if [[ $command_status -ne 0 ]]; then
    echo "check_dds_loopback: command failed with status $command_status" >&2
    exit "$command_status"
fi
if [[ $leaked -ne 0 ]]; then
    echo "check_dds_loopback: FAIL: DDS packets left the machine" >&2
    exit 3
fi
echo "check_dds_loopback: OK: no DDS packet left the machine"
