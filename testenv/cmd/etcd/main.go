// Command etcd is etcd's own server main (go.etcd.io/etcd/server/v3/etcdmain), built
// from the module this test bed pins rather than downloaded.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
