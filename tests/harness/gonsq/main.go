// SPDX-License-Identifier: Apache-2.0

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
// One more mode, not shared with the other peers, compares go-nsq with `polybus bench`:
//
//	bench ADDR TOPIC COUNT SIZE MAX_IN_FLIGHT [PUBLISHERS]
//	    subscribe one Consumer to TOPIC/"bench" (MaxInFlight=MAX_IN_FLIGHT, one handler, FIN on
//	    return), then publish COUNT messages of SIZE bytes from PUBLISHERS Producers (default 1),
//	    each with PublishAsync and at most 1000 unacknowledged, as polybus bench's window does.
//	    Payloads are "<seq> <send time ns> <filler>" like polybus bench's, so the consumer records
//	    publish-to-receive latency. Once all COUNT arrived, print one JSON line to stdout:
//	    {"client":"go-nsq","messages":..,"size":..,"seconds":..,"msgs_per_sec":..,
//	    "publish_seconds":..,"p50_us":..,"p99_us":..,"cpu_seconds":..,"cpu_us_per_msg":..}
//	    timed from the first publish, cpu being this process's user+sys time over that span.
//
// Exit codes: 0 done, 1 timeout or failure, 2 bad arguments. Logs go to stderr.
package main

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	nsq "github.com/nsqio/go-nsq"
)

func usage() {
	fmt.Fprintln(os.Stderr, "usage: gonsq-peer pub ADDR TOPIC COUNT PREFIX\n"+
		"       gonsq-peer sub ADDR TOPIC CHANNEL COUNT TIMEOUT_S\n"+
		"       gonsq-peer sub-lookupd LOOKUPD_HTTP TOPIC CHANNEL COUNT TIMEOUT_S\n"+
		"       gonsq-peer bench ADDR TOPIC COUNT SIZE MAX_IN_FLIGHT [PUBLISHERS]")
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

// The bench clock: monotonic nanoseconds since the process started.
var epoch = time.Now()

func nowNs() int64 { return int64(time.Since(epoch)) }

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fail("getrusage: %v", err)
	}
	return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime)).Seconds()
}

// "<seq> <send time ns> <filler>", padded to size bytes (longer only when size is below the header).
func benchPayload(seq int, size int) []byte {
	b := make([]byte, 0, size+32)
	b = strconv.AppendInt(b, int64(seq), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, nowNs(), 10)
	b = append(b, ' ')
	for len(b) < size {
		b = append(b, byte('a'+len(b)%26))
	}
	return b
}

func sentAt(body []byte) int64 {
	first := bytes.IndexByte(body, ' ')
	if first < 0 {
		return 0
	}
	rest := body[first+1:]
	second := bytes.IndexByte(rest, ' ')
	if second < 0 {
		return 0
	}
	n, _ := strconv.ParseInt(string(rest[:second]), 10, 64)
	return n
}

const benchWindow = 1000 // unacknowledged publishes per producer, as polybus bench's default --window

func bench(addr, topic string, count, size, maxInFlight, publishers int) {
	const timeout = 600 * time.Second
	config := nsq.NewConfig()
	config.MaxInFlight = maxInFlight
	consumer, err := nsq.NewConsumer(topic, "bench", config)
	if err != nil {
		fail("%v", err)
	}
	consumer.SetLogger(logger, nsq.LogLevelWarning)

	micros := make([]uint32, count)
	var received int64
	done := make(chan struct{})
	consumer.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		lat := (nowNs() - sentAt(m.Body)) / 1000
		if lat < 0 {
			lat = 0
		}
		i := atomic.AddInt64(&received, 1)
		if i <= int64(count) {
			micros[i-1] = uint32(lat)
		}
		if i == int64(count) {
			close(done)
		}
		return nil // go-nsq sends FIN when the handler returns nil
	}))
	// IDENTIFY is done and SUB written (creating the topic and channel) when this returns.
	if err := consumer.ConnectToNSQD(addr); err != nil {
		fail("%v", err)
	}
	producers := make([]*nsq.Producer, publishers)
	for p := range producers {
		if producers[p], err = nsq.NewProducer(addr, nsq.NewConfig()); err != nil {
			fail("%v", err)
		}
		producers[p].SetLogger(logger, nsq.LogLevelWarning)
		if err := producers[p].Ping(); err != nil { // connect before the clock starts
			fail("%v", err)
		}
	}

	cpuStart := cpuSeconds()
	start := time.Now()
	var failures int64
	var wg sync.WaitGroup
	for p, producer := range producers {
		wg.Add(1)
		go func(p int, producer *nsq.Producer) {
			defer wg.Done()
			begin, end := count*p/publishers, count*(p+1)/publishers
			window := make(chan struct{}, benchWindow)
			acks := make(chan *nsq.ProducerTransaction, benchWindow)
			acked := make(chan struct{})
			go func() {
				for n := begin; n < end; n++ {
					if t := <-acks; t.Error != nil {
						if atomic.AddInt64(&failures, 1) == 1 {
							fmt.Fprintf(os.Stderr, "gonsq-peer: publish: %v\n", t.Error)
						}
					}
					<-window
				}
				close(acked)
			}()
			for i := begin; i < end; i++ {
				window <- struct{}{}
				if err := producer.PublishAsync(topic, benchPayload(i, size), acks); err != nil {
					fail("publish %d: %v", i, err)
				}
			}
			<-acked
		}(p, producer)
	}
	wg.Wait()
	publishSeconds := time.Since(start).Seconds()
	if failures > 0 {
		fail("%d publishes failed", failures)
	}
	select {
	case <-done:
	case <-time.After(timeout - time.Since(start)):
		fail("timeout: %d of %d messages after %v", atomic.LoadInt64(&received), count, timeout)
	}
	seconds := time.Since(start).Seconds()
	cpu := cpuSeconds() - cpuStart

	sort.Slice(micros, func(a, b int) bool { return micros[a] < micros[b] })
	percentile := func(p float64) uint32 {
		k := int(p * float64(count))
		if k > count-1 {
			k = count - 1
		}
		return micros[k]
	}
	fmt.Printf("{\"client\":\"go-nsq\",\"messages\":%d,\"size\":%d,\"publishers\":%d,"+
		"\"max_in_flight\":%d,\"seconds\":%.6f,\"msgs_per_sec\":%.1f,\"publish_seconds\":%.6f,"+
		"\"publish_msgs_per_sec\":%.1f,\"p50_us\":%d,\"p99_us\":%d,\"p999_us\":%d,"+
		"\"cpu_seconds\":%.6f,\"cpu_us_per_msg\":%.3f}\n",
		count, size, publishers, maxInFlight, seconds, float64(count)/seconds, publishSeconds,
		float64(count)/publishSeconds, percentile(0.50), percentile(0.99), percentile(0.999),
		cpu, cpu*1e6/float64(count))

	for _, producer := range producers {
		producer.Stop()
	}
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
	case args[0] == "bench" && (len(args) == 6 || len(args) == 7):
		publishers := 1
		if len(args) == 7 {
			publishers = positive(args[6])
		}
		bench(args[1], args[2], positive(args[3]), positive(args[4]), positive(args[5]), publishers)
	default:
		usage()
	}
}
