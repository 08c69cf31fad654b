# shellcheck shell=bash disable=SC2034  # tls_args is read by the scripts that source this file
# Settings shared by scheduler.sh and worker.sh, read from the environment (or from the
# file named by DGBOOST_ENV_FILE, e.g. /etc/dgboost/cluster.env for the systemd units).
# Safe defaults: the scheduler and dashboard listen on localhost only; TLS is on
# whenever DGBOOST_TLS_DIR holds the files make-certs.sh writes.

if [[ -n "${DGBOOST_ENV_FILE:-}" ]]; then
    # shellcheck source=/dev/null
    source "$DGBOOST_ENV_FILE"
fi

: "${DGBOOST_SCHEDULER_FILE:=$HOME/.dgboost/scheduler.json}"  # on a filesystem every host sees
: "${DGBOOST_SCHEDULER_HOST:=127.0.0.1}"    # the interface workers and clients reach; never 0.0.0.0 by default
: "${DGBOOST_SCHEDULER_PORT:=8786}"
: "${DGBOOST_DASHBOARD:=127.0.0.1:8787}"     # reach it through an SSH tunnel
: "${DGBOOST_TLS_DIR:=}"                     # ca.pem, node.pem, node.key from make-certs.sh
: "${DGBOOST_DASK:=dask}"                    # the `dask` command of the environment dgboost is installed in

tls_args=()  # read by the scripts that source this file
if [[ -n "$DGBOOST_TLS_DIR" ]]; then
    for file in ca.pem node.pem node.key; do
        if [[ ! -r "$DGBOOST_TLS_DIR/$file" ]]; then
            echo "DGBOOST_TLS_DIR=$DGBOOST_TLS_DIR lacks $file: run deploy/cluster/make-certs.sh $DGBOOST_TLS_DIR first" >&2
            exit 2
        fi
    done
    tls_args=(--tls-ca-file "$DGBOOST_TLS_DIR/ca.pem" --tls-cert "$DGBOOST_TLS_DIR/node.pem"
              --tls-key "$DGBOOST_TLS_DIR/node.key")
fi
