#!/usr/bin/env node
// kafkajs 2.2.4, unmodified, driven from pylog's compatibility tests.
//
// Usage: node kafkajs_cli.js <command> '<json args>'   (or '-' to read the JSON from stdin)
// Prints one JSON document on stdout (the last line); kafkajs logs go to stderr.
// Keys, values and header values travel base64-encoded so binary data survives.
//
// Commands:
//   produce  {brokers, topic, messages:[{key_b64, value_b64, headers:[[k, b64]], partition?, timestamp?}],
//             compression: none|gzip, acks, idempotent}
//            -> {positions: [{partition, offset}]} in message order
//   consume  {brokers, topic, groupId, count, timeoutMs, fromBeginning?, commit?, sessionTimeout?}
//            -> {messages: [{partition, offset, key_b64, value_b64, headers, timestamp}]}
//   member   {brokers, topic, groupId, sessionTimeout, heartbeatInterval}
//            prints a JSON line {"event": "assigned", "partitions": [...]} after every join and
//            {"event": "stopped"} after a clean leave on SIGTERM / SIGINT
//   admin    {brokers, op, args: [...]} -> {result: <what admin[op](...args) resolved to>}
// Every command also takes ssl: {ca, cert?, key?} (PEM file paths) and sasl: {mechanism, username,
// password}, handed to kafkajs as its own ssl / sasl options.
'use strict'

const fs = require('fs')
const { Kafka, logLevel, CompressionTypes, Partitioners } = require('kafkajs')

const b64 = (buf) => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('base64'))
const unb64 = (s) => (s === null || s === undefined ? null : Buffer.from(s, 'base64'))

function client(args) {
  return new Kafka({
    clientId: 'pylog-compat-kafkajs',
    brokers: args.brokers,
    logLevel: logLevel[(process.env.KAFKAJS_LOG_LEVEL || 'WARN').toUpperCase()],
    connectionTimeout: 10000,
    requestTimeout: 30000,
    retry: { retries: args.retries === undefined ? 5 : args.retries, initialRetryTime: 200 },
    ssl: tls(args.ssl),
    sasl: args.sasl,
  })
}

function tls(ssl) {
  if (!ssl) return undefined
  const out = { ca: [fs.readFileSync(ssl.ca, 'utf-8')] }
  if (ssl.cert) out.cert = fs.readFileSync(ssl.cert, 'utf-8')
  if (ssl.key) out.key = fs.readFileSync(ssl.key, 'utf-8')
  return out
}

function headersOut(headers) {
  const out = []
  for (const [k, v] of Object.entries(headers || {})) {
    for (const item of Array.isArray(v) ? v : [v]) out.push([k, b64(item)])
  }
  return out
}

function messageOut(partition, message) {
  return {
    partition,
    offset: message.offset,
    key_b64: b64(message.key),
    value_b64: b64(message.value),
    headers: headersOut(message.headers),
    timestamp: message.timestamp,
  }
}

async function produce(args) {
  const kafka = client(args)
  const producer = kafka.producer({
    idempotent: !!args.idempotent,
    maxInFlightRequests: args.idempotent ? 1 : undefined,
    allowAutoTopicCreation: false,
    createPartitioner: Partitioners.DefaultPartitioner,
  })
  const admin = kafka.admin()
  await producer.connect()
  await admin.connect()
  try {
    const meta = await admin.fetchTopicMetadata({ topics: [args.topic] })
    const partitionMetadata = meta.topics[0].partitions
    const partitioner = Partitioners.DefaultPartitioner()
    const messages = args.messages.map((m) => {
      const msg = { key: unb64(m.key_b64), value: unb64(m.value_b64) }
      if (m.headers && m.headers.length) {
        msg.headers = {}
        for (const [k, v] of m.headers) msg.headers[k] = unb64(v)
      }
      if (m.timestamp !== undefined) msg.timestamp = m.timestamp
      msg.partition = m.partition !== undefined ? m.partition
        : partitioner({ topic: args.topic, partitionMetadata, message: msg })
      return msg
    })
    const compression = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }[args.compression || 'none']
    if (compression === undefined) throw new Error(`kafkajs has no built-in codec ${args.compression}`)
    const result = await producer.send({
      topic: args.topic,
      messages,
      acks: args.acks === undefined ? -1 : args.acks,
      compression,
      timeout: 30000,
    })
    const base = {}
    for (const r of result) {
      if (r.errorCode) throw new Error(`produce error ${r.errorCode} on partition ${r.partition}`)
      base[r.partition] = BigInt(r.baseOffset)
    }
    const seen = {}
    const positions = messages.map((m) => {
      const i = seen[m.partition] || 0n
      seen[m.partition] = i + 1n
      return { partition: m.partition, offset: (base[m.partition] + i).toString() }
    })
    return { positions }
  } finally {
    await admin.disconnect()
    await producer.disconnect()
  }
}

async function consume(args) {
  const kafka = client(args)
  const consumer = kafka.consumer({
    groupId: args.groupId,
    sessionTimeout: args.sessionTimeout || 10000,
    heartbeatInterval: args.heartbeatInterval || 1000,
    maxWaitTimeInMs: 500,
    allowAutoTopicCreation: false,
  })
  const messages = []
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [args.topic], fromBeginning: args.fromBeginning !== false })
    let done
    const finished = new Promise((resolve) => { done = resolve })
    const timer = setTimeout(() => done('timeout'), args.timeoutMs || 30000)
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        if (messages.length < args.count) messages.push(messageOut(partition, message))
        if (messages.length >= args.count) done('count')
      },
    })
    await finished
    clearTimeout(timer)
    if (args.commit) {
      const next = {}
      for (const m of messages) {
        const o = BigInt(m.offset) + 1n
        if (next[m.partition] === undefined || next[m.partition] < o) next[m.partition] = o
      }
      await consumer.commitOffsets(Object.entries(next).map(([partition, offset]) => (
        { topic: args.topic, partition: Number(partition), offset: offset.toString() })))
    }
  } finally {
    await consumer.disconnect()
  }
  return { messages }
}

async function member(args) {
  const kafka = client(args)
  const consumer = kafka.consumer({
    groupId: args.groupId,
    sessionTimeout: args.sessionTimeout || 6000,
    heartbeatInterval: args.heartbeatInterval || 1000,
    rebalanceTimeout: args.rebalanceTimeout || 30000,
    maxWaitTimeInMs: 500,
  })
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    const partitions = (e.payload.memberAssignment[args.topic] || []).slice().sort((a, b) => a - b)
    process.stdout.write(JSON.stringify({ event: 'assigned', partitions, memberId: e.payload.memberId }) + '\n')
  })
  consumer.on(consumer.events.CRASH, (e) => {
    process.stdout.write(JSON.stringify({ event: 'crash', error: String(e.payload.error) }) + '\n')
  })
  let stopping = false
  const stop = async () => {
    if (stopping) return
    stopping = true
    await consumer.disconnect()
    process.stdout.write(JSON.stringify({ event: 'stopped' }) + '\n')
    process.exit(0)
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  await consumer.connect()
  await consumer.subscribe({ topics: [args.topic], fromBeginning: true })
  await consumer.run({ eachMessage: async () => {} })
  await new Promise(() => {})
}

async function admin(args) {
  const a = client(args).admin()
  await a.connect()
  try {
    if (typeof a[args.op] !== 'function') throw new Error(`kafkajs admin has no ${args.op}`)
    const result = await a[args.op](...(args.args || []))
    return { result: result === undefined ? null : result }
  } finally {
    await a.disconnect()
  }
}

const commands = { produce, consume, member, admin }

async function main() {
  const [command, arg] = process.argv.slice(2)
  if (!commands[command]) throw new Error(`unknown command ${command}; one of ${Object.keys(commands)}`)
  // '-' reads the arguments from stdin (large messages do not fit on a command line).
  const json = arg === '-' ? require('fs').readFileSync(0, 'utf8') : arg
  const out = await commands[command](JSON.parse(json || '{}'))
  if (out !== undefined) {
    process.stdout.write(JSON.stringify(out, (_k, v) => (typeof v === 'bigint' ? v.toString() : v)) + '\n')
  }
}

main().then(() => process.exit(0)).catch((err) => {
  process.stderr.write(`kafkajs_cli: ${err && err.stack ? err.stack : err}\n`)
  if (err && err.type) process.stderr.write(`kafkajs error type: ${err.type}\n`)
  process.stdout.write(JSON.stringify({ error: String(err), type: err && err.type ? err.type : null }) + '\n')
  process.exit(1)
})
