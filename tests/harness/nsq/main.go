// SPDX-License-Identifier: Apache-2.0

// Command nsq-harness runs a real nsqd and nsqlookupd (the upstream
// github.com/nsqio/nsq packages, imported as a module dependency) inside one
// process, bound to loopback only, for polybus integration tests.
//
// Once every server is listening, and nsqlookupd lists the nsqd with every
// topic and channel it loaded, it prints exactly one line to stdout, a JSON
// object with the bound addresses, e.g.
//
//	{"nsqd_tcp":"127.0.0.1:41234","nsqd_http":"127.0.0.1:41235","nsqd_https":"","lookupd_tcp":"127.0.0.1:41236","lookupd_http":"127.0.0.1:41237","data_dir":"/tmp/x"}
//
// (a key whose server is not running has the value ""), then runs until
// SIGTERM/SIGINT or until its stdin reaches EOF, and shuts down cleanly:
// nsqd.Exit() writes in-memory messages and topic/channel metadata to the
// data dir, so starting again with the same -data-dir keeps them.
// All logs go to stderr.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nsqio/nsq/nsqd"
	"github.com/nsqio/nsq/nsqlookupd"
)

// listFlag collects a flag that may be given several times.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// tlsRequiredFlag mirrors nsqd's own --tls-required: a bool flag that also
// accepts "tcp-https" (TLS required for TCP clients, plain HTTP still allowed).
type tlsRequiredFlag int

func (t *tlsRequiredFlag) String() string   { return strconv.Itoa(int(*t)) }
func (t *tlsRequiredFlag) IsBoolFlag() bool { return true }
func (t *tlsRequiredFlag) Set(s string) error {
	s = strings.ToLower(s)
	if s == "tcp-https" {
		*t = nsqd.TLSRequiredExceptHTTP
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true, false or tcp-https")
	}
	if b {
		*t = nsqd.TLSRequired
	} else {
		*t = nsqd.TLSNotRequired
	}
	return nil
}

type addrs struct {
	NSQDTCP     string `json:"nsqd_tcp"`
	NSQDHTTP    string `json:"nsqd_http"`
	NSQDHTTPS   string `json:"nsqd_https"`
	LookupdTCP  string `json:"lookupd_tcp"`
	LookupdHTTP string `json:"lookupd_http"`
	DataDir     string `json:"data_dir"`
}

// checkLoopback rejects any address whose host is not a loopback address:
// this harness must never listen on, or register with, anything else.
func checkLoopback(name, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-%s %q: %v", name, addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-%s %q: host must be a loopback address (127.0.0.0/8, ::1 or localhost)", name, addr)
	}
	return nil
}

func main() {
	os.Exit(run())
}

func run() int {
	var (
		nsqdTCP     = flag.String("nsqd-tcp", "127.0.0.1:0", "nsqd TCP listen address (port 0 = pick a free port)")
		nsqdHTTP    = flag.String("nsqd-http", "127.0.0.1:0", "nsqd HTTP listen address (port 0 = pick a free port)")
		nsqdHTTPS   = flag.String("nsqd-https", "127.0.0.1:0", "nsqd HTTPS listen address, used only with -tls-cert/-tls-key")
		lookupdTCP  = flag.String("lookupd-tcp", "127.0.0.1:0", "nsqlookupd TCP listen address (port 0 = pick a free port)")
		lookupdHTTP = flag.String("lookupd-http", "127.0.0.1:0", "nsqlookupd HTTP listen address (port 0 = pick a free port)")
		dataDir     = flag.String("data-dir", "", "nsqd data path; reuse it across restarts to keep messages (default: a fresh temp dir, removed on exit)")
		noLookupd   = flag.Bool("no-lookupd", false, "run nsqd alone, without an nsqlookupd")
		lookupdOnly = flag.Bool("lookupd-only", false, "run only nsqlookupd")
		broadcast   = flag.String("broadcast-address", "127.0.0.1", "address nsqd and nsqlookupd advertise")
		authHTTP    listFlag
		joinLookupd listFlag
		tlsCert     = flag.String("tls-cert", "", "nsqd TLS certificate file (PEM)")
		tlsKey      = flag.String("tls-key", "", "nsqd TLS private key file (PEM)")
		tlsRootCA   = flag.String("tls-root-ca", "", "CA file (PEM) nsqd uses to verify client certificates")
		tlsAuth     = flag.String("tls-client-auth-policy", "", "nsqd client cert policy: \"\", require or require-verify")
		tlsRequired tlsRequiredFlag
		msgTimeout  = flag.Duration("msg-timeout", 60*time.Second, "nsqd default message timeout")
		maxMsgTO    = flag.Duration("max-msg-timeout", 15*time.Minute, "nsqd maximum message timeout")
		maxRdyCount = flag.Int64("max-rdy-count", 2500, "nsqd maximum RDY count per client")
		memQueue    = flag.Int64("mem-queue-size", 10000, "nsqd messages kept in memory per topic and channel before they go to disk")
		scanRefresh = flag.Duration("queue-scan-refresh-interval", 5*time.Second, "how often nsqd adds new channels to its deferred and timeout scan (tests: short)")
		logLevel    = flag.String("log-level", "warn", "log level for both servers: debug, info, warn, error, fatal (logs go to stderr)")
		watchStdin  = flag.Bool("watch-stdin", true, "shut down when stdin reaches EOF (set false when stdin is /dev/null)")
	)
	flag.Var(&authHTTP, "auth-http-address", "nsqd auth server HTTP address host:port (may be repeated)")
	flag.Var(&joinLookupd, "join-lookupd", "also register nsqd with this existing nsqlookupd TCP address (may be repeated)")
	flag.Var(&tlsRequired, "tls-required", "require TLS for clients: true, false or tcp-https")
	flag.Parse()

	// Catch signals from the start, so a SIGTERM sent while the servers are
	// starting still ends in a clean shutdown (after the JSON line).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	fail := func(format string, a ...interface{}) int {
		fmt.Fprintf(os.Stderr, "nsq-harness: "+format+"\n", a...)
		return 2
	}
	if flag.NArg() != 0 {
		return fail("unexpected arguments: %v", flag.Args())
	}
	if *noLookupd && *lookupdOnly {
		return fail("-no-lookupd and -lookupd-only exclude each other")
	}
	runNSQD := !*lookupdOnly
	runLookupd := !*noLookupd
	tlsOn := *tlsCert != "" || *tlsKey != ""

	checks := [][2]string{}
	if runNSQD {
		checks = append(checks, [2]string{"nsqd-tcp", *nsqdTCP}, [2]string{"nsqd-http", *nsqdHTTP})
		if tlsOn {
			checks = append(checks, [2]string{"nsqd-https", *nsqdHTTPS})
		}
		for _, a := range joinLookupd {
			checks = append(checks, [2]string{"join-lookupd", a})
		}
		for _, a := range authHTTP {
			checks = append(checks, [2]string{"auth-http-address", a})
		}
	}
	if runLookupd {
		checks = append(checks, [2]string{"lookupd-tcp", *lookupdTCP}, [2]string{"lookupd-http", *lookupdHTTP})
	}
	for _, c := range checks {
		if err := checkLoopback(c[0], c[1]); err != nil {
			return fail("%v", err)
		}
	}

	var out addrs
	var lookupd *nsqlookupd.NSQLookupd
	var nsq *nsqd.NSQD
	serverDone := make(chan string, 2)

	if runLookupd {
		lopts := nsqlookupd.NewOptions()
		if err := lopts.LogLevel.Set(*logLevel); err != nil {
			return fail("-log-level: %v", err)
		}
		lopts.TCPAddress = *lookupdTCP
		lopts.HTTPAddress = *lookupdHTTP
		lopts.BroadcastAddress = *broadcast
		l, err := nsqlookupd.New(lopts)
		if err != nil {
			return fail("nsqlookupd: %v", err)
		}
		lookupd = l
		out.LookupdTCP = l.RealTCPAddr().String()
		out.LookupdHTTP = l.RealHTTPAddr().String()
	}

	exitLookupd := func() {
		if lookupd != nil {
			lookupd.Exit()
			lookupd = nil
		}
	}

	removeDir := ""
	if runNSQD {
		dir := *dataDir
		if dir == "" {
			d, err := os.MkdirTemp("", "nsq-harness-")
			if err != nil {
				exitLookupd()
				return fail("data dir: %v", err)
			}
			dir, removeDir = d, d
		} else if err := os.MkdirAll(dir, 0o755); err != nil {
			exitLookupd()
			return fail("data dir: %v", err)
		}
		out.DataDir = dir

		opts := nsqd.NewOptions()
		if err := opts.LogLevel.Set(*logLevel); err != nil {
			exitLookupd()
			return fail("-log-level: %v", err)
		}
		opts.TCPAddress = *nsqdTCP
		opts.HTTPAddress = *nsqdHTTP
		opts.HTTPSAddress = ""
		if tlsOn {
			opts.HTTPSAddress = *nsqdHTTPS
		}
		opts.BroadcastAddress = *broadcast
		opts.DataPath = dir
		opts.NSQLookupdTCPAddresses = nil
		if lookupd != nil {
			opts.NSQLookupdTCPAddresses = append(opts.NSQLookupdTCPAddresses, out.LookupdTCP)
		}
		opts.NSQLookupdTCPAddresses = append(opts.NSQLookupdTCPAddresses, joinLookupd...)
		opts.AuthHTTPAddresses = append([]string(nil), authHTTP...)
		opts.TLSCert = *tlsCert
		opts.TLSKey = *tlsKey
		opts.TLSRootCAFile = *tlsRootCA
		opts.TLSClientAuthPolicy = *tlsAuth
		opts.TLSRequired = int(tlsRequired)
		opts.MemQueueSize = *memQueue
		opts.MsgTimeout = *msgTimeout
		opts.MaxMsgTimeout = *maxMsgTO
		opts.MaxRdyCount = *maxRdyCount
		opts.QueueScanRefreshInterval = *scanRefresh

		n, err := nsqd.New(opts)
		if err == nil {
			// What the nsqd binary does before serving: reload the topics and
			// channels persisted by a previous run, then write the metadata.
			if err = n.LoadMetadata(); err != nil {
				err = fmt.Errorf("load metadata: %v", err)
			} else if err = n.PersistMetadata(); err != nil {
				err = fmt.Errorf("persist metadata: %v", err)
			}
			if err != nil {
				n.Exit()
			}
		}
		if err != nil {
			exitLookupd()
			if removeDir != "" {
				os.RemoveAll(removeDir)
			}
			return fail("nsqd: %v", err)
		}
		nsq = n
		out.NSQDTCP = n.RealTCPAddr().String()
		out.NSQDHTTP = n.RealHTTPAddr().String()
		if opts.HTTPSAddress != "" {
			// RealHTTPSAddr returns an empty TCPAddr (":0") when not listening.
			out.NSQDHTTPS = n.RealHTTPSAddr().String()
		}
	}

	// Serve. Main blocks until its listeners close (on Exit) or fail.
	if lookupd != nil {
		l := lookupd
		go func() {
			if err := l.Main(); err != nil {
				fmt.Fprintf(os.Stderr, "nsq-harness: nsqlookupd stopped: %v\n", err)
			}
			serverDone <- "nsqlookupd"
		}()
	}
	if nsq != nil {
		n := nsq
		go func() {
			if err := n.Main(); err != nil {
				fmt.Fprintf(os.Stderr, "nsq-harness: nsqd stopped: %v\n", err)
			}
			serverDone <- "nsqd"
		}()
	}

	// nsqd registers with its nsqlookupd from its own loop, after Main starts: a client that asks
	// nsqlookupd in between hears of no nsqd, and one whose backoff waits on a clock the test
	// holds still would never ask again. The line is printed once this nsqd and every topic and
	// channel it loaded are registered, as a deployment's nsqd is by the time clients use it.
	if lookupd != nil && nsq != nil {
		if err := awaitRegistration(lookupd, nsq, *broadcast, 10*time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "nsq-harness: %v\n", err)
			nsq.Exit()
			exitLookupd()
			if removeDir != "" {
				os.RemoveAll(removeDir)
			}
			return 1
		}
	}

	line, _ := json.Marshal(out)
	if _, err := os.Stdout.Write(append(line, '\n')); err != nil {
		fmt.Fprintf(os.Stderr, "nsq-harness: write stdout: %v\n", err)
	}
	os.Stdout.Sync() // os.Stdout is unbuffered; Sync is a no-op on pipes

	stdinEOF := make(chan struct{})
	if *watchStdin {
		go func() {
			io.Copy(io.Discard, os.Stdin)
			close(stdinEOF)
		}()
	}

	code := 0
	select {
	case s := <-sigs:
		fmt.Fprintf(os.Stderr, "nsq-harness: %v, shutting down\n", s)
	case <-stdinEOF:
		fmt.Fprintf(os.Stderr, "nsq-harness: stdin closed, shutting down\n")
	case who := <-serverDone:
		fmt.Fprintf(os.Stderr, "nsq-harness: %s exited unexpectedly, shutting down\n", who)
		code = 1
	}
	signal.Reset(syscall.SIGTERM, syscall.SIGINT)

	// A second signal while shutting down is handled by the default action
	// (immediate exit); a stuck shutdown is abandoned after 30 s.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if nsq != nil {
			nsq.Exit() // persists in-memory messages + metadata to the data dir
		}
		exitLookupd()
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "nsq-harness: shutdown timed out")
		return 1
	}
	if removeDir != "" {
		if err := os.RemoveAll(removeDir); err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(os.Stderr, "nsq-harness: remove %s: %v\n", removeDir, err)
		}
	}
	return code
}

// awaitRegistration waits until lookupd lists n as a producer (nsqd's IDENTIFY) and under every
// topic and channel n holds (its REGISTER commands), or fails after bound.
func awaitRegistration(l *nsqlookupd.NSQLookupd, n *nsqd.NSQD, broadcast string, bound time.Duration) error {
	_, tcp, _ := net.SplitHostPort(n.RealTCPAddr().String())
	_, http, _ := net.SplitHostPort(n.RealHTTPAddr().String())
	// nsqlookupd names a producer by its broadcast address and both ports (Producer.String).
	self := fmt.Sprintf("%s [%s, %s]", broadcast, tcp, http)
	listed := func(category, key, subkey string) bool {
		for _, p := range l.DB.FindProducers(category, key, subkey) {
			if p.String() == self {
				return true
			}
		}
		return false
	}
	registered := func() bool {
		if !listed("client", "", "") {
			return false
		}
		for _, t := range n.GetStats("", "", false).Topics {
			if !listed("topic", t.TopicName, "") {
				return false
			}
			for _, c := range t.Channels {
				if !listed("channel", t.TopicName, c.ChannelName) {
					return false
				}
			}
		}
		return true
	}
	deadline := time.Now().Add(bound)
	for !registered() {
		if time.Now().After(deadline) {
			return fmt.Errorf("nsqd %s did not register with nsqlookupd within %v", self, bound)
		}
		time.Sleep(2 * time.Millisecond) // polls the registry: nsqlookupd offers no notification
	}
	return nil
}
