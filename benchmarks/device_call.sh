#!/bin/bash
# One device call whose outputs fit what the machine sends back (at most 8 files, two folders
# down): benchmarks/device_run.sh runs with its OUT in a scratch folder, and everything it writes
# comes back packed as $OUT/outputs.tar.gz, repacked every 30 s while it runs (a call killed at
# its limit still returns the last pack), with the cases' own logs (NAME.txt, machine.txt) beside.
#
#   DEADLINE_S=560 bash benchmarks/device_call.sh sizes_extcpp@bg modes_drafted modes_planted
set -u
real=${OUT:?OUT: the folder that comes back}
scratch=/tmp/device_out
rm -rf "$scratch"
mkdir -p "$scratch"
pack() { tar -C "$scratch" -czf "$real/outputs.tar.gz.part" . 2>/dev/null && mv "$real/outputs.tar.gz.part" "$real/outputs.tar.gz"; }
( while sleep 30; do pack; done ) &
packer=$!
OUT=$scratch bash benchmarks/device_run.sh "$@"
rc=$?
kill "$packer" 2>/dev/null
pack
ls "$scratch"/*.txt 2>/dev/null | head -n 7 | xargs -r cp -t "$real"
exit $rc
