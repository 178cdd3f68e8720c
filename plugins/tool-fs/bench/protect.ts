// What the protected-path check adds to a file tool's call. A write or edit resolves its target once
// (the check and the body share it), so the check adds: the tool's lookup and argument validation,
// and a comparison of the resolved target with each protected path; a tool that declares nothing
// is passed by its name. Timing a whole `write` with and without the check would measure the disk
// (an fsync varies more than the check costs), so the added time is measured on its own (tools with
// a trivial body, with and without the dozen paths a CLI deployment protects) and set against a
// real `write` call.
import { Context } from '@deepseek-ai/cordis'
import SystemPrompt from '@loom/system-prompt'
import ToolRuntime, { defineTool } from '@loom/tools'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as toolFs from '../src/index.ts'

export interface ProtectFigure {
  bench: 'tool-fs/protected-path check'
  protected: number
  /** Median time the check adds to one call of a tool that declares what it writes (µs). */
  added_us: number
  /** The same for a tool that declares nothing (bash, read, grep, MCP tools): the check stops at the declaration. */
  added_us_no_writes: number
  /** Median time of one `write` call of tool-fs, through the runtime, the check included (µs). */
  write_call_us: number
  /** `added_us` as a share of a write call. */
  overhead: number
}

/** The paths a CLI deployment in `workspace` protects (config layers, loom.yml places, .loom/, $LOOM_HOME, git, path plugins). */
const PROTECTED = [
  'loom.yml',
  'patch.yml',
  '.loom',
  'home/.loom',
  '.git/hooks',
  '.git/config',
  'plugins/a.ts',
  'plugins/b',
  'deploy',
  'sub/loom.yml',
  'sub/.loom',
  'vendor/plugin',
]

async function runtime(workspace: string, protect: readonly string[], target: string): Promise<ToolRuntime> {
  const root = new Context()
  await root.plugin(SystemPrompt)
  await root.plugin(ToolRuntime)
  // The plugin's schema fills in the other keys.
  await root.plugin(toolFs, { root: workspace } as toolFs.Config)
  await root.plugin({
    name: 'deployment',
    inject: ['tools'],
    apply: ctx => {
      for (const path of protect) ctx.tools.protect(path, 'bench')
      const parameters = { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] }
      ctx.tools.register(
        defineTool({ name: 'probe', description: 'declares the target a write resolved', parameters, writes: () => [target], execute: () => 'ok' }),
      )
      ctx.tools.register(defineTool({ name: 'plain', description: 'declares nothing', parameters, execute: () => 'ok' }))
    },
  })
  return root.get('tools')!
}

const median = (samples: number[]) => samples.slice().sort((a, b) => a - b)[samples.length >> 1]
const signal = new AbortController().signal

/** Mean µs per call of `calls` calls of `name`. */
async function timeCalls(tools: ToolRuntime, name: string, args: () => unknown, calls: number): Promise<number> {
  const start = process.hrtime.bigint()
  for (let i = 0; i < calls; i++) {
    const result = await tools.execute({ callId: `c${i}`, name, arguments: args(), signal })
    if (result.isError) throw new Error(`bench ${name} failed: ${JSON.stringify(result.content)}`)
  }
  return Number(process.hrtime.bigint() - start) / 1e3 / calls
}

export async function benchProtect(rounds = 15, calls = 2000, writes = 200): Promise<ProtectFigure> {
  const workspace = mkdtempSync(join(tmpdir(), 'loom-bench-protect-'))
  try {
    mkdirSync(join(workspace, 'src'))
    const target = join(workspace, 'src', 'file.txt')
    writeFileSync(target, '')
    const without = await runtime(workspace, [], target)
    const guarded = await runtime(
      workspace,
      PROTECTED.map(path => join(workspace, path)),
      target,
    )
    const probe = () => ({ path: 'src/file.txt' })
    // The median over rounds of the difference; rounds alternate, so a slow phase of the machine falls on both.
    const added = async (name: string) => {
      const samples: number[] = []
      for (let round = 0; round < rounds; round++) {
        const base = await timeCalls(without, name, probe, calls)
        samples.push((await timeCalls(guarded, name, probe, calls)) - base)
      }
      return median(samples)
    }
    const addedUs = await added('probe')
    const addedPlain = await added('plain')
    let n = 0
    const write = () => ({ path: `src/write-${n++ % 16}.txt`, content: 'alpha\n' })
    await timeCalls(guarded, 'write', write, 20)
    const writeSamples: number[] = []
    for (let i = 0; i < 5; i++) writeSamples.push(await timeCalls(guarded, 'write', write, writes / 5))
    const writeCall = median(writeSamples)
    return {
      bench: 'tool-fs/protected-path check',
      protected: PROTECTED.length,
      added_us: Math.round(addedUs * 10) / 10,
      added_us_no_writes: Math.round(addedPlain * 10) / 10,
      write_call_us: Math.round(writeCall),
      overhead: Math.round((addedUs / writeCall) * 10000) / 10000,
    }
  } finally {
    rmSync(workspace, { recursive: true, force: true })
  }
}
