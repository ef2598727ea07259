// Command kvs is a durable key-value server that speaks the Redis protocol.
//
//	kvs serve [flags]      run a node (memory mode without --data-dir)
//	kvs join CLUSTER NODE  add the node at client address NODE to a cluster
//	kvs remove CLUSTER ID  remove node ID from a cluster
//	kvs status ADDR        a node's view of its cluster, with each member's lag
//	kvs slots move|status|cancel ADDR ...  move slots between a cluster's groups
//	kvs rebalance ADDR     move slots until the groups hold about the same data
//	kvs groups add|remove|list ADDR ...    add, empty and delete, list a cluster's data groups
//	kvs backup ADDR FILE   a consistent, checksummed backup of a live node
//	kvs restore FILE --data-dir DIR [--node-id ID --raft-addr ADDR]
//	                       seed an empty data dir from a backup
//	kvs recover --data-dir DIR --node-id ID   lost-quorum recovery of a stopped node
//	kvs bench [flags]      a memtier_benchmark-shaped load against a server
//	kvs version            print the version and the level of entries it applies
//
// Flags map onto the Config structs of the packages they configure and
// nothing else; semantics live in those packages.
package main

import (
	"fmt"
	"io"
	"os"

	"kvs/bench"
	"kvs/fsm"
)

// version is reported by `kvs version`, INFO server and HELLO.
const version = "0.1.0"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "join":
		return joinCmd(args[1:], stdout, stderr)
	case "remove":
		return removeCmd(args[1:], stdout, stderr)
	case "status":
		return statusCmd(args[1:], stdout, stderr)
	case "slots":
		return slotsCmd(args[1:], stdout, stderr)
	case "rebalance":
		return rebalanceCmd(args[1:], stdout, stderr)
	case "groups":
		return groupsCmd(args[1:], stdout, stderr)
	case "bench":
		return bench.Main(args[1:], stdout, stderr)
	case "backup":
		return backupCmd(args[1:], stdout, stderr)
	case "restore":
		return restoreCmd(args[1:], stdout, stderr)
	case "recover":
		return recoverCmd(args[1:], stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintf(stdout, "kvs %s (apply level %d)\n", version, fsm.ApplyLevel)
		return 0
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "kvs: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage:
  kvs serve [--addr HOST:PORT] [--data-dir DIR] [--fsync always|everysec|no] [--repair]
  kvs serve --data-dir DIR --node-id ID --raft-addr HOST:PORT [--bootstrap | --join ADDR]
            [--reads stale|linearizable]
  kvs join CLUSTER_ADDR NODE_ADDR
  kvs remove CLUSTER_ADDR NODE_ID
  kvs status ADDR
  kvs slots move [--wait] ADDR FIRST-LAST GROUP
  kvs slots status ADDR
  kvs slots cancel ADDR ID
  kvs rebalance [--weights G=W,...] [--threshold PCT] [--dry-run] [--wait] ADDR
  kvs groups add ADDR [N]
  kvs groups remove ADDR GROUP
  kvs groups list ADDR
  kvs backup [--timeout D] ADDR FILE
  kvs restore FILE --data-dir DIR [--node-id ID --raft-addr HOST:PORT]
  kvs recover --data-dir DIR --node-id ID [--raft-addr HOST:PORT]
  kvs bench [--server HOST] [--port N] [--threads N] [--clients N] [--ratio SET:GET]
            [--test-time SECS | --requests N] [--pipeline N] [--prefill] [--json-out-file PATH]
  kvs version

Run "kvs serve -h" for the flags of serve, "kvs bench -h" for those of bench.
`)
}
