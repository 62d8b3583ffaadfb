// Command pause is the test cluster's sandbox ("pause") image: it holds a
// pod's namespaces open and does nothing until it is told to stop. It is
// built from source by hack/cluster/images.sh because no public registry is
// reachable from the test machines.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			return
		}
		// As PID 1 of a pod that shares its process namespace, reap orphans.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
