// Command etcd is etcd's own server entry point, wrapped in a module of its
// own because etcd's server module cannot be installed with go install.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
