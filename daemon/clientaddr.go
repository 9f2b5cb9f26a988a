package daemon

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// DefaultTrustedProxies are the proxies whose X-Forwarded-For ackd believes
// when none are configured: a front door on the same machine (Caddy on
// loopback, as systemd/Caddyfile runs it).
var DefaultTrustedProxies = []string{"127.0.0.0/8", "::1/128"}

// parseTrustedProxies reads trusted_proxies: CIDR prefixes, or single
// addresses (taken as /32 or /128).
func parseTrustedProxies(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a CIDR prefix (\"10.0.0.0/8\") nor an address", s)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

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
