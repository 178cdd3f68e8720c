// `loom sessions ...` on the terminal: the list, a transcript, a verify or
// repair report, request economics, a compaction. Each prints JSON instead
// with `--json`.
import type { ReportedEconomics, StoredSession } from '@loom/session'
import type { CompactReport } from '../runner.ts'
import type { SessionSummary, StatsReport, VerifyReport } from '../sessions.ts'
import { formatTime, transcript } from './describe.ts'
import type { Io } from './term.ts'

const pretty = (value: unknown) => JSON.stringify(value, null, 2) + '\n'

/** `ID  CREATED  TURNS  LAST  CWD`, one stored session a line; a subagent's ends with its parent. */
export function printSessionList(io: Io, sessions: readonly SessionSummary[], json: boolean) {
  if (json) return io.stdout.write(pretty(sessions))
  if (!sessions.length) return io.stdout.write('no stored sessions\n')
  const rows = sessions.map(s => [
    s.id,
    formatTime(s.createdAt),
    String(s.turns),
    s.lastStatus ?? '-',
    `${s.cwd ?? '-'}${s.parentSession === undefined ? '' : `  (subagent of ${s.parentSession})`}`,
  ])
  const head = ['ID', 'CREATED', 'TURNS', 'LAST', 'CWD']
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map(r => r[i].length)))
  const fmt = (r: string[]) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ')
  io.stdout.write([fmt(head), ...rows.map(fmt)].join('\n') + '\n')
}

export function printSession(io: Io, stored: StoredSession, json: boolean) {
  io.stdout.write(json ? pretty({ meta: stored.meta, events: stored.events }) : transcript(stored.meta, stored.events))
}

export function printVerify(io: Io, report: VerifyReport, json: boolean) {
  if (json) return io.stdout.write(pretty(report))
  const lines = [`session ${report.id}: ${report.clean ? 'clean' : 'NOT clean'}`, `  log      ${report.path}`]
  if (report.corruption) {
    lines.push(`  corrupt  ${report.corruption}`)
  } else {
    lines.push(`  events   ${report.events} committed`)
    lines.push(`  tail     ${report.tornBytes ? `torn: ${report.tornBytes} bytes after the last complete line would be cut` : 'intact'}`)
    lines.push(`  turns    ${report.openTurn ? `turn ${report.openTurn.turn} is open; repair appends ${report.openTurn.closers.join(', ')}` : 'all closed'}`)
    // A crash inside a compaction (`loom sessions compact`, or one before a step) leaves its start without an end.
    for (const { compactionId, turn } of report.unfinishedCompactions ?? []) {
      lines.push(`  compact  unfinished compaction ${compactionId} (${turn === null ? 'between turns' : `in turn ${turn}`}); repair appends compaction/end`)
    }
    if (!report.clean) lines.push(`  repair with: loom sessions repair ${report.id}`)
  }
  io.stdout.write(lines.join('\n') + '\n')
}

/** What repair did, from the verify reports before and after it. */
export function printRepair(io: Io, id: string, { before, after }: { before: VerifyReport; after: VerifyReport }, json: boolean) {
  if (json) return io.stdout.write(pretty({ before, after }))
  if (before.corruption) return io.stdout.write(`session ${id} cannot be repaired: ${before.corruption}\n`)
  if (before.clean) return io.stdout.write(`session ${id} is clean: nothing to repair (${before.events} events)\n`)
  const done: string[] = []
  if (before.tornBytes) done.push(`cut a torn tail of ${before.tornBytes} bytes`)
  for (const compaction of before.unfinishedCompactions ?? []) done.push(`closed the unfinished compaction ${compaction.compactionId}: appended compaction/end`)
  if (before.openTurn) done.push(`closed the open turn ${before.openTurn.turn}: appended ${before.openTurn.closers.join(', ')}`)
  io.stdout.write(
    `repaired session ${id}: ${done.join('; ')}\n${after.clean ? `the log is clean now (${after.events} events)` : 'the log is still not clean'}\n`,
  )
}

/** One row per request (its prefix reuse and estimated cost, beside what the provider reported), then the totals. */
export function printStats(io: Io, stats: StatsReport, json: boolean) {
  if (json) return io.stdout.write(pretty(stats))
  const { requests, totals, prices } = stats
  const percent = (share: number | null) => (share === null ? '-' : `${(Math.floor(share * 1000) / 10).toFixed(1)}%`)
  const money = (value: number | null) => (value === null ? '-' : `$${value.toFixed(6)}`)
  const sum = (a: number | null, b: number | null) => (a === null || b === null ? null : a + b)
  const head = ['#', 'TURN', 'STEP', 'CHARS', 'REUSE', 'HIT TOK', 'MISS TOK', 'OUT TOK', 'INPUT COST', 'REPORTED IN', 'CACHED', 'REPORTED COST']
  const reported = (r: ReportedEconomics<number | null> | null) =>
    r ? [String(r.inputTokens), percent(r.hitShare), money(sum(r.inputCost, r.outputCost))] : ['-', '-', '-']
  const rows = requests.map(r => [
    String(r.index + 1),
    String(r.turn ?? '-'),
    String(r.step ?? '-'),
    String(r.chars),
    percent(r.reuse),
    String(r.hitTokens),
    String(r.missTokens),
    String(r.outputTokens),
    money(r.inputCost),
    ...reported(r.reported),
  ])
  const total = [
    'total',
    '',
    '',
    String(totals.chars),
    percent(totals.meanReuse),
    String(totals.hitTokens),
    String(totals.missTokens),
    String(totals.outputTokens),
    money(totals.inputCost),
    ...reported(totals.reported),
  ]
  const widths = head.map((h, i) => Math.max(h.length, ...[...rows, total].map(r => r[i].length)))
  const fmt = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ')
  const lines = [
    `session ${stats.id}: ${totals.requests} request${totals.requests === 1 ? '' : 's'}`,
    prices
      ? `  prices per million tokens: cache hit ${prices.hit}, cache miss ${prices.miss}, output ${prices.output}${prices.write === undefined ? '' : `, cache write ${prices.write}`}; tokens ~ characters / 4 of the serialized request`
      : `  unknown price: this model has no built-in list price (set the runner row's prices, or give --hit-price, --miss-price and --output-price); tokens ~ characters / 4 of the serialized request`,
    `  REUSE: share of the previous request's serialization (tools, system, messages) reused unchanged as this one's prefix`,
    `  REPORTED: what the provider reported (input tokens incl. cache reads, share of them read from its cache, cost of input and output)`,
    '',
    fmt(head),
    ...rows.map(fmt),
    fmt(total),
    '',
    `prefix reuse: mean ${percent(totals.meanReuse)}, min ${percent(totals.minReuse)}`,
    totals.inputCost === null
      ? 'estimated cost: unknown price'
      : `estimated input cost: ${money(totals.inputCost)} (${money(totals.uncachedInputCost)} with no cache); output cost: ${money(totals.outputCost)}`,
    totals.reported
      ? `reported by the provider (${totals.reported.requests} of ${totals.requests} requests): ${totals.reported.inputTokens} input tokens, ${percent(totals.reported.hitShare)} from its cache${totals.reported.writeTokens ? `, ${totals.reported.writeTokens} written to it` : ''}; ${totals.reported.inputCost === null ? 'unknown price' : `cost ${money(totals.reported.inputCost)} input + ${money(totals.reported.outputCost)} output`}`
      : 'the provider reported no usage',
  ]
  io.stdout.write(lines.join('\n') + '\n')
}

export function printCompact(io: Io, report: CompactReport, json: boolean) {
  if (json) return io.stdout.write(pretty(report))
  const tokens = `~${report.tokensBefore} → ~${report.tokensAfter} estimated tokens`
  const pruned = report.pruned ? `, ${report.pruned} tool results pruned` : ''
  io.stdout.write(
    report.status === 'compacted'
      ? `compacted session ${report.id}: ${report.summarized} messages summarized${pruned}; ${tokens}\n`
      : `session ${report.id} was not summarized (${report.status}: ${report.reason})${pruned}; ${tokens}\n`,
  )
}
