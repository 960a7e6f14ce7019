// Command throttle is a TCP proxy that limits every connection's server-to-client bytes per second, the
// way S3 serves one GET stream at a fraction of a host's bandwidth. The benchmark (run.py --s3-stream-limit)
// puts it in front of the local S3 server so that a restore is measured against a per-connection limit, as
// it would be against S3, instead of against a server on the same two cores that has none.
//
//	throttle -listen 127.0.0.1:0 -target 127.0.0.1:9000 -rate 80000000
//
// It prints "listening on <addr>" once it accepts connections. Client-to-server bytes (requests, uploads)
// pass unlimited. Each connection has its own limit: n connections together move up to n times the rate.
// On SIGUSR1 it prints "served <n>": the server-to-client bytes of all connections so far (what clients
// downloaded; recovery_bench.py reads it before and after an executor's loss).
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

// served counts server-to-client bytes over all connections (printed on SIGUSR1).
var served atomic.Int64

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on (bind to 127.0.0.1 only)")
	target := flag.String("target", "", "address of the server, host:port")
	rate := flag.Int64("rate", 0, "server-to-client bytes per second per connection (0: unlimited)")
	flag.Parse()
	if *target == "" {
		fmt.Fprintln(os.Stderr, "throttle: -target host:port is required")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("throttle: listen on %s: %v", *listen, err)
	}
	asked := make(chan os.Signal, 1)
	signal.Notify(asked, syscall.SIGUSR1) // before "listening on": a client may ask at once
	fmt.Printf("listening on %s\n", ln.Addr())
	go func() {
		for range asked {
			fmt.Printf("served %d\n", served.Load())
		}
	}()
	for {
		client, err := ln.Accept()
		if err != nil {
			log.Fatalf("throttle: accept: %v", err)
		}
		go proxy(client, *target, *rate)
	}
}

func proxy(client net.Conn, target string, rate int64) {
	defer client.Close()
	server, err := net.Dial("tcp", target)
	if err != nil {
		log.Printf("throttle: dial %s: %v", target, err)
		return
	}
	defer server.Close()
	go func() {
		io.Copy(server, client)
		if tcp, ok := server.(*net.TCPConn); ok {
			tcp.CloseWrite()
		}
	}()
	copyLimited(client, server, rate)
}

// copyLimited copies src to dst at no more than rate bytes per second. A connection idle for a while earns
// no credit beyond burst: a pooled keep-alive connection is held to the rate like a new one. Reading waits
// while the connection is ahead of its budget, so TCP flow control slows the server too.
func copyLimited(dst io.Writer, src io.Reader, rate int64) {
	const burst = 20 * time.Millisecond
	buf := make([]byte, 64<<10)
	var paidUntil time.Time // the moment the bytes sent so far are paid for
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if rate > 0 {
				now := time.Now()
				if earliest := now.Add(-burst); paidUntil.Before(earliest) {
					paidUntil = earliest
				}
				paidUntil = paidUntil.Add(time.Duration(float64(n) / float64(rate) * float64(time.Second)))
				if wait := paidUntil.Sub(now); wait > 0 {
					time.Sleep(wait)
				}
			}
			written, werr := dst.Write(buf[:n])
			served.Add(int64(written))
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
