#!/bin/sh
# Makes the NATS route certificates: a private CA of the cluster's own and one certificate for every node, valid for
# each host name given (a node presents it to its peers and verifies theirs against the CA; cluster.conf reads them).
#   deploy/nats/route-certs.sh DIR [HOST...]
# With no host, the compose node names nats-1..3. For Kubernetes give the StatefulSet's names, e.g.
#   deploy/nats/route-certs.sh route-tls nats-0.nats nats-1.nats nats-2.nats
# then `kubectl -n kernelbot create secret generic kernelbot-nats-route-tls --from-file=route-tls/ca.crt \
#   --from-file=route-tls/tls.crt --from-file=route-tls/tls.key`
# (or issue the same three files, ca.crt, tls.crt and tls.key, with cert-manager). Keep ca.key off the servers: it
# can mint a node. A host that is an IPv4 address gets an IP entry.
set -eu
dir=${1:?usage: route-certs.sh DIR [HOST...]}
shift
[ "$#" -gt 0 ] || set -- nats-1 nats-2 nats-3
names=""
for host in "$@"; do
    case $host in
        *[!0-9.]*) names="$names${names:+,}DNS:$host" ;;
        *) names="$names${names:+,}IP:$host" ;;
    esac
done
mkdir -p "$dir"
umask 077
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 825 -subj "/CN=kernelbot NATS route CA" \
    -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=kernelbot NATS route" \
    -keyout "$dir/tls.key" -out "$dir/tls.csr" 2>/dev/null
# a route is a client of the peer it dials and a server to the peer that dials it: both key usages
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=digitalSignature\n' "$names" \
    > "$dir/tls.ext"
openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 825 \
    -extfile "$dir/tls.ext" -out "$dir/tls.crt" 2>/dev/null
rm -f "$dir/tls.csr" "$dir/tls.ext" "$dir/ca.srl"
# the nats image runs as root; a file readable by its owner only is enough
chmod 600 "$dir/tls.key" "$dir/ca.key"
chmod 644 "$dir/tls.crt" "$dir/ca.crt"
echo "route certificates for $names in $dir"
