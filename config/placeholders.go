package config

import (
	"fmt"
	"reflect"
	"strings"
)

// Placeholder marks a value of the shipped example configuration
// (systemd/ackd.toml, installed as /etc/ackd/ackd.toml) that the operator
// must replace, such as the channel "C0REPLACEME". A route filtered on a
// placeholder channel matches nothing, so the config as installed does
// nothing until it is edited; serve logs, and config check lists, each
// placeholder still present.
const Placeholder = "REPLACEME"

// placeholderWarnings names every string value (or list entry) of c that
// still holds Placeholder, by its key: `line 97: route "eyes": channel =
// "C0REPLACEME" is a placeholder …`. It walks Config's toml tags, so a key
// added later is covered with no code here.
func (c *Config) placeholderWarnings() []string {
	var out []string
	var walk func(v reflect.Value, key string, where string)
	walk = func(v reflect.Value, key, where string) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem(), key, where)
			}
		case reflect.String:
			if s := v.String(); strings.Contains(s, Placeholder) {
				out = append(out, fmt.Sprintf("%s%s = %q is a placeholder: %s", where, key, s, placeholderHint(key)))
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i), key, where)
			}
		case reflect.Struct:
			t := v.Type()
			for i := range t.NumField() {
				f := t.Field(i)
				name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
				if name == "" || name == "-" || !f.IsExported() || name == "route" {
					continue
				}
				k := name
				if key != "" {
					k = key + "." + name
				}
				walk(v.Field(i), k, where)
			}
		}
	}
	walk(reflect.ValueOf(*c), "", "")
	for i := range c.Routes {
		walk(reflect.ValueOf(c.Routes[i]), "", c.routeWhere(i)+": ")
	}
	return out
}

// placeholderHint says what replaces a placeholder of key.
func placeholderHint(key string) string {
	switch key {
	case "channel":
		return "put your channel's ID there (the channel's details, at the bottom of About); until then the route matches nothing"
	case "filter.channels", "backfill.channels":
		return "put a channel's ID there (the channel's details, at the bottom of About)"
	}
	return "put your own value there"
}
