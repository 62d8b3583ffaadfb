// Command vmrelay joins its standard input and output to a TCP port on the
// host's loopback. QEMU's user network runs one per guest connection to a
// guestfwd address (-cmd: form), so that a test VM reaches the host's API
// server and registry, and nothing else: the address is always 127.0.0.1.
//
// Usage: vmrelay PORT
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: vmrelay PORT")
		os.Exit(2)
	}
	port, err := strconv.Atoi(os.Args[1])
	if err != nil || port < 1 || port > 65535 {
		fmt.Fprintf(os.Stderr, "vmrelay: bad port %q\n", os.Args[1])
		os.Exit(2)
	}
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmrelay: %v\n", err)
		os.Exit(1)
	}
	tcp := c.(*net.TCPConn)
	done := make(chan struct{})
	go func() {
		// The guest closed its side: tell the server, keep reading its answer.
		_, _ = io.Copy(tcp, os.Stdin)
		_ = tcp.CloseWrite()
		close(done)
	}()
	_, _ = io.Copy(os.Stdout, tcp)
	// The server closed: the guest's connection ends with this process.
	_ = os.Stdout.Close()
	select {
	case <-done:
	default:
	}
}
