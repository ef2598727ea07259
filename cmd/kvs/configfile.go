package main

import (
	"flag"
	"fmt"
	"net"
	"path/filepath"
	"strings"

	"kvs/config"
)

// kvsOwnedDirectives are Redis parameters a redis.conf may hold that kvs
// decides by its own flags: a config file's value for them is not used,
// and kvs says so at start.
var kvsOwnedDirectives = map[string]string{
	"dir":             "kvs keeps its data in --data-dir",
	"appendonly":      "kvs is durable with --data-dir",
	"cluster-enabled": "kvs is a cluster with --node-id and --raft-addr",
}

// readConfigFile applies --config FILE to f: a directive named like one of
// kvs serve's flags sets it, unless the command line did (flags override
// the file); port and bind make --addr, appendfsync --fsync; every other
// directive is a Redis parameter, applied once the server exists. It
// returns what the file said that kvs does not use, to be logged.
func (f *serveFlags) readConfigFile(fs *flag.FlagSet) (ignored []string, err error) {
	path, err := filepath.Abs(f.config)
	if err != nil {
		return nil, err
	}
	f.config = path
	ds, err := config.ReadFile(path)
	if err != nil {
		return nil, err
	}
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	var port, bind string
	for _, d := range ds {
		value := strings.Join(d.Args, " ")
		if d.Name == "slaveof" {
			d.Name = "replicaof"
		}
		if fl := fs.Lookup(d.Name); fl != nil && d.Name != "config" && d.Name != "port" {
			if given[d.Name] {
				continue
			}
			if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				switch strings.ToLower(value) {
				case "yes":
					value = "true"
				case "no":
					value = "false"
				}
			}
			if err := fs.Set(d.Name, value); err != nil {
				return nil, fmt.Errorf("%s: %w", d, err)
			}
			continue
		}
		switch d.Name {
		case "port":
			port = value
			continue
		case "bind":
			if len(d.Args) > 0 {
				bind = d.Args[0] // kvs listens on one address
			}
			continue
		case "appendfsync":
			if !given["fsync"] {
				if err := fs.Set("fsync", value); err != nil {
					return nil, fmt.Errorf("%s: %w", d, err)
				}
			}
			continue
		}
		if why, ok := kvsOwnedDirectives[d.Name]; ok {
			ignored = append(ignored, fmt.Sprintf("%s: not used: %s", d, why))
			continue
		}
		if !config.IsParam(d.Name) {
			return nil, fmt.Errorf("%s: unknown directive", d)
		}
		f.directives = append(f.directives, d)
	}
	if port == "0" && !given["addr"] && !given["port"] {
		// Redis's port 0: no TCP listener.
		f.addr = ""
		return ignored, nil
	}
	if (port != "" || bind != "") && !given["addr"] && !given["port"] {
		host, p, err := net.SplitHostPort(f.addr)
		if err != nil {
			return nil, fmt.Errorf("--addr: %w", err)
		}
		if port != "" {
			p = port
		}
		if bind != "" {
			host = strings.TrimPrefix(bind, "-")
			if host == "*" {
				host = "0.0.0.0"
			}
		}
		f.addr = net.JoinHostPort(host, p)
	}
	return ignored, nil
}
