#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
// nsqjs peer for polybus's NSQ interoperability tests: uses the nsqjs package (pinned in
// package.json / package-lock.json, installed with `npm ci`) to publish to, or consume from, a
// real nsqd. Every peer in tests/harness has the same command line:
//
//   pub ADDR TOPIC COUNT PREFIX
//       publish COUNT messages "PREFIX-0".."PREFIX-(COUNT-1)" (one PUB each, pipelined) to nsqd
//       at ADDR (host:port, TCP); exit 0 once nsqd acknowledged all of them.
//   sub ADDR TOPIC CHANNEL COUNT TIMEOUT_S
//       consume TOPIC/CHANNEL from nsqd at ADDR until COUNT distinct bodies arrived; print each
//       distinct body once on its own line to stdout, FIN every message, exit 0; exit 1 when
//       TIMEOUT_S seconds pass first. Prints the line "ready" to stderr once nsqd answered SUB.
//   sub-lookupd LOOKUPD_HTTP TOPIC CHANNEL COUNT TIMEOUT_S
//       the same, discovering nsqd through nsqlookupd's HTTP address (host:port); "ready" once
//       a discovered nsqd answered SUB (so the topic must already exist).
//
// Exit codes: 0 done, 1 timeout or failure, 2 bad arguments. Logs go to stderr.
'use strict'

const nsq = require('nsqjs')

const PUB_TIMEOUT_S = 30

function usage() {
  console.error(
    'usage: peer.js pub ADDR TOPIC COUNT PREFIX\n' +
      '       peer.js sub ADDR TOPIC CHANNEL COUNT TIMEOUT_S\n' +
      '       peer.js sub-lookupd LOOKUPD_HTTP TOPIC CHANNEL COUNT TIMEOUT_S'
  )
  process.exit(2)
}

function positive(text) {
  const n = Number(text)
  if (!Number.isInteger(n) || n <= 0) usage()
  return n
}

function fail(why) {
  console.error(`nsqjs-peer: ${why}`)
  process.exit(1)
}

function hostPort(addr) {
  const at = addr.lastIndexOf(':')
  if (at < 0) usage()
  return [addr.slice(0, at), Number(addr.slice(at + 1))]
}

function pub(addr, topic, count, prefix) {
  let acked = 0
  const timer = setTimeout(
    () => fail(`timeout: ${acked} of ${count} publishes acknowledged`),
    PUB_TIMEOUT_S * 1000
  )
  const [host, port] = hostPort(addr)
  const writer = new nsq.Writer(host, port)
  writer.on('error', (err) => fail(`writer error: ${err}`))
  writer.on('ready', () => {
    for (let i = 0; i < count; i++) {
      // The callback runs on nsqd's OK (responses come in order) or with the error.
      writer.publish(topic, `${prefix}-${i}`, (err) => {
        if (err) fail(`publish ${i} failed: ${err}`)
        if (++acked === count) {
          clearTimeout(timer)
          writer.close()
          process.exit(0)
        }
      })
    }
  })
  writer.connect()
}

function sub(viaLookupd, addr, topic, channel, count, timeoutS) {
  const seen = new Set()
  let done = false
  const timer = setTimeout(
    () => fail(`timeout: ${seen.size} of ${count} messages after ${timeoutS}s`),
    timeoutS * 1000
  )
  const options = { maxInFlight: 50 }
  if (viaLookupd) {
    options.lookupdHTTPAddresses = [addr]
    options.lookupdPollInterval = 1
  } else {
    options.nsqdTCPAddresses = [addr]
  }
  const reader = new nsq.Reader(topic, channel, options)
  reader.on('error', (err) => console.error(`nsqjs-peer: reader error: ${err}`))
  // READY: the first nsqd connection answered SUB with OK.
  reader.on('ready', () => console.error('ready'))
  reader.on('message', (msg) => {
    const body = msg.body.toString()
    if (seen.has(body)) {
      console.error(`redelivered: ${body} (attempt ${msg.attempts})`)
    } else if (seen.size < count) {
      seen.add(body)
      process.stdout.write(body + '\n')
    }
    msg.finish()
    if (seen.size === count && !done) {
      done = true
      clearTimeout(timer)
      // nsqjs writes each FIN on the next tick and close() destroys the socket right after
      // sending CLS: close only once the FINs queued so far are written (setImmediate runs
      // after the tick queue), then exit once stdout is flushed.
      setImmediate(() => {
        reader.close()
        process.stdout.write('', () => process.exit(0))
      })
    }
  })
  reader.connect()
}

function main(argv) {
  if (argv.length === 5 && argv[0] === 'pub') {
    return pub(argv[1], argv[2], positive(argv[3]), argv[4])
  }
  if (argv.length === 6 && (argv[0] === 'sub' || argv[0] === 'sub-lookupd')) {
    return sub(argv[0] === 'sub-lookupd', argv[1], argv[2], argv[3], positive(argv[4]), positive(argv[5]))
  }
  usage()
}

main(process.argv.slice(2))
