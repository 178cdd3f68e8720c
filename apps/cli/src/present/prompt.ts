// `loom prompt` on the terminal: the route, the system text, the tools in
// request order with their owners, the runtime-context snapshot, and the
// manifest with its totals by owner. Known secrets are shown as [REDACTED].
import { redact, redactDeep } from '@loom/secrets'
import type { PromptReport } from '../runner.ts'
import type { SessionManifestReport } from '../sessions.ts'
import type { NamedManifest } from '../manifest-ref.ts'
import { diffManifests, type ManifestRow } from '@loom/agent-loop'
import { hostSecrets, styler, type Io } from './term.ts'

export function printPrompt(io: Io, report: PromptReport, json: boolean) {
  printUnstable(io, report.unstable)
  if (json) {
    io.stdout.write(JSON.stringify(redactDeep(report, hostSecrets()), null, 2) + '\n')
    return
  }
  const out = styler(io.stdout)
  const rule = ruler(out)
  let text = rule(`route: ${report.provider ? `${report.provider}/${report.model}` : 'none (no model provider is configured)'}`)
  text += '\n' + rule('system') + report.system + '\n\n'
  text += rule(`tools, in request order (${report.tools.length})`)
  report.tools.forEach((tool, i) => {
    text += `${i + 1}. ${out.bold(tool.name)}  ${out.dim(`← ${tool.owner}`)}\n   ${tool.description}\n`
  })
  text += '\n' + rule('runtime-context snapshot (user message)') + (report.runtimeContext || '(none)') + '\n'
  if (report.omitted.length) {
    text += '\n' + rule(`left out by the budgets (${report.omitted.length})`)
    for (const o of report.omitted)
      text += `${o.kind} ${out.bold(o.name)}  ${out.dim(`← ${o.owner}`)}  ${o.category}, ${o.chars} chars ${o.cut ? 'cut' : 'left out'}, over the ${o.over === 'category' ? `${o.category} cap` : 'total'}\n`
  }
  io.stdout.write(redact(text, hostSecrets()))
  printManifest(io, report.manifest)
}

/** On stderr, one line each: what changed between the two assemblies on its own (an error where `loom dev` would fail the turn). */
function printUnstable(io: Io, unstable: PromptReport['unstable']) {
  const err = styler(io.stderr)
  for (const { severe, message } of unstable) {
    const line = `loom: ${severe ? 'error' : 'warning'}: ${redact(message, hostSecrets())}`
    io.stderr.write((severe ? err.red(line) : err.yellow(line)) + '\n')
  }
}

/** `loom prompt --diff A B`: what B has that A has not, what A had that B lost, what moved, what changed. */
export function printManifestDiff(io: Io, before: NamedManifest, after: NamedManifest, json: boolean) {
  const diff = diffManifests(before.manifest, after.manifest)
  if (json) return void io.stdout.write(JSON.stringify(redactDeep({ before: before.label, after: after.label, ...diff }, hostSecrets()), null, 2) + '\n')
  const out = styler(io.stdout)
  const row = (r: ManifestRow) => `${r.kind} ${out.bold(r.name)} ${out.dim(`← ${r.owner}`)}`
  const lines = [
    `${out.bold('A')} ${before.label}`,
    `${out.bold('B')} ${after.label}`,
    '',
    ...diff.added.map(r => `${out.green('added  ')}  ${row(r)} (${r.tokens} tokens)`),
    ...diff.removed.map(r => `${out.red('removed')}  ${row(r)} (${r.tokens} tokens)`),
    ...diff.moved.map(({ row: r, from, to }) => `${out.yellow('moved  ')}  ${row(r)}: position ${from + 1} → ${to + 1}`),
    ...diff.changed.map(({ before: b, after: a, hashOnly }) =>
      hashOnly
        ? `${out.yellow('changed')}  ${row(a)}: only in hash (${b.sha256.slice(0, 12)} → ${a.sha256.slice(0, 12)}, same ${a.chars} chars)`
        : `${out.yellow('changed')}  ${row(a)}: ${b.chars} → ${a.chars} chars, ${b.tokens} → ${a.tokens} tokens`,
    ),
  ]
  if (lines.length === 3) lines.push('no section, context or tool differs')
  lines.push('', `history: ${diff.messages.before} → ${diff.messages.after} messages · total ~${diff.tokens.before} → ~${diff.tokens.after} tokens`)
  io.stdout.write(redact(lines.join('\n') + '\n', hostSecrets()))
}

/** `loom sessions manifest`: which request, then its manifest. */
export function printSessionManifest(io: Io, report: SessionManifestReport, json: boolean) {
  if (json) return void io.stdout.write(JSON.stringify(redactDeep(report, hostSecrets()), null, 2) + '\n')
  io.stdout.write(`session ${report.id} · request ${report.step} of ${report.steps}${report.turn === null ? '' : ` (turn ${report.turn})`}\n`)
  printManifest(io, report.manifest)
}

/** The manifest: one row per section, runtime context and tool, then the totals by owner. */
export function printManifest(io: Io, { rows, totals }: PromptReport['manifest']) {
  const out = styler(io.stdout)
  const rule = ruler(out)
  const table = (head: string[], body: string[][], right: number[]) => {
    const widths = head.map((h, i) => Math.max(h.length, ...body.map(r => r[i].length)))
    const fmt = (r: string[]) => r.map((c, i) => (right.includes(i) ? c.padStart(widths[i]) : i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ')
    return [out.bold(fmt(head)), ...body.map(fmt)].join('\n') + '\n'
  }
  let text = '\n' + rule(`manifest (${rows.length} rows, ~${totals.tokens} tokens estimated)`)
  text += table(
    ['KIND', 'NAME', 'OWNER', 'ORDER', 'STABILITY', 'TRUST', 'CATEGORY', 'AGE', 'CHARS', 'TOKENS', 'SHA256'],
    rows.map(r => [
      r.kind,
      r.name,
      r.owner,
      String(r.order),
      r.stability ?? '-',
      r.trust ?? '-',
      r.category ?? '-',
      r.age === null ? '-' : describeAge(r.age),
      String(r.chars),
      String(r.tokens),
      r.sha256.slice(0, 12),
    ]),
    [3, 7, 8, 9],
  )
  text +=
    '\n' +
    table(
      ['OWNER', 'ROWS', 'CHARS', 'TOKENS'],
      totals.byOwner.map(t => [t.owner, String(t.rows), String(t.chars), String(t.tokens)]),
      [1, 2, 3],
    )
  io.stdout.write(redact(text, hostSecrets()))
}

/** A titled rule line: `── system ─────…` */
function ruler(out: ReturnType<typeof styler>) {
  return (title: string) => out.bold(`── ${title} ${'─'.repeat(Math.max(0, 60 - title.length))}`) + '\n'
}

/** `42s`, `5m`, `3h`, `12d`: how long ago a source was written. */
export function describeAge(ms: number): string {
  const seconds = Math.floor(ms / 1000)
  if (seconds < 60) return `${seconds}s`
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)}h`
  return `${Math.floor(seconds / 86_400)}d`
}
