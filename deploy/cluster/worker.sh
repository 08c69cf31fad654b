#!/usr/bin/env bash
# Start the Dask workers of one host in the foreground: `dask cuda worker`, one worker per GPU.
#   DGBOOST_TLS_DIR=/etc/dgboost/tls NCCL_SOCKET_IFNAME=eth0 deploy/cluster/worker.sh
# With --cpu, plain `dask worker` processes instead (no GPU; what CI's end-to-end test runs).
# Other arguments go to the worker command.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# NCCL between hosts: the interface it may use (the one the hosts reach each other on),
# and its log level (WARN; INFO shows the transport it picked). Inside containers give
# /dev/shm room (docker --shm-size, or an emptyDir of medium Memory on Kubernetes).
export NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-^lo,docker}"
export NCCL_DEBUG="${NCCL_DEBUG:-WARN}"
export CUDA_DEVICE_ORDER=PCI_BUS_ID

cpu=false
if [[ "${1:-}" == "--cpu" ]]; then
    cpu=true
    shift
fi
for _ in $(seq 1 60); do  # the scheduler writes its file once it listens
    [[ -s "$DGBOOST_SCHEDULER_FILE" ]] && break
    sleep 1
done
if [[ ! -s "$DGBOOST_SCHEDULER_FILE" ]]; then
    echo "no scheduler file at $DGBOOST_SCHEDULER_FILE after 60 s: start scheduler.sh first" >&2
    exit 1
fi
if [[ "$cpu" == true ]]; then
    exec "$DGBOOST_DASK" worker --scheduler-file "$DGBOOST_SCHEDULER_FILE" \
        --dashboard-address 127.0.0.1:0 "${tls_args[@]}" "$@"
fi
exec "$DGBOOST_DASK" cuda worker --scheduler-file "$DGBOOST_SCHEDULER_FILE" \
    --dashboard-address 127.0.0.1:0 "${tls_args[@]}" "$@"
