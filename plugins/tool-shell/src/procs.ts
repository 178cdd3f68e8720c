/**
 * Finding and killing the processes of a command through /proc (Linux), also
 * those that left its process group (`setsid`). Without /proc (not Linux) every
 * scan finds nothing and only the process group is left.
 *
 * Every command runs with `LOOM_TOOL_CALL=<marker>` in its environment, and a
 * child inherits it: a process whose /proc/<pid>/environ holds the marker belongs
 * to that call, whatever its group, session or parent. A child that was started
 * with a cleaned environment (`env -i`) is still found through its parent link
 * while the parent lives. Everything here is synchronous so that it also works
 * in a `process.on('exit')` handler.
 */
import { randomBytes } from 'node:crypto'
import { readdirSync, readFileSync, readlinkSync } from 'node:fs'

export const MARKER_VAR = 'LOOM_TOOL_CALL'

interface ProcStat {
  pid: number
  ppid: number
  pgrp: number
  state: string
  /** Clock ticks after boot, as text (a marker holds it as text). */
  startTime: string
}

function readStat(pid: number | 'self'): ProcStat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name (field 2) is in parentheses and may hold spaces: split after it.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
    return { pid: Number(text.slice(0, text.indexOf(' '))), state: fields[0], ppid: Number(fields[1]), pgrp: Number(fields[2]), startTime: fields[19] }
  } catch {
    return undefined // gone, or no /proc
  }
}

/** The marker's value in a process's environment, if any. */
function markerOf(pid: number): string | undefined {
  let environ: Buffer
  try {
    environ = readFileSync(`/proc/${pid}/environ`)
  } catch {
    return undefined // gone, or not ours to read
  }
  const key = Buffer.from(`${MARKER_VAR}=`)
  for (let at = environ.indexOf(key); at !== -1; at = environ.indexOf(key, at + 1)) {
    if (at > 0 && environ[at - 1] !== 0) continue // the end of a longer name
    const end = environ.indexOf(0, at)
    return environ.subarray(at + key.length, end === -1 ? undefined : end).toString()
  }
  return undefined
}

/** Live (non-zombie) processes, except this one. */
function processes(): ProcStat[] {
  let entries: string[]
  try {
    entries = readdirSync('/proc')
  } catch {
    return []
  }
  const list: ProcStat[] = []
  for (const entry of entries) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue
    const stat = readStat(Number(entry))
    if (stat && stat.state !== 'Z' && stat.state !== 'X') list.push(stat)
  }
  return list
}

function pidNamespace(): string {
  try {
    return readlinkSync('/proc/self/ns/pid').replace(/\D/g, '')
  } catch {
    return '0'
  }
}

// This host, as a marker prefix: its pid namespace, pid and start time, so that a
// later scan can tell whether the host that started a process is still alive.
const HOST = `${pidNamespace()}.${process.pid}.${readStat('self')?.startTime ?? '0'}`

/** A new marker for one call: `<pid namespace>.<host pid>.<host start time>.<random>`. */
export function newMarker(): string {
  return `${HOST}.${randomBytes(6).toString('hex')}`
}

/** How to recognize the processes of one call. */
export interface CallTree {
  /** Its `LOOM_TOOL_CALL` value. */
  marker: string
  /** Its process groups. */
  groups: readonly number[]
  /** The processes the host spawned for it, while they are its unreaped children (their pids cannot be reused). */
  roots: readonly number[]
  /** Its start, in clock ticks after boot (`startTimeOf` of its first process): older processes are not read. */
  since?: number
}

/** A process's start time in clock ticks after boot. */
export function startTimeOf(pid: number): number | undefined {
  const stat = readStat(pid)
  return stat && Number(stat.startTime)
}

/**
 * The live processes of a call: those carrying its marker or in one of its
 * process groups, and every descendant of them and of its roots.
 */
export function callProcesses(tree: CallTree): number[] {
  const { marker, groups, roots, since = 0 } = tree
  const all = processes()
  const children = new Map<number, number[]>()
  for (const proc of all) {
    const list = children.get(proc.ppid)
    if (list) list.push(proc.pid)
    else children.set(proc.ppid, [proc.pid])
  }
  const found = new Set<number>()
  const visit = (pid: number) => {
    if (found.has(pid)) return
    found.add(pid)
    for (const child of children.get(pid) ?? []) visit(child)
  }
  for (const proc of all) {
    // Reading every environment is the cost of a scan: a process older than the call cannot be of it.
    if (groups.includes(proc.pgrp) || (Number(proc.startTime) >= since && markerOf(proc.pid) === marker)) visit(proc.pid)
  }
  for (const root of roots) for (const child of children.get(root) ?? []) visit(child)
  for (const root of roots) if (all.some(proc => proc.pid === root)) found.add(root)
  return [...found]
}

function kill(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal)
    return true
  } catch {
    return false // ESRCH: already gone
  }
}

/**
 * SIGKILL to the process groups and to every process of the call, repeated until
 * a scan finds nothing new (a process may fork between a scan and its kill).
 * Returns whether any process of the call was still alive.
 */
export function killCall(tree: CallTree): boolean {
  const killed = new Set<number>()
  for (let round = 0; round < 10; round++) {
    const fresh = callProcesses(tree).filter(pid => !killed.has(pid))
    // The group signal reaches every member at once, so none of them can fork after it.
    if (round === 0) for (const group of tree.groups) kill(-group, 'SIGKILL')
    if (!fresh.length) break
    for (const pid of fresh) {
      killed.add(pid)
      kill(pid, 'SIGKILL')
    }
  }
  return killed.size > 0
}

/**
 * Kills processes left by hosts that are gone (a host killed with SIGKILL cannot
 * clean up; without bubblewrap its commands' processes outlive it). Only markers
 * of this pid namespace are considered; a host is alive when a process with its
 * pid and start time exists. Returns the pids killed.
 */
export function reapOrphans(): number[] {
  const namespace = HOST.slice(0, HOST.indexOf('.'))
  const hostAlive = new Map<string, boolean>()
  const killed = new Set<number>()
  // As in killCall: a process may fork between the scan and its kill, so scan again
  // until a round finds no orphan it has not killed yet.
  for (let round = 0; round < 10; round++) {
    let found = false
    for (const proc of processes()) {
      if (killed.has(proc.pid)) continue
      const marker = markerOf(proc.pid)
      if (!marker) continue
      const [ns, hostPid, hostStart] = marker.split('.')
      if (ns !== namespace || !hostPid || !hostStart) continue
      const host = `${hostPid}.${hostStart}`
      let alive = hostAlive.get(host)
      if (alive === undefined) {
        const stat = readStat(Number(hostPid))
        hostAlive.set(host, (alive = stat !== undefined && stat.state !== 'Z' && stat.startTime === hostStart))
      }
      if (!alive && kill(proc.pid, 'SIGKILL')) {
        killed.add(proc.pid)
        found = true
      }
    }
    if (!found) break
  }
  return [...killed]
}
