// What deciding calls by effect adds to a tool call: the runtime's gate looks the tool up and
// reads its effects (refusing non-reads for an approver that allows only reads), and the rules
// read the effects again and match them. Set against the same policy written by tool names (what
// the rules did before effects), for a `read` of tool-fs, whose call is also timed whole.
import { Context, Service } from '@deepseek-ai/cordis'
import SystemPrompt from '@loom/system-prompt'
import ToolRuntime, { type ApprovalAnswer } from '@loom/tools'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as toolFs from '../../tool-fs/src/index.ts'
import * as permissions from '../src/index.ts'

export interface GateFigure {
  bench: 'permissions/gate by effect'
  /** Median time the effect rules add to one call over the same policy by tool names (µs). */
  added_us: number
  /** Median time of one `read` call of tool-fs through the runtime under the effect rules (µs). */
  read_call_us: number
  /** `added_us` as a share of a read call. */
  overhead: number
}

/** The default bundle's rules, and the same decisions written by tool names. */
const BY_EFFECT: permissions.Rule[] = [
  { effects: ['outside'], action: 'ask' },
  { effects: ['read', 'network'], action: 'allow' },
  { effects: ['write', 'execute'], action: 'ask', unattended: 'allow' },
]
const BY_NAME: permissions.Rule[] = [
  { tool: 'read', action: 'allow' },
  { tool: 'bash', action: 'ask', unattended: 'allow' },
  { tool: 'write', action: 'ask', unattended: 'allow' },
]

class Headless extends Service {
  constructor(ctx: Context) {
    super(ctx, 'approver')
  }
  async approve(): Promise<ApprovalAnswer> {
    return { kind: 'allow' }
  }
}

async function runtime(workspace: string, rules: permissions.Rule[]): Promise<ToolRuntime> {
  const root = new Context()
  await root.plugin(SystemPrompt)
  await root.plugin(ToolRuntime)
  await root.plugin(Headless)
  await root.plugin(toolFs, { root: workspace } as toolFs.Config)
  await root.plugin(permissions, { rules, default: 'ask' } as permissions.Config)
  return root.get('tools')!
}

const median = (samples: number[]) => samples.slice().sort((a, b) => a - b)[samples.length >> 1]
const signal = new AbortController().signal

/** Mean µs per `read` call over `calls` calls. */
async function timeReads(tools: ToolRuntime, calls: number): Promise<number> {
  const start = process.hrtime.bigint()
  for (let i = 0; i < calls; i++) {
    const result = await tools.execute({ callId: `c${i}`, name: 'read', arguments: { path: 'notes.txt' }, signal })
    if (result.isError) throw new Error(`bench read failed: ${JSON.stringify(result.content)}`)
  }
  return Number(process.hrtime.bigint() - start) / 1e3 / calls
}

export async function benchGate(rounds = 15, calls = 1000): Promise<GateFigure> {
  const workspace = mkdtempSync(join(tmpdir(), 'loom-bench-gate-'))
  try {
    writeFileSync(join(workspace, 'notes.txt'), 'alpha\nbeta\ngamma\n')
    const byName = await runtime(workspace, BY_NAME)
    const byEffect = await runtime(workspace, BY_EFFECT)
    await timeReads(byName, 100)
    await timeReads(byEffect, 100)
    // Rounds alternate, so a slow phase of the machine falls on both.
    const added: number[] = []
    const whole: number[] = []
    for (let round = 0; round < rounds; round++) {
      // Which goes first alternates too: the second of a pair runs on a warmer machine.
      const first = round % 2 === 0
      const base = first ? await timeReads(byName, calls) : 0
      const gated = await timeReads(byEffect, calls)
      const after = first ? base : await timeReads(byName, calls)
      added.push(gated - after)
      whole.push(gated)
    }
    const addedUs = median(added)
    const readCall = median(whole)
    return {
      bench: 'permissions/gate by effect',
      added_us: Math.round(addedUs * 10) / 10,
      read_call_us: Math.round(readCall),
      overhead: Math.round((addedUs / readCall) * 10000) / 10000,
    }
  } finally {
    rmSync(workspace, { recursive: true, force: true })
  }
}
