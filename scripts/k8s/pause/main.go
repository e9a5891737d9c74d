// pause: the sandbox container of every pod on the test cluster (scripts/test-k8s.sh). It
// holds the pod's namespaces, reaps the children that end up with it, and exits on SIGINT
// or SIGTERM. A static binary in a one-layer image, so that no registry is needed.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s == syscall.SIGCHLD {
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}
