#!/usr/bin/env node
// kafkajs 2.2.4 transactions, unmodified, driven from pylog's compatibility tests.
//
// Usage: node kafkajs_txn.js '<json args>'   (or '-' to read the JSON from stdin)
// Args: {brokers, transactionalId, transactionTimeout?, transactions: [
//          {topic, values: [string], partition?, offsets?: {groupId, topic, partitions: [{partition, offset}]},
//           end: "commit" | "abort"}]}
// Runs the transactions in order with one transactional producer and prints one JSON document
// on stdout (the last line): {results: [{end, offsets: [{partition, offset}]}]}.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

async function main(args) {
  const kafka = new Kafka({
    clientId: 'pylog-compat-kafkajs-txn',
    brokers: args.brokers,
    logLevel: logLevel[(process.env.KAFKAJS_LOG_LEVEL || 'WARN').toUpperCase()],
    connectionTimeout: 10000,
    requestTimeout: 30000,
    retry: { retries: 8, initialRetryTime: 200 },
  })
  const producer = kafka.producer({
    transactionalId: args.transactionalId,
    transactionTimeout: args.transactionTimeout || 60000,
    maxInFlightRequests: 1,
    idempotent: true,
    allowAutoTopicCreation: false,
  })
  await producer.connect()
  const results = []
  try {
    for (const t of args.transactions) {
      const txn = await producer.transaction()
      const messages = t.values.map((v) => (t.partition === undefined ? { value: v } : { value: v, partition: t.partition }))
      const sent = await txn.send({ topic: t.topic, messages })
      if (t.offsets) {
        await txn.sendOffsets({
          consumerGroupId: t.offsets.groupId,
          topics: [{ topic: t.offsets.topic, partitions: t.offsets.partitions.map((p) => ({ partition: p.partition, offset: String(p.offset) })) }],
        })
      }
      if (t.end === 'abort') await txn.abort()
      else await txn.commit()
      results.push({ end: t.end, offsets: sent.map((r) => ({ partition: r.partition, offset: r.baseOffset })) })
    }
  } finally {
    await producer.disconnect()
  }
  return { results }
}

function readArgs() {
  const raw = process.argv[2]
  if (raw === undefined || raw === '-') return JSON.parse(require('fs').readFileSync(0, 'utf8'))
  return JSON.parse(raw)
}

main(readArgs())
  .then((doc) => {
    process.stdout.write(JSON.stringify(doc) + '\n')
    process.exit(0)
  })
  .catch((err) => {
    process.stdout.write(JSON.stringify({ error: String(err && err.message), type: err && err.name }) + '\n')
    process.exit(1)
  })
