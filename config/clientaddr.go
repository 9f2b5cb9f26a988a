package config

import (
	"fmt"
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
