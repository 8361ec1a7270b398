// etcd for modelfleet-local: the server's own entry point, built from the pinned module so the
// local control plane stores its objects in the real etcd that kube-apiserver is tested with.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
