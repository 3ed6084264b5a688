package e2e

import (
	"io"
	"net"
	"sync"
	"testing"
)

// cutProxy forwards TCP connections on a loopback port to a server and can
// cut every connection open through it at once: a network drop, as a
// client sees it, with no change to the server.
type cutProxy struct {
	url string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{url: "http://" + ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() {
		ln.Close()
		p.cut()
	})
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			p.track(client, server)
			go p.pipe(client, server)
			go p.pipe(server, client)
		}
	}()
	return p
}

func (p *cutProxy) track(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
}

func (p *cutProxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// cut closes every connection open through the proxy; new ones go on.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}
