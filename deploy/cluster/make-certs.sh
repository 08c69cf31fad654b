#!/usr/bin/env bash
# Make a private certificate authority and the certificates a dgboost cluster's TLS needs:
#   deploy/cluster/make-certs.sh OUT_DIR [HOST_OR_IP ...]
# OUT_DIR gets ca.pem (give it to every host and client), node.pem/node.key (scheduler and
# workers) and client.pem/client.key (`dgboost train` and other clients). localhost and
# 127.0.0.1 are always in the node certificate; add the names or addresses the hosts use.
# Keys are readable by their owner only; the CA key stays in OUT_DIR/private: keep it off
# the cluster. Nothing is sent anywhere.
set -euo pipefail

if [[ $# -lt 1 ]]; then
    echo "usage: $0 OUT_DIR [HOST_OR_IP ...]" >&2
    exit 2
fi
out=$1
shift
days=${DGBOOST_CERT_DAYS:-365}
umask 077
mkdir -p "$out/private"

san="DNS:localhost,IP:127.0.0.1"
for name in "$@"; do
    if [[ "$name" =~ ^[0-9.]+$ || "$name" == *:* ]]; then
        san="$san,IP:$name"
    else
        san="$san,DNS:$name"
    fi
done

openssl req -x509 -newkey rsa:3072 -nodes -days "$days" -subj "/CN=dgboost cluster CA" \
    -keyout "$out/private/ca.key" -out "$out/ca.pem" 2>/dev/null

sign() {  # sign NAME COMMON_NAME EXTENSIONS
    local name=$1 common_name=$2 extensions=$3
    openssl req -newkey rsa:3072 -nodes -subj "/CN=$common_name" \
        -keyout "$out/$name.key" -out "$out/private/$name.csr" 2>/dev/null
    openssl x509 -req -in "$out/private/$name.csr" -CA "$out/ca.pem" -CAkey "$out/private/ca.key" \
        -CAserial "$out/private/ca.srl" -CAcreateserial -days "$days" -out "$out/$name.pem" -extfile <(printf '%s\n' "$extensions") 2>/dev/null
    rm -f "$out/private/$name.csr"
}
sign node "dgboost node" "subjectAltName=$san
extendedKeyUsage=serverAuth,clientAuth"
sign client "dgboost client" "extendedKeyUsage=clientAuth"
chmod 644 "$out/ca.pem" "$out/node.pem" "$out/client.pem"
echo "wrote $out/ca.pem, $out/node.pem, $out/node.key, $out/client.pem, $out/client.key"
