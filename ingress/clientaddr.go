package ingress

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

func trusted(proxies []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr is the address a request came from, for the log: the peer's
// own, unless the peer is a trusted proxy; then the rightmost address in
// X-Forwarded-For that is not itself a trusted proxy (entries further left
// were written by whoever sent the request and prove nothing). A header
// from any other peer is ignored, so a client cannot choose what is logged
// for it by sending one.
func clientAddr(proxies []netip.Prefix, r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !trusted(proxies, peer) {
		return host
	}
	client := peer.Unmap()
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		entries := strings.Split(hops[i], ",")
		for j := len(entries) - 1; j >= 0; j-- {
			a, err := netip.ParseAddr(strings.TrimSpace(entries[j]))
			if err != nil {
				// Not an address: what lies beyond it cannot be trusted.
				return client.String()
			}
			client = a.Unmap()
			if !trusted(proxies, client) {
				return client.String()
			}
		}
	}
	return client.String()
}
