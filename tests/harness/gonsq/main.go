// Command gonsq-peer is a third-party NSQ peer for polybus's interoperability tests: it uses
// github.com/nsqio/go-nsq (a module dependency, pinned in go.mod) to publish to, or consume
// from, a real nsqd. Every peer in tests/harness has the same command line:
//
//	pub ADDR TOPIC COUNT PREFIX
//	    publish COUNT messages "PREFIX-0".."PREFIX-(COUNT-1)" to nsqd at ADDR (host:port, TCP),
//	    one PUB each, waiting for each OK; exit 0 once all are acknowledged.
//	sub ADDR TOPIC CHANNEL COUNT TIMEOUT_S
//	    consume TOPIC/CHANNEL from nsqd at ADDR until COUNT distinct bodies arrived; print each
//	    distinct body once on its own line to stdout (a redelivered body is FINed again, not
//	    printed again), FIN every message, exit 0; exit 1 when TIMEOUT_S seconds pass first.
//	    Prints the line "ready" to stderr once subscribed.
//	sub-lookupd LOOKUPD_HTTP TOPIC CHANNEL COUNT TIMEOUT_S
//	    the same, discovering nsqd through nsqlookupd's HTTP address (host:port); "ready" once
//	    connected to at least one nsqd (so the topic must already exist).
//
// Exit codes: 0 done, 1 timeout or failure, 2 bad arguments. Logs go to stderr.
package main

import (
	"fmt"
	"log"
	"os"
	"strconv"
	"sync"
	"time"

	nsq "github.com/nsqio/go-nsq"
)

func usage() {
	fmt.Fprintln(os.Stderr, "usage: gonsq-peer pub ADDR TOPIC COUNT PREFIX\n"+
		"       gonsq-peer sub ADDR TOPIC CHANNEL COUNT TIMEOUT_S\n"+
		"       gonsq-peer sub-lookupd LOOKUPD_HTTP TOPIC CHANNEL COUNT TIMEOUT_S")
	os.Exit(2)
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "gonsq-peer: "+format+"\n", args...)
	os.Exit(1)
}

func positive(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		usage()
	}
	return n
}

var logger = log.New(os.Stderr, "go-nsq ", log.LstdFlags)

func pub(addr, topic string, count int, prefix string) {
	producer, err := nsq.NewProducer(addr, nsq.NewConfig())
	if err != nil {
		fail("%v", err)
	}
	producer.SetLogger(logger, nsq.LogLevelWarning)
	defer producer.Stop()
	for i := 0; i < count; i++ {
		// Publish waits for nsqd's response: nil means OK.
		if err := producer.Publish(topic, []byte(fmt.Sprintf("%s-%d", prefix, i))); err != nil {
			fail("publish %d: %v", i, err)
		}
	}
}

func sub(viaLookupd bool, addr, topic, channel string, count int, timeout time.Duration) {
	deadline := time.After(timeout)
	config := nsq.NewConfig()
	config.MaxInFlight = 50
	config.LookupdPollInterval = 100 * time.Millisecond
	consumer, err := nsq.NewConsumer(topic, channel, config)
	if err != nil {
		fail("%v", err)
	}
	consumer.SetLogger(logger, nsq.LogLevelWarning)

	var mu sync.Mutex
	seen := make(map[string]bool)
	done := make(chan struct{})
	consumer.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		body := string(m.Body)
		mu.Lock()
		defer mu.Unlock()
		if seen[body] {
			fmt.Fprintf(os.Stderr, "redelivered: %s (attempt %d)\n", body, m.Attempts)
		} else if len(seen) < count {
			seen[body] = true
			fmt.Fprintln(os.Stdout, body)
			if len(seen) == count {
				close(done)
			}
		}
		return nil // go-nsq sends FIN when the handler returns nil
	}))

	if viaLookupd {
		// The first lookupd query and its connections happen inside this call; a topic not
		// yet known is polled for every LookupdPollInterval.
		if err := consumer.ConnectToNSQLookupd(addr); err != nil {
			fail("%v", err)
		}
		tick := time.NewTicker(10 * time.Millisecond)
		for consumer.Stats().Connections == 0 {
			select {
			case <-tick.C:
			case <-deadline:
				fail("timeout: no nsqd discovered through %s", addr)
			}
		}
		tick.Stop()
	} else if err := consumer.ConnectToNSQD(addr); err != nil {
		// IDENTIFY is done and SUB written when this returns.
		fail("%v", err)
	}
	fmt.Fprintln(os.Stderr, "ready")

	select {
	case <-done:
	case <-deadline:
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		fail("timeout: %d of %d messages after %v", n, count, timeout)
	}
	// Stop sends CLS and waits for in-flight handlers, so the last FIN is written first.
	consumer.Stop()
	select {
	case <-consumer.StopChan:
	case <-time.After(10 * time.Second):
		fail("consumer did not stop")
	}
}

func main() {
	args := os.Args[1:]
	if len(args) == 0 {
		usage()
	}
	switch {
	case args[0] == "pub" && len(args) == 5:
		pub(args[1], args[2], positive(args[3]), args[4])
	case (args[0] == "sub" || args[0] == "sub-lookupd") && len(args) == 6:
		timeout := time.Duration(positive(args[5])) * time.Second
		sub(args[0] == "sub-lookupd", args[1], args[2], args[3], positive(args[4]), timeout)
	default:
		usage()
	}
}
