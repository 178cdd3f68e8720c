// fsync, gathered over one turn of the event loop.
//
// Each fsync handed to the thread pool wakes a sleeping pool thread; in a virtual
// machine that wake is an interrupt to another CPU, and it costs the event loop
// more than the rest of a batch's write (about 35 µs, measured on a 2-core VM with
// 200 sessions). A host serving many sessions asks for several fsyncs in the same
// turn of the loop (often 10 to 15 at 200 sessions): those go to one helper thread
// in one message, and it hands them to the pool from there, so the loop pays one
// wake per turn instead of one per log. A lone fsync (one session, the CLI) goes
// to the pool directly, as does every fsync until the helper has started, and
// after it failed.

import { fsync } from 'node:fs'
import { Worker } from 'node:worker_threads'

interface Waiter {
  fd: number
  resolve: () => void
  reject: (error: Error) => void
}

/**
 * The helper: hands each fsync of a batch to the thread pool, and answers with
 * those that ended in the same turn of its loop (a slow one does not hold up the
 * others' answers).
 */
const HELPER = `
const { parentPort } = require('node:worker_threads')
const { fsync } = require('node:fs')
let ended = []
const answer = () => {
  parentPort.postMessage(ended)
  ended = []
}
const end = (id, error) => {
  if (ended.length === 0) setImmediate(answer)
  ended.push(error ? { id, code: error.code, message: error.message } : { id })
}
parentPort.on('message', fsyncs => {
  for (const { id, fd } of fsyncs) {
    try {
      fsync(fd, error => end(id, error))
    } catch (error) {
      end(id, error)
    }
  }
})
`

/** An fsync the helper has ended, and how. */
interface Ended {
  id: number
  code?: string
  message?: string
}

let gathered: Waiter[] = []
let scheduled = false
let helper: { worker: Worker; online: boolean } | undefined
/** The helper failed: every fsync goes to the pool directly from now on. */
let helperFailed = false
const inFlight = new Map<number, Waiter>()
let nextId = 0
const counts = { fsyncs: 0, batches: 0 }

/** fsync(2) of `fd`; resolves once the file's data and metadata are on disk. */
export function batchedFsync(fd: number): Promise<void> {
  return new Promise((resolve, reject) => {
    gathered.push({ fd, resolve, reject })
    if (scheduled) return
    scheduled = true
    setImmediate(dispatch)
  })
}

/** The helper thread, once started (for tests: a helper that dies must lose no fsync). */
export function fsyncHelper(): Worker | undefined {
  return helper?.worker
}

/** How many fsyncs were asked for, and how many batches of them went to the helper (for tests). */
export function fsyncCounts(): Readonly<typeof counts> {
  return { ...counts }
}

function dispatch() {
  scheduled = false
  const batch = gathered
  gathered = []
  counts.fsyncs += batch.length
  const worker = batch.length > 1 ? onlineHelper() : undefined
  if (worker === undefined) {
    for (const waiter of batch) fsyncInPool(waiter)
    return
  }
  // Only fsyncs in flight keep the process alive, as pending ones in the pool do.
  if (inFlight.size === 0) worker.ref()
  counts.batches++
  worker.postMessage(
    batch.map(waiter => {
      const id = nextId++
      inFlight.set(id, waiter)
      return { id, fd: waiter.fd }
    }),
  )
}

/** The helper once it runs; undefined while it starts (it is started at the first batch) or after it failed. */
function onlineHelper(): Worker | undefined {
  if (helperFailed) return undefined
  if (helper === undefined) {
    // No loader flags of the host (a source loader would make it start slowly): the helper is plain JavaScript.
    const worker = new Worker(HELPER, { eval: true, execArgv: [] })
    helper = { worker, online: false }
    worker.on('online', () => {
      if (helper?.worker === worker) helper.online = true
    })
    worker.on('message', (ended: Ended[]) => settle(worker, ended))
    worker.on('error', error => fail(worker, error))
    worker.on('exit', code => fail(worker, new Error(`the fsync helper thread exited (code ${code})`)))
    // After the listeners: a 'message' listener refs the worker's port, which would keep the process alive.
    worker.unref()
  }
  return helper.online ? helper.worker : undefined
}

function settle(worker: Worker, ended: Ended[]) {
  for (const { id, code, message } of ended) {
    const waiter = inFlight.get(id)
    if (waiter === undefined) continue
    inFlight.delete(id)
    if (message === undefined) waiter.resolve()
    else waiter.reject(Object.assign(new Error(message), { code, syscall: 'fsync' }))
  }
  if (inFlight.size === 0) worker.unref()
}

/** The helper is gone: what it had not answered is fsynced again from here (fsync can be repeated), and it is not used again. */
function fail(worker: Worker, why: Error) {
  if (helper?.worker !== worker) return
  helper = undefined
  helperFailed = true
  process.emitWarning(`session-jsonl: ${why.message}; fsyncs go to the thread pool one by one`)
  const unanswered = [...inFlight.values()]
  inFlight.clear()
  for (const waiter of unanswered) fsyncInPool(waiter)
}

function fsyncInPool(waiter: Waiter) {
  try {
    fsync(waiter.fd, error => (error ? waiter.reject(error) : waiter.resolve()))
  } catch (error) {
    waiter.reject(error as Error) // not a descriptor at all
  }
}
