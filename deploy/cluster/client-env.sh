# shellcheck shell=bash
# Source this before `dgboost train --scheduler-file ...` (or any Dask client) to talk TLS
# to a cluster whose certificates came from make-certs.sh:
#   DGBOOST_TLS_DIR=~/dgboost-tls source deploy/cluster/client-env.sh
# distributed's Security() reads these settings from the dask configuration.
: "${DGBOOST_TLS_DIR:?set DGBOOST_TLS_DIR to the directory make-certs.sh wrote}"
export DASK_DISTRIBUTED__COMM__TLS__CA_FILE="$DGBOOST_TLS_DIR/ca.pem"
export DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT="$DGBOOST_TLS_DIR/client.pem"
export DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY="$DGBOOST_TLS_DIR/client.key"
export DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True
