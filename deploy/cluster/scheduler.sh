#!/usr/bin/env bash
# Start the Dask scheduler of a dgboost cluster in the foreground (systemd or a terminal).
#   DGBOOST_SCHEDULER_HOST=10.0.0.5 DGBOOST_TLS_DIR=/etc/dgboost/tls deploy/cluster/scheduler.sh
# It writes DGBOOST_SCHEDULER_FILE, which worker.sh and `dgboost train --scheduler-file` read.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

protocol=tcp
if [[ ${#tls_args[@]} -gt 0 ]]; then
    protocol=tls
fi
mkdir -p "$(dirname "$DGBOOST_SCHEDULER_FILE")"
exec "$DGBOOST_DASK" scheduler \
    --scheduler-file "$DGBOOST_SCHEDULER_FILE" \
    --protocol "$protocol" \
    --host "$DGBOOST_SCHEDULER_HOST" \
    --port "$DGBOOST_SCHEDULER_PORT" \
    --dashboard-address "$DGBOOST_DASHBOARD" \
    "${tls_args[@]}" \
    "$@"
