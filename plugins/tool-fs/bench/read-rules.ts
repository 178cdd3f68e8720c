// What the read rules (credential stores kept from the tools) add to a file tool's call: one
// `readDenial` of the resolved path against every rule, a prefix test each, no I/O. It is timed on
// its own (a whole `read` with and without it would measure the disk) with the default rules and a
// few of a deployment's, for a path nothing denies (the common case) and a denied one, and set
// against a real `read` call through the runtime. A search checks each entry it meets against the
// rules at or below its start only: in a project folder, none.
import { Context } from '@deepseek-ai/cordis'
import SystemPrompt from '@loom/system-prompt'
import ToolRuntime, { type ToolRuntimeConfig } from '@loom/tools'
import { readDenial } from '@loom/tools/workspace'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { homedir, tmpdir } from 'node:os'
import { join } from 'node:path'
import * as toolFs from '../src/index.ts'

export interface ReadRulesFigure {
  bench: 'tool-fs/read-rules check'
  rules: number
  /** Median time of one check of a path no rule covers (ns). */
  check_ns: number
  /** The same for a path inside a denied folder (ns). */
  check_denied_ns: number
  /** Median time of one `read` call of tool-fs, through the runtime, the check included (µs). */
  read_call_us: number
  /** `check_ns` as a share of a read call. */
  overhead: number
}

const median = (samples: number[]) => samples.slice().sort((a, b) => a - b)[samples.length >> 1]
const signal = new AbortController().signal

export async function benchReadRules(rounds = 15, checks = 200_000, reads = 200): Promise<ReadRulesFigure> {
  const workspace = mkdtempSync(join(tmpdir(), 'loom-bench-read-rules-'))
  try {
    mkdirSync(join(workspace, 'src'))
    writeFileSync(join(workspace, 'src', 'file.ts'), 'export const x = 1\n'.repeat(50))
    const root = new Context()
    await root.plugin(SystemPrompt)
    // The defaults, and what a deployment might add.
    await root.plugin(
      ToolRuntime,
      ToolRuntime.Config({ denyRead: ['deploy/keys', '~/.config/acme', '~/vault'], allowRead: ['~/.ssh/known_hosts'] } as ToolRuntimeConfig),
    )
    await root.plugin(toolFs, { root: workspace } as toolFs.Config)
    const tools: ToolRuntime = root.get('tools')!
    const rules = tools.readRules()

    const time = (path: string) => {
      const samples: number[] = []
      for (let round = 0; round < rounds; round++) {
        const start = process.hrtime.bigint()
        for (let i = 0; i < checks; i++) readDenial(rules, path)
        samples.push(Number(process.hrtime.bigint() - start) / checks)
      }
      return median(samples)
    }
    const checkNs = time(join(workspace, 'src', 'file.ts'))
    const deniedNs = time(join(homedir(), '.ssh', 'id_ed25519'))

    const read = async (n: number) => {
      const start = process.hrtime.bigint()
      for (let i = 0; i < n; i++) {
        const result = await tools.execute({ callId: `r${i}`, name: 'read', arguments: { path: 'src/file.ts' }, signal })
        if (result.isError) throw new Error(`bench read failed: ${JSON.stringify(result.content)}`)
      }
      return Number(process.hrtime.bigint() - start) / 1e3 / n
    }
    await read(20)
    const readSamples: number[] = []
    for (let i = 0; i < 5; i++) readSamples.push(await read(reads / 5))
    const readCall = median(readSamples)
    return {
      bench: 'tool-fs/read-rules check',
      rules: rules.deny.length + rules.allow.length,
      check_ns: Math.round(checkNs),
      check_denied_ns: Math.round(deniedNs),
      read_call_us: Math.round(readCall),
      overhead: Math.round((checkNs / 1000 / readCall) * 100000) / 100000,
    }
  } finally {
    rmSync(workspace, { recursive: true, force: true })
  }
}
